"""`judge(task, candidate_dir)`: the one entry point that turns delivered files into a verdict."""

from __future__ import annotations

import secrets
import shutil
import time
import traceback
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path

from optarena import __version__
from optarena.errors import MissingPrerequisiteError, OptarenaError
from optarena.files import temporary_tree
from optarena.identity import judge_sha256, runtime_fingerprint
from optarena.judge._result import CandidateRef, Check, JudgeRef, JudgeResult, TaskRef
from optarena.judge._seal import broken, judge_code_files, take_seal
from optarena.judge.correctness import Recorder, fail, run_correctness
from optarena.judge.speed import SpeedOptions, SpeedResult, count_instructions, measure_candidate
from optarena.sandbox import SandboxPolicy
from optarena.tasks import Task, unmet_requirements

JUDGE_ERROR = "judge_error"  # reason code: the judge itself failed (see `judge`)


def _now() -> str:
    return datetime.now(UTC).isoformat(timespec="milliseconds")


def new_seed() -> int:
    """A fresh secret seed per judgement: inputs cannot be known before the judgement starts."""
    return secrets.randbits(63)


def copy_candidate(task: Task, candidate_dir: Path, dest: Path) -> list[str]:
    """Copy only the editable files: the candidate is exactly what the scope allows."""
    files = task.editable_files(candidate_dir)
    dest.mkdir(parents=True, exist_ok=True)
    for rel in files:
        target = dest / rel
        target.parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(candidate_dir / rel, target)
    return files


@dataclass(frozen=True)
class JudgeOptions:
    """How one judgement runs; None fields fall back to the task's declared defaults."""

    seed: int | None = None
    measure: bool = True  # speed phase after correctness (never for a rejected candidate)
    budget_s: float | None = None  # measurement time budget
    min_effect: float | None = None  # the no_difference band (an interval inside it); None = task's
    aa: bool = False  # also run an A/A control (baseline vs itself) and report the noise floor
    progress: Callable[[str, float], None] | None = None  # (phase message, fraction done)
    sandbox: SandboxPolicy | None = None  # isolation measures; None = all the machine allows
    instructions: bool = False  # also count instructions per call (valgrind), beside time


def _measure(
    task: Task, private: Path, tmp: Path, seed: int, options: JudgeOptions, deadline: float
) -> SpeedResult:
    """The speed phase for an accepted candidate (see `speed/_phase`)."""
    opts = SpeedOptions(
        seed=seed,
        budget_s=options.budget_s,
        min_effect=options.min_effect,
        aa=options.aa,
        instructions=options.instructions,
        progress=options.progress,
        sandbox=options.sandbox,
        deadline=deadline,
    )
    count = count_instructions(task, seed, options.sandbox)
    return measure_candidate(task, private, tmp / "speed", opts, count)


# The judge's message in a `judge_error` check: enough to file a bug, bounded in size.
_ERROR_MESSAGE_CHARS = 500
_TRACEBACK_TAIL_CHARS = 1500


def judge(task: Task, candidate_dir: Path, options: JudgeOptions | None = None) -> JudgeResult:
    """Correctness of the candidate's editable files on fresh inputs; reasons for every failure.

    Bad input from the user (no such directory, a task this machine cannot run, bad options)
    raises OptarenaError. Anything else that goes wrong while judging, whether a bug in optarena
    or a state the candidate provoked, ends in a recorded rejection with reason `judge_error`
    and the judge's message: a candidate must never turn its judgement into a crash without a
    verdict (nor, of course, into an acceptance). KeyboardInterrupt still interrupts."""
    options = options or JudgeOptions()
    candidate_dir = Path(candidate_dir)
    if not candidate_dir.is_dir():
        raise OptarenaError(f"candidate directory {candidate_dir} does not exist")
    unmet = unmet_requirements(task.spec.requirements)
    if unmet:
        raise MissingPrerequisiteError(
            f"task {task.id} cannot be judged on this machine: {'; '.join(unmet)}"
        )
    seed = new_seed() if options.seed is None else options.seed
    started, t0 = _now(), time.monotonic()
    try:
        return _judge(task, candidate_dir, options, seed, started, t0)
    except OptarenaError:
        raise
    except Exception as e:  # not BaseException: KeyboardInterrupt and SystemExit propagate
        return _judge_error(task, candidate_dir, seed, started, t0, e)


