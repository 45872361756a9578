"""`compare(task, a, b)`: any two candidates under the judge's speed protocol, and the A/A control.

Both candidates are judged for correctness first (a wrong candidate never gets a speed
result); then they are measured against each other exactly as a candidate is measured against
the baseline, except that both arms are untrusted: either one's timings are cross-checked
against the OS, and either one going wrong while timed ends the comparison.
"""

from __future__ import annotations

import time
from pathlib import Path

from pydantic import BaseModel, ConfigDict, Field

from optarena.errors import OptarenaError
from optarena.files import temporary_tree
from optarena.judge._judge import JudgeOptions, judge, new_seed
from optarena.judge._result import TaskRef
from optarena.judge.speed import MAIN_STREAM, SpeedOptions, apply_floor, compare_dirs, run_aa
from optarena.records import AAControl, Comparison
from optarena.tasks import Task

COMPARE_SCHEMA_VERSION = 1


class _Model(BaseModel):
    model_config = ConfigDict(extra="forbid")


class ArmRef(_Model):
    path: str
    sha256: str = Field(description="hash of the arm's editable files")
    verdict: str = Field(description="its correctness verdict: accepted | rejected")
    reasons: list[str] = Field(description="why it was rejected, if it was")


class CompareResult(_Model):
    """`optarena compare --json`. `comparison` is null unless both arms were correct and
    neither went wrong while timed (then `failure` says which and why)."""

    schema_version: int = COMPARE_SCHEMA_VERSION
    task: TaskRef
    seed: int
    a: ArmRef
    b: ArmRef
    comparison: Comparison | None
    aa: AAControl | None = None
    failure: str | None = None
    timings_s: dict[str, float] = Field(default_factory=dict)


def _opts(options: JudgeOptions, seed: int) -> SpeedOptions:
    return SpeedOptions(
        seed=seed,
        budget_s=options.budget_s,
        min_effect=options.min_effect,
        aa=options.aa,
        progress=options.progress,
        sandbox=options.sandbox,
    )


def compare(
    task: Task, a_dir: Path, b_dir: Path, options: JudgeOptions | None = None
) -> CompareResult:
    """Correctness of both, then a over b under the paired protocol (and A/A when asked)."""
    options = options or JudgeOptions()
    for d in (a_dir, b_dir):
        if not Path(d).is_dir():
            raise OptarenaError(f"candidate directory {d} does not exist")
    seed = new_seed() if options.seed is None else options.seed
    t0 = time.monotonic()
    check = JudgeOptions(seed=seed, measure=False, sandbox=options.sandbox)
    arms = [judge(task, Path(d), check) for d in (a_dir, b_dir)]
    refs = [
        ArmRef(
            path=str(Path(d).resolve()),
            sha256=r.candidate.sha256,
            verdict=r.verdict,
            reasons=r.reasons,
        )
        for d, r in zip((a_dir, b_dir), arms, strict=True)
    ]
    result = CompareResult(
        task=TaskRef(id=task.id, version=task.spec.version, sha256=task.sha256),
        seed=seed,
        a=refs[0],
        b=refs[1],
        comparison=None,
        timings_s={"correctness": round(time.monotonic() - t0, 3)},
    )
    if any(r.verdict != "accepted" for r in arms):
        return result
    opts = _opts(options, seed)
    labels = {"a": refs[0].path, "b": refs[1].path}
    with temporary_tree("optarena-compare-") as tmp:
        t1 = time.monotonic()
        dirs = (Path(a_dir), Path(b_dir))
        main = compare_dirs(task, dirs, Path(tmp), MAIN_STREAM, opts, labels)
        result.timings_s["measurement"] = round(time.monotonic() - t1, 3)
        if main.failure is not None:
            f = main.failure
            result.failure = f"arm {f.arm}: {f}"
            return result
        assert main.comparison is not None
        if options.aa:
            t2 = time.monotonic()
            aa, result.aa = run_aa(task, Path(tmp), opts)
            apply_floor(main, aa, main.comparison.protocol.min_effect)
            result.timings_s["aa"] = round(time.monotonic() - t2, 3)
    result.comparison = main.comparison
    return result


def aa_control(task: Task, budget_s: float | None = None, seed: int | None = None) -> AAControl:
    """The task's baseline against a copy of itself (task qualification, noise floors)."""
    opts = SpeedOptions(seed=new_seed() if seed is None else seed, budget_s=budget_s)
    with temporary_tree("optarena-aa-") as tmp:
        _, control = run_aa(task, Path(tmp), opts)
    return control
