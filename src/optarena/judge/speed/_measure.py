"""The speed comparison of two arms: fresh process pairs until decided or out of budget.

Each pair is independent evidence (a fresh pair of processes has its own layout bias), so the
loop adds pairs, recomputes the interval over pairs after each one, and stops when the answer is
settled (`decided`), precise enough (`precise`), or the budget, the pair limit or the judgement's
deadline is reached. Statistics live in `_stats`, one pair's protocol in `_pair`.
"""

from __future__ import annotations

import math
import os
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from optarena.errors import OptarenaError
from optarena.files import remove_tree
from optarena.judge.client import native_turn
from optarena.judge.correctness import derive_seed, fail
from optarena.judge.speed._arms import pair_dirs
from optarena.judge.speed._integrity import ArmCalls, check_waiting
from optarena.judge.speed._pair import (
    ArmFailure,
    DeadlineReached,
    PairDiscarded,
    PairSession,
)
from optarena.judge.speed._report import OVERALL, Report
from optarena.judge.speed._samples import ARMS, PairPlan, PairRecord
from optarena.judge.speed._stats import (
    Estimate,
    decided,
    estimate,
    log_threshold,
    mean_rows,
    with_discards,
)
from optarena.records import Clock, Comparison, Integrity, SpeedProtocol, StopReason
from optarena.sandbox import SandboxPolicy
from optarena.tasks import Task

Progress = Callable[[str, float], None]
_INTERIM = 1000  # bootstrap resamples for the interim stop decisions
MIN_PAIRS_GRACE = 1.5  # the budget's stretch to reach min_pairs (`out_of_budget`)


@dataclass(frozen=True)
class MeasurePlan:
    """The frozen protocol for one comparison; `from_task` applies the task's defaults."""

    min_effect: float
    budget_s: float
    warmup_calls: int
    calls_per_slot: int
    rounds_per_pair: int
    min_pairs: int
    max_pairs: int
    confidence: float
    resamples: int = 4000

    @property
    def precision(self) -> float:
        """Stop once the interval's half-width is within half the minimum effect."""
        return log_threshold(self.min_effect) / 2.0

    @classmethod
    def from_task(
        cls, task: Task, budget_s: float | None = None, min_effect: float | None = None
    ) -> MeasurePlan:
        m = task.spec.measurement
        if budget_s is not None and not (math.isfinite(budget_s) and budget_s > 0):
            raise OptarenaError(f"--budget-s must be a positive number of seconds, got {budget_s}")
        if min_effect is not None and not 0.0 < min_effect < 1.0:
            raise OptarenaError(f"--min-effect must be in (0, 1), e.g. 0.03, got {min_effect}")
        return cls(
            min_effect=m.min_effect if min_effect is None else min_effect,
            budget_s=m.budget_s if budget_s is None else budget_s,
            warmup_calls=m.warmup_calls,
            calls_per_slot=m.calls_per_slot,
            rounds_per_pair=m.rounds_per_pair,
            min_pairs=m.min_pairs,
            max_pairs=m.max_pairs,
            confidence=m.confidence,
        )


@dataclass
class Outcome:
    """A finished comparison, or the arm that failed it. `estimates` allow re-deciding."""

    comparison: Comparison | None = None
    failure: ArmFailure | None = None
    estimates: dict[str, Estimate] = field(default_factory=dict)
    cross: dict[str, Estimate] = field(default_factory=dict)  # on the other clock