def _judge(
    task: Task, candidate_dir: Path, options: JudgeOptions, seed: int, started: str, t0: float
) -> JudgeResult:
    """The judgement proper; `judge` turns any unexpected exception from here into a verdict."""
    deadline = t0 + task.spec.limits.total_timeout_s
    code_files = judge_code_files()
    seal = take_seal(task, code_files)
    _ = task.oracle, task.generator  # imported before any candidate code runs
    with temporary_tree("optarena-judge-") as tmp:
        private = Path(tmp) / "candidate"
        files = copy_candidate(task, candidate_dir, private)
        if task.spec.entry.file not in files:
            rec = Recorder()
            rec.add(
                fail(
                    "load",
                    "entry_missing",
                    f"{task.spec.entry.file} is not among the candidate's editable files",
                ),
                None,
            )
            worker: dict[str, object] = {}
            sandbox: dict[str, object] = {}
        else:
            report = run_correctness(
                task, private, seed, Path(tmp) / "worker.log", deadline, policy=options.sandbox
            )
            rec, worker, sandbox = report.recorder, report.worker, report.sandbox
        correctness_s = time.monotonic() - t0
        speed = SpeedResult()
        if rec.passed and options.measure:
            speed = _measure(task, private, Path(tmp), seed, options, deadline)
        cand_sha = task.candidate_sha256(candidate_dir)
    changed = broken(seal, take_seal(task, code_files))
    if changed:
        detail = f"{' and '.join(changed)} changed while the candidate was being judged"
        rec.add(fail("integrity", "judge_tampered", detail), None)
    if speed.failure is not None:
        f = speed.failure.finding
        rec.add(fail(f.name, f.code or f.name, f"while timed: {f.detail}"), speed.failure.workload)
    return JudgeResult(
        task=TaskRef(id=task.id, version=task.spec.version, sha256=task.sha256),
        judge=JudgeRef(version=__version__, sha256=judge_sha256()),
        candidate=CandidateRef(sha256=cand_sha, files=files, path=str(candidate_dir.resolve())),
        runtime=runtime_fingerprint(),
        seed=seed,
        verdict="accepted" if rec.passed else "rejected",
        checks=rec.check_list(),
        reasons=rec.reasons,
        reason_codes=rec.codes,
        metrics=speed.metrics if speed.metrics and rec.passed else None,
        limits=task.spec.limits.model_dump(),
        worker=worker,
        sandbox=sandbox,
        integrity={**seal.as_dict(), "status": "changed" if changed else "unchanged"},
        timings_s={"correctness": round(correctness_s, 4), **speed.seconds},
        started_at=started,
        finished_at=_now(),
    )


def _judge_error(
    task: Task, candidate_dir: Path, seed: int, started: str, t0: float, error: Exception
) -> JudgeResult:
    """A rejection recording the judge's own failure, built only from what is still known.

    Deliberately independent of the correctness machinery (Recorder), which may be what
    failed; the candidate's hash and files are computed again and left empty if that fails
    too, so that this path itself only depends on the task and the judge's identity."""
    message = _bounded(f"{type(error).__name__}: {_safe_str(error)}", _ERROR_MESSAGE_CHARS)
    tail = "".join(traceback.format_exception(error))[-_TRACEBACK_TAIL_CHARS:]
    detail = f"the judge failed while judging: {message}; traceback (last lines): {tail}"
    try:
        cand_sha, files = task.candidate_sha256(candidate_dir), task.editable_files(candidate_dir)
    except Exception:  # the candidate directory may be what broke the judgement
        cand_sha, files = "", []
    return JudgeResult(
        task=TaskRef(id=task.id, version=task.spec.version, sha256=task.sha256),
        judge=JudgeRef(version=__version__, sha256=judge_sha256()),
        candidate=CandidateRef(sha256=cand_sha, files=files, path=str(candidate_dir.resolve())),
        runtime=runtime_fingerprint(),
        seed=seed,
        verdict="rejected",
        checks=[Check(name="judge", workload=None, passed=False, detail=detail, code=JUDGE_ERROR)],
        reasons=[f"{JUDGE_ERROR}: {detail}"],
        reason_codes=[JUDGE_ERROR],
        metrics=None,
        limits=task.spec.limits.model_dump(),
        integrity={"status": "unknown"},
        timings_s={"until_error": round(time.monotonic() - t0, 4)},
        started_at=started,
        finished_at=_now(),
    )


def _safe_str(error: BaseException) -> str:
    try:
        return str(error)
    except Exception:
        return "(the exception's message could not be formatted)"


def _bounded(text: str, limit: int) -> str:
    return text if len(text) <= limit else text[: limit - 3] + "..."
