"""The speed phase of a judgement, the A/A control and `compare`: arms, copies, noise floors.

Both arms of a comparison run from private copies at paths of equal length (`.../a`, `.../b`):
the worker's environment names its directory, and a longer environment shifts the initial
stack, one of the layout biases a comparison must not carry.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from optarena.errors import TaskPackageError
from optarena.judge.speed._measure import Measurement, MeasurePlan, Outcome, Progress
from optarena.judge.speed._pair import ArmFailure
from optarena.judge.speed._report import OVERALL, summary_pair
from optarena.judge.speed._stats import Estimate
from optarena.records import AAControl, Comparison, Instructions, Metrics, Summary
from optarena.sandbox import SandboxPolicy
from optarena.tasks import Task

MAIN_STREAM, AA_STREAM = 0, 1
NOT_REQUESTED = Instructions(available=False, reason="not requested (--instructions)")


@dataclass(frozen=True)
class SpeedOptions:
    """What the judge's options say about measuring, frozen for the speed phase."""

    seed: int
    budget_s: float | None = None
    min_effect: float | None = None
    aa: bool = False
    instructions: bool = False
    progress: Progress | None = None
    sandbox: SandboxPolicy | None = None
    deadline: float | None = None


@dataclass
class SpeedResult:
    """Metrics for a measured candidate, or the failure that rejects it (never both)."""

    metrics: Metrics | None = None
    failure: ArmFailure | None = None
    seconds: dict[str, float] = field(default_factory=dict)


def _phase(progress: Progress | None, name: str) -> Progress | None:
    if progress is None:
        return None
    report = progress

    def tick(message: str, fraction: float) -> None:
        report(f"{name}: {message}", fraction)

    return tick


def compare_dirs(
    task: Task,
    dirs: tuple[Path, Path],
    work: Path,
    stream: int,
    opts: SpeedOptions,
    labels: dict[str, str],
) -> Outcome:
    """Measure arm a against arm b under the task's protocol (overridden by `opts`)."""
    plan = MeasurePlan.from_task(task, opts.budget_s, opts.min_effect)
    root = work / f"s{stream}"
    root.mkdir(parents=True, exist_ok=True)
    name = "A/A control" if stream == AA_STREAM else "speed"
    m = Measurement(
        task,
        dirs,
        plan,
        opts.seed,
        stream,
        root,
        progress=_phase(opts.progress, name),
        deadline=opts.deadline,
        policy=opts.sandbox,
    )
    return m.run(labels)


def noise_floor(e: Estimate) -> float | None:
    """The largest |log ratio| the A/A control cannot tell from noise; unknown (None) when the
    control has no interval (too few pairs, zero variance)."""
    if e.lo is not None and e.hi is not None:
        return max(abs(e.lo), abs(e.hi))
    return None


def apply_floor(main: Outcome, aa: Outcome, min_effect: float) -> float | None:
    """Re-decide the main verdicts: an effect inside the A/A noise is never improved/regressed."""
    assert main.comparison is not None
    comp = main.comparison
    floors = {k: noise_floor(e) for k, e in aa.estimates.items()}
    cross_floors = {k: noise_floor(e) for k, e in aa.cross.items()}

    def pair(key: str) -> tuple[Summary, Summary | None]:
        return summary_pair(
            main.estimates[key],
            main.cross.get(key),
            min_effect,
            comp.clock,
            floors.get(key),
            cross_floors.get(key),
        )

    comp.overall, comp.crosscheck = pair(OVERALL)
    for w in comp.workloads:
        w.summary, w.crosscheck = pair(w.name)
    return floors.get(OVERALL)


def _aa_failure(failure: ArmFailure) -> TaskPackageError:
    return TaskPackageError(
        f"the A/A control failed: the task's baseline went wrong while being timed ({failure})"
    )


def run_aa(task: Task, work: Path, opts: SpeedOptions) -> tuple[Outcome, AAControl]:
    """The baseline against a copy of itself; a failure here is the task's, not a candidate's."""
    labels = {"a": "baseline", "b": "baseline (copy)"}
    base = task.baseline_dir
    aa = compare_dirs(task, (base, base), work, AA_STREAM, opts, labels)
    if aa.failure is not None:
        raise _aa_failure(aa.failure)
    assert aa.comparison is not None
    floor = noise_floor(aa.estimates[OVERALL])
    return aa, AAControl(
        comparison=aa.comparison, noise_floor=None if floor is None else math.expm1(floor)
    )


def measure_candidate(
    task: Task,
    candidate: Path,
    work: Path,
    opts: SpeedOptions,
    count: Callable[[tuple[Path, Path]], Instructions] | None = None,
) -> SpeedResult:
    """The speed phase of `judge`: baseline (a) against the accepted candidate (b)."""
    t0 = time.monotonic()
    labels = {"a": "baseline", "b": "candidate"}
    main = compare_dirs(task, (task.baseline_dir, candidate), work, MAIN_STREAM, opts, labels)
    seconds = {"measurement": round(time.monotonic() - t0, 3)}
    if main.failure is not None:
        if main.failure.arm == "a":
            raise TaskPackageError(
                f"task {task.id}: the baseline went wrong while being timed ({main.failure})"
            )
        return SpeedResult(failure=main.failure, seconds=seconds)
    assert main.comparison is not None
    aa_control = None
    if opts.aa:
        t1 = time.monotonic()
        aa, aa_control = run_aa(task, work, opts)
        apply_floor(main, aa, main.comparison.protocol.min_effect)
        seconds["aa"] = round(time.monotonic() - t1, 3)
    instructions = NOT_REQUESTED
    if opts.instructions and count is not None:
        t2 = time.monotonic()
        instructions = count((task.baseline_dir, candidate))
        seconds["instructions"] = round(time.monotonic() - t2, 3)
    return SpeedResult(
        metrics=to_metrics(main.comparison, aa_control, instructions), seconds=seconds
    )


def to_metrics(comparison: Comparison, aa: AAControl | None, instructions: Instructions) -> Metrics:
    return Metrics(
        **comparison.model_dump(),
        verdict=comparison.overall.verdict,
        aa=aa,
        instructions=instructions,
    )
