"""Judging a candidate of an external task: the project's own gate and benchmark, frozen.

Two clean clones at the frozen base (baseline, and candidate with only its in-scope changes),
set-up in each, the holdout copied into each; the gate on the baseline (a failure there is the
task's, not the candidate's) and on the candidate; then the benchmark on both in AB/BA rounds
from a random start, the metric read from each run, the same estimate, interval and four-way
verdict as built-in tasks over rounds. Without a gate the verdict is `unverified` and a speed
verdict is never `improved`; without a benchmark there are no metrics. Gaps are recorded.
"""

from __future__ import annotations

import hashlib
import os
import secrets
import subprocess
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from optarena.errors import OptarenaError
from optarena.files import printable, temporary_tree
from optarena.judge._result import Check
from optarena.judge.external._bench import bench_once, benchmark
from optarena.judge.external._ctx import BrokenTaskError, Ctx, Rejected
from optarena.judge.external._run import JUnitReport, read_junit
from optarena.judge.external._setup import restore as restore_setup
from optarena.judge.external._setup import setup_key
from optarena.judge.external._setup import store as store_setup
from optarena.judge.external._tree import SealedTree, TreeSize, copy_over, tree_digests
from optarena.records import ExternalMetrics
from optarena.sandbox import SandboxPolicy
from optarena.tasks import in_scope
from optarena.tasks.external import Environment, FrozenExternal, git, git_bytes, readable

__all__ = ["BrokenTaskError", "ExternalJudgement", "judge_external"]

EXTERNAL_JUDGE_SCHEMA_VERSION = 2  # 2: environment, timings, setup; metrics with os_check


class ExternalJudgement(BaseModel):
    model_config = ConfigDict(extra="forbid")

    schema_version: int = EXTERNAL_JUDGE_SCHEMA_VERSION
    task: dict[str, Any] = Field(description="id, version and the frozen hashes")
    candidate: dict[str, Any] = Field(description="kind (patch or directory), sha256, changes")
    seed: int
    verdict: Literal["accepted", "rejected", "unverified"]
    reason_codes: list[str]
    reasons: list[str]
    checks: list[Check]
    metrics: ExternalMetrics | None = None
    gaps: list[str] = Field(description="no_quality_gate, no_benchmark")
    ignored: list[str] = Field(description="new files outside the scope, listed and not judged")
    environment: dict[str, Any] = Field(
        default_factory=dict,
        description="which python3 the commands found (path, version), the declared one",
    )
    timings: dict[str, float] = Field(
        default_factory=dict, description="seconds per phase: clones, set-up, gate, benchmark"
    )
    setup: dict[str, str] = Field(
        default_factory=dict, description="per arm: ran, or cached (`[setup] cache = true`)"
    )
    started_at: str
    finished_at: str


def failed_logs_dir(task_id: str) -> Path:
    """A new directory (made when first needed) for the whole output of failing commands:
    `$XDG_CACHE_HOME/optarena/external-logs/ID-TIME-RANDOM`, kept after the judgement."""
    cache = Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache")
    stamp = datetime.now(UTC).strftime("%Y%m%dT%H%M%S")
    return cache / "optarena" / "external-logs" / f"{task_id}-{stamp}-{secrets.token_hex(3)}"


def _clone(frozen: FrozenExternal, dest: Path) -> None:
    git(["clone", "-q", "--shared", "--no-checkout", str(frozen.repo), str(dest)], dest.parent)
    git(["checkout", "-q", "--detach", frozen.frozen.base_commit], dest)


def _apply(candidate: Path, tree: Path) -> str:
    """Put the candidate's files (or patch) into the clone; returns its kind."""
    if candidate.is_file():
        try:
            subprocess.run(
                ["git", "apply", "--whitespace=nowarn", str(candidate.resolve())],
                cwd=tree, check=True, capture_output=True, timeout=60,
            )  # fmt: skip
        except subprocess.CalledProcessError as e:
            err = readable(os.fsdecode(e.stderr.strip()[-500:]))  # names in any encoding
            raise Rejected("candidate", "patch_does_not_apply", err) from None
        return "patch"
    if not candidate.is_dir():
        raise OptarenaError(f"candidate {candidate}: neither a patch file nor a directory")
    copy_over(candidate, tree, skip=(".git",))
    return "directory"