def _cpus() -> list[int]:
    try:
        return sorted(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        return []


def overall_log_ratios(
    pairs: Sequence[PairRecord], workloads: Sequence[str], clock: str
) -> list[float]:
    """Per pair: the mean log-ratio over timed workloads (a geometric mean on the ratio scale)."""
    return mean_rows([[p.workloads[w].log_ratio(clock) for w in workloads] for p in pairs])


class Measurement:
    """One comparison of the arms in `dirs` (a, b) under a plan; see `run`."""

    def __init__(
        self,
        task: Task,
        dirs: tuple[Path, Path],
        plan: MeasurePlan,
        seed: int,
        stream: int,
        log_dir: Path,
        progress: Progress | None = None,
        deadline: float | None = None,
        policy: SandboxPolicy | None = None,
    ) -> None:
        self.task = task
        self.dirs = dirs
        self.plan = plan
        self.seed = seed
        self.stream = stream
        self.log_dir = log_dir
        self.progress = progress
        self.deadline = deadline
        self.policy = policy
        self.workloads = [w.name for w in task.spec.workloads if w.role == "timed"]
        self.boot_seed = derive_seed(seed, 0xB007, stream)
        self.cpus = _cpus()
        self.offset = derive_seed(seed, 0xC9, stream) % max(1, len(self.cpus))
        self.discarded: list[str] = []  # why pairs that ran did not count
        self.against = {"a": 0, "b": 0}  # of them, those an arm's worker or clock failed

    def run(self, labels: dict[str, str]) -> Outcome:
        """Measure; a failure of either arm while timed ends it."""
        t0 = time.monotonic()
        pairs: list[PairRecord] = []
        try:
            reason = self._loop(pairs, t0)
        except ArmFailure as failure:
            return Outcome(failure=failure)
        used = time.monotonic() - t0
        integrity = integrity_checks(pairs, self.workloads)
        clock, note = choose_clock(integrity)
        estimates = self._estimates(pairs, clock)
        other: Clock = "wall" if clock == "cpu" else "cpu"
        cross = self._estimates(pairs, other) if _interim_clock(pairs) == "cpu" else {}
        report = Report(self.plan, self.workloads, pairs, estimates, clock, note, cross)
        comparison = report.comparison(
            labels, reason, used, self.discarded, integrity, self._protocol(pairs), self.stream
        )
        return Outcome(comparison=comparison, estimates=estimates, cross=cross)

    def _estimates(self, pairs: list[PairRecord], clock: Clock) -> dict[str, Estimate]:
        out = {
            w: self._estimate([p.workloads[w].log_ratio(clock) for p in pairs])
            for w in self.workloads
        }
        out[OVERALL] = self._estimate(overall_log_ratios(pairs, self.workloads, clock))
        return out

    def _pair_plan(self) -> PairPlan:
        p = self.plan
        return PairPlan(
            p.warmup_calls,
            p.calls_per_slot,
            p.rounds_per_pair,
            self.seed,
            self.stream,
            self.deadline,
        )

    def _cpu(self, index: int) -> int | None:
        if not self.cpus:
            return None
        return self.cpus[(index + self.offset) % len(self.cpus)]

    def _loop(self, pairs: list[PairRecord], t0: float) -> StopReason:
        """Add pairs until decided, precise, out of budget, at the pair limit or the deadline.

        Interim decisions use the CPU clock where the machine has one (the one verdicts
        normally use) and fewer bootstrap resamples; the final estimate is recomputed in full.
        """
        plan, limits = self.plan, self.task.spec.limits
        while len(pairs) < plan.max_pairs:
            now = time.monotonic()
            per_pair = max(p.seconds for p in pairs[-3:]) if pairs else 0.0
            if pairs and out_of_budget(plan, len(pairs), now - t0, per_pair):
                return "budget"
            if self.deadline is not None and now + max(per_pair, 1.0) > self.deadline:
                return "deadline"
            self._tick(f"pair {len(pairs) + 1}", now - t0)
            index = len(pairs) + len(self.discarded)
            work = self.log_dir / f"p{index}"
            session = PairSession(
                self.task,
                pair_dirs(self.task, self.dirs, work),
                self._pair_plan(),
                index,
                self._cpu(index),
                self.log_dir,
                limits.call_timeout_s,
                self.policy,
            )
            try:
                pairs.append(session.run())
            except DeadlineReached:
                return "deadline"  # the unfinished pair does not count
            except PairDiscarded as why:
                self.discarded.append(str(why))
                if why.arm is not None:
                    self.against[why.arm] += 1
                if len(self.discarded) > max(2, len(pairs)):
                    self._resisted(len(pairs))
                    return "discarded"
                continue
            finally:
                remove_tree(work)
            if len(pairs) >= plan.min_pairs:
                xs = overall_log_ratios(pairs, self.workloads, _interim_clock(pairs))
                e = estimate(xs, plan.confidence, self.boot_seed, plan.min_pairs, _INTERIM)
                if decided(e, plan.min_effect, plan.precision):
                    hw = e.half_width
                    return "precise" if hw is not None and hw <= plan.precision else "decided"
        return "max_pairs"

    def _resisted(self, counted: int) -> None:
        """Measuring stops on discarded pairs; an arm that caused most of them failed it.

        A candidate whose worker cannot be frozen (an uninterruptible kernel wait it starts at
        will: a red-team candidate held one in `madvise(MADV_POPULATE_READ)` over cold files)
        would otherwise end every comparison it is losing as `inconclusive` for want of pairs,
        which `decide`'s rule on discarded pairs cannot reach. It is not measurable, and it is
        its doing, as a timeout is: a rejection, with the reasons."""
        for arm, n in self.against.items():
            if 2 * n > len(self.discarded):
                finding = fail(
                    "freeze",
                    "freeze_resisted",
                    f"{n} of {len(self.discarded)} discarded pairs (against {counted} measured) "
                    f"were its worker's or clock's doing: {self.discarded[-1]}",
                )
                raise ArmFailure(arm, finding, None)

    def _tick(self, what: str, elapsed: float) -> None:
        if self.progress is not None:
            frac = min(0.99, elapsed / self.plan.budget_s)
            self.progress(f"{what}: {elapsed:.0f}/{self.plan.budget_s:.0f} s", frac)

    def _estimate(self, xs: list[float]) -> Estimate:
        p = self.plan
        e = estimate(xs, p.confidence, self.boot_seed, p.min_pairs, p.resamples)
        return with_discards(e, self.against["a"], self.against["b"])

    def _protocol(self, pairs: list[PairRecord]) -> SpeedProtocol:
        p = self.plan
        return SpeedProtocol(
            min_effect=p.min_effect,
            budget_s=p.budget_s,
            warmup_calls=p.warmup_calls,
            calls_per_slot=p.calls_per_slot,
            rounds_per_pair=p.rounds_per_pair,
            min_pairs=p.min_pairs,
            max_pairs=p.max_pairs,
            confidence=p.confidence,
            precision=p.precision,
            resamples=p.resamples,
            bootstrap_seed=self.boot_seed,
            stream=self.stream,
            cpus=[pr.cpu for pr in pairs],
            null_arm=True,
            slot_replay=True,
            turn="python" if native_turn() is None else "native",
        )


def out_of_budget(plan: MeasurePlan, done: int, elapsed: float, per_pair: float) -> bool:
    """Whether a comparison `elapsed` seconds in, with `done` pairs of about `per_pair` seconds,
    starts no more. A pair starts if it can end within the budget. Below `min_pairs` there is
    no interval yet, and the time spent buys no verdict: the budget stretches by half
    (MIN_PAIRS_GRACE) where the pairs still missing all fit in the stretch, and not at all
    where they do not (the stretch would buy nothing). The judgement's deadline is checked
    apart, and never stretches."""
    if elapsed + per_pair <= plan.budget_s:
        return False
    missing = plan.min_pairs - done
    return missing <= 0 or elapsed + per_pair * missing > plan.budget_s * MIN_PAIRS_GRACE


def _interim_clock(pairs: Sequence[PairRecord]) -> Clock:
    has_cpu = all(s.cpu["a"] and s.cpu["b"] for p in pairs for s in p.workloads.values())
    return "cpu" if has_cpu else "wall"


def integrity_checks(pairs: Sequence[PairRecord], workloads: Sequence[str]) -> list[Integrity]:
    """Per workload and arm: does CPU time represent the arm (its waiting against the other's)?"""
    out = []
    for w in workloads:
        calls = {
            arm: [ArmCalls(p.workloads[w].call[arm], p.workloads[w].cpu[arm]) for p in pairs]
            for arm in ARMS
        }
        for arm, other in (("a", "b"), ("b", "a")):
            c = check_waiting(calls[arm], calls[other])
            out.append(
                Integrity(
                    arm=arm,
                    workload=w,
                    clock="cpu",
                    passed=c.passed,
                    detail=c.detail,
                    excess_ns=c.excess_ns,
                    allowed_ns=c.allowed_ns,
                )
            )
    return out


def choose_clock(integrity: Sequence[Integrity]) -> tuple[Clock, str]:
    """The kernel's CPU time of each worker, unless some arm's CPU time does not show its cost."""
    missed = [c for c in integrity if not c.passed]
    if not missed:
        return "cpu", "CPU time of each worker's cgroup (kernel accounting): agrees with wall time"
    c = missed[0]
    return "wall", f"wall time: arm {c.arm}, workload '{c.workload}': {c.detail}"