def _scope(frozen: FrozenExternal, tree: Path) -> tuple[list[str], list[str], str]:
    """(changed in scope, new files ignored, sha256 of the in-scope diff); raises Rejected for
    a tracked file outside the scope that changed."""
    editable = frozen.spec.project.editable
    status = git(
        ["status", "--porcelain", "-z", "--no-renames", "--untracked-files=all"], tree, strip=False
    )
    changed: list[str] = []
    ignored: list[str] = []
    outside: list[str] = []
    for entry in filter(None, status.split("\0")):
        code, path = entry[:2], entry[3:]
        if code == "??":
            (changed if in_scope(path, editable) else ignored).append(path)
        elif in_scope(path, editable):
            changed.append(path)
        else:
            outside.append(path)
    if outside:
        shown = ", ".join(readable(p) for p in outside)
        raise Rejected("scope", "out_of_scope", f"changed outside the editable scope: {shown}")
    for path in ignored:
        (tree / path).unlink()
    git(["add", "-A"], tree)
    diff = git_bytes(["diff", "--cached", "--binary"], tree).strip()  # any encoding: bytes
    return [readable(p) for p in changed], [readable(p) for p in ignored], _sha256(diff)


def _sha256(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def _watched(frozen: FrozenExternal, tree: Path) -> frozenset[str]:
    """Files tracked at base outside the editable scope, and the holdout's: the project's own
    tests, benchmark and verifier. Read before any command has run in the tree."""
    tracked = git(["ls-files", "-z"], tree, strip=False).split("\0")
    out = {p for p in tracked if p and not in_scope(p, frozen.spec.project.editable)}
    if frozen.holdout is not None:
        out |= {q.relative_to(frozen.holdout).as_posix() for q in frozen.holdout.rglob("*")}
    return frozenset(out)


def _prepare(ctx: Ctx, tree: Path, arm: str, pristine: Path) -> None:
    """Holdout, then set-up, then the seal; a failure is the task's for the baseline, the
    candidate's else."""
    f = ctx.frozen
    if f.holdout is not None:
        copy_over(f.holdout, tree)
    before = tree_digests(tree)
    setup = f.spec.setup
    key = None
    if setup is not None and setup.cache:
        key = setup_key(setup.command, f.spec.env, f.frozen.environment_sha256, before)
    during = f"set-up `{f.spec.setup.command}`" if f.spec.setup else "set-up"
    if setup is not None and key is not None and restore_setup(key, tree):
        ctx.setup[arm] = "cached"
    elif setup is not None:
        r = ctx.run(setup.command, tree, setup.timeout_s)
        if not r.ok:
            detail = f"set-up {r.failure()}"
            if arm == "baseline":
                raise BrokenTaskError(f, "setup.command", detail, r)
            raise Rejected("setup", "setup_failed", detail)
        ctx.setup[arm] = "ran"
    _sized(ctx, tree, arm, during)  # before the set-up cache or the seal reads the tree
    if key is not None and ctx.setup.get(arm) == "ran":
        store_setup(key, tree, before)
    try:
        ctx.sealed[tree] = SealedTree.seal(tree, pristine, ctx.watched, before, during)
    except (RecursionError, OSError) as e:  # os.walk recurses; a path past PATH_MAX
        why = "directories nested too deep" if isinstance(e, RecursionError) else f"{e}"
        detail = f"{during} left what the judge cannot copy: {printable(why)}"
        if arm == "baseline":
            raise BrokenTaskError(f, "setup.command", detail) from None
        raise Rejected("setup", "setup_failed", detail) from None


def _sized(ctx: Ctx, tree: Path, arm: str, during: str) -> None:
    """The baseline's prepared tree sets how large the candidate's may be (`TreeSize`)."""
    size = TreeSize.of(tree)
    if arm == "baseline" or ctx.prepared is None:
        ctx.prepared = size
    elif why := size.beyond(ctx.prepared):
        raise Rejected("setup", "setup_failed", f"{during} {why}")


def _untouched(ctx: Ctx, trees: dict[str, Path]) -> None:
    """Reject a candidate whose code changed a watched file that the baseline's own commands
    left alone (what both arms change is the project's doing, e.g. a regenerated file)."""
    cand, base = ctx.sealed.get(trees["candidate"]), ctx.sealed.get(trees["baseline"])
    if cand is None or base is None:
        return
    for tree in trees.values():
        ctx.settle(tree)
    changed = {p: during for p, during in cand.changed.items() if p not in base.changed}
    if changed:
        listed = ", ".join(f"{readable(p)} (during {d})" for p, d in sorted(changed.items())[:20])
        raise Rejected(
            "project_files", "project_modified",
            f"the candidate's code changed files outside the editable scope: {listed}; every "
            "command still ran on the files as prepared",
        )  # fmt: skip


def _gate(ctx: Ctx, tree: Path, arm: str) -> None:
    q = ctx.frozen.spec.quality
    if q is None:
        return
    r = ctx.run(q.command, tree, q.timeout_s)
    report = read_junit(tree, q.junit) if q.junit else None
    if r.ok:
        if q.junit:
            _gate_report(ctx, q.command, q.junit, report, arm)
        if arm == "candidate":
            ctx.ok("quality_gate", f"`{q.command}` passed in {r.wall_s:.1f} s")
        return
    failing = report.failing if report else []
    named = f"failing: {', '.join(failing[:20])}; " if failing else ""
    if arm == "baseline":
        detail = f"the gate fails: {named}{r.failure()}"
        raise BrokenTaskError(ctx.frozen, "quality.command", detail, r)
    raise Rejected("quality_gate", "quality_gate_failed", f"{named}{r.failure()}")


def _gate_report(ctx: Ctx, command: str, junit: str, report: JUnitReport | None, arm: str) -> None:
    """A passing exit status is only believed with the report agreeing: the gate's process
    runs the candidate's code, which can set the exit status (an atexit handler calling
    os._exit(0) passed a broken candidate). The report must exist, list no failure, and cover
    at least as many tests as on the baseline (the tests are out of scope: an honest candidate
    does not make fewer of them run)."""
    if report is None:
        why = f"`{command}` exited 0 but wrote no readable JUnit report at {junit}"
    elif report.failing:
        why = f"`{command}` exited 0 while its report lists failing tests: " + ", ".join(
            report.failing[:20]
        )
    elif arm == "candidate" and (base := ctx.baseline_report) and report.tests < base.tests:
        why = f"the report lists {report.tests} tests where the baseline's lists {base.tests}"
        missing = sorted(base.names - report.names)
        if missing:
            why += f"; missing: {', '.join(missing[:20])}" + (" ..." if len(missing) > 20 else "")
    else:
        if arm == "baseline":
            ctx.baseline_report = report
        return
    if arm == "baseline":
        raise BrokenTaskError(ctx.frozen, "quality.junit", why)
    raise Rejected("quality_gate", "quality_gate_failed", why)


@dataclass
class _Outcome:
    cand_info: dict[str, Any]
    ignored: list[str] = field(default_factory=list)
    metrics: ExternalMetrics | None = None
    environment: dict[str, Any] = field(default_factory=dict)
    rejected: Rejected | None = None


_WHICH_PYTHON = (
    "command -v python3 && python3 -c 'import sys; print(sys.version.split()[0])' || true"
)


def _which_python(ctx: Ctx, tree: Path) -> dict[str, Any]:
    """Which `python3` the commands get, and its version, asked inside the sandbox: a shell's
    own interpreter is not what a sandboxed command finds on its PATH."""
    r = ctx.run(_WHICH_PYTHON, tree, 60)
    lines = r.output.strip().splitlines() if r.ok else []
    out: dict[str, Any] = {"python3": lines[0] if lines else None}
    out["python3_version"] = lines[1] if len(lines) > 1 else None
    env = ctx.environment
    if env is not None:
        out["declared_python"] = None if env.python is None else str(env.python)
        out["visible"] = [str(p) for p in env.visible()]
    return out


def _judge_in(ctx: Ctx, tmp: Path, candidate: Path, out: _Outcome, seed: int | None) -> None:
    """Clones, scope, set-up, gates and (with a seed) the benchmark, each phase timed."""
    frozen = ctx.frozen
    trees = {"baseline": tmp / "baseline", "candidate": tmp / "candidate"}
    with ctx.timing("clone_and_scope"):
        for tree in trees.values():
            _clone(frozen, tree)
        out.cand_info["kind"] = _apply(candidate, trees["candidate"])
        changed, out.ignored, sha = _scope(frozen, trees["candidate"])
        out.cand_info.update({"changed": changed, "sha256": sha})
        ctx.ok("scope", f"{len(changed)} file(s) changed in scope")
    out.environment = _which_python(ctx, trees["baseline"])
    ctx.watched = _watched(frozen, trees["baseline"])
    for arm, tree in trees.items():
        with ctx.timing(f"setup.{arm}"):
            _prepare(ctx, tree, arm, tmp / "pristine" / arm)
    for arm, tree in trees.items():
        with ctx.timing(f"gate.{arm}"):
            _gate(ctx, tree, arm)
    _untouched(ctx, trees)
    if seed is not None and frozen.spec.benchmark is not None:
        with ctx.timing("benchmark"):
            out.metrics = benchmark(ctx, trees, seed)
        _untouched(ctx, trees)


@dataclass(frozen=True)
class BaseRun:
    """The task's own commands once on base, as `task freeze` runs them: seconds per phase,
    the gate's test count, the metric and which python3 the commands found."""

    timings: dict[str, float]
    tests: int | None
    metric: float | None
    environment: dict[str, Any]


def check_base(frozen: FrozenExternal, policy: SandboxPolicy | None = None) -> BaseRun:
    """Set-up, gate and one benchmark run (at the scale's high size) on a clone of base, as
    the judge would run them. BrokenTaskError (naming the field, quoting the output) if any
    fails: a spec that cannot work is found before any agent is paid to run on it."""
    ctx = Ctx(frozen, policy, [], logs=failed_logs_dir(frozen.spec.id))
    if frozen.spec.environment != Environment():
        ctx.environment = frozen.environment()
    metric = None
    with temporary_tree("optarena-external-base-") as tmp:
        tree = tmp / "baseline"
        _clone(frozen, tree)
        environment = _which_python(ctx, tree)
        ctx.watched = _watched(frozen, tree)
        with ctx.timing("setup"):
            _prepare(ctx, tree, "baseline", tmp / "pristine")
        with ctx.timing("gate"):
            _gate(ctx, tree, "baseline")
        b = frozen.spec.benchmark
        if b is not None:
            with ctx.timing("benchmark"):
                metric, _ = bench_once(ctx, tree, "baseline", b.scale.high if b.scale else None)
    tests = ctx.baseline_report.tests if ctx.baseline_report else None
    return BaseRun(ctx.timings, tests, metric, environment)


def judge_external(
    frozen: FrozenExternal,
    candidate: Path,
    *,
    measure: bool = True,
    seed: int | None = None,
    policy: SandboxPolicy | None = None,
    logs: Path | None = None,
) -> ExternalJudgement:
    """Judge `candidate` (a patch against base, or a directory of files) for `frozen`.
    BrokenTaskError (exit 2) when the baseline itself fails; every candidate failure is a
    recorded rejection. `logs`: where a failing command's whole output is kept (default: a new
    directory under optarena's cache, made only if a command fails)."""
    seed = secrets.randbits(63) if seed is None else seed
    started = datetime.now(UTC).isoformat(timespec="seconds")
    declared = frozen.spec.environment != Environment()
    ctx = Ctx(frozen, policy, [], logs=logs or failed_logs_dir(frozen.spec.id))
    ctx.environment = frozen.environment() if declared else None
    out = _Outcome(cand_info={"path": str(candidate)})
    # removed however deep a rejected candidate's tree nests (never put back after its failing
    # command): TemporaryDirectory's rmtree raised RecursionError and left it all behind
    with temporary_tree("optarena-external-") as tmp:
        try:
            _judge_in(ctx, tmp, candidate, out, seed if measure else None)
        except Rejected as r:
            out.rejected = r
            ctx.fail(r.name, r.code, r.detail)
    if out.rejected is not None:
        verdict: Literal["accepted", "rejected", "unverified"] = "rejected"
        out.metrics = None
    else:
        verdict = "unverified" if frozen.spec.quality is None else "accepted"
    failed = [c for c in ctx.checks if not c.passed]
    return ExternalJudgement(
        task={
            "id": frozen.spec.id,
            "version": frozen.spec.version,
            "kind": "external",
            **frozen.frozen.model_dump(),
        },
        candidate=out.cand_info,
        seed=seed,
        verdict=verdict,
        reason_codes=list(dict.fromkeys(c.code for c in failed if c.code)),
        reasons=[f"{c.code}: {c.detail.splitlines()[0] if c.detail else ''}" for c in failed],
        checks=ctx.checks,
        metrics=out.metrics,
        gaps=frozen.gaps(),
        ignored=out.ignored,
        environment=out.environment,
        timings=ctx.timings,
        setup=ctx.setup,
        started_at=started,
        finished_at=datetime.now(UTC).isoformat(timespec="seconds"),
    )
