"""Pairs that ran but were discarded are not neutral: code that can make its own pairs fail
(a worker that cannot be frozen, a clock that gives a round nothing) chooses which pairs count.
A pair discarded for an arm's failure forbids every verdict that arm could gain from.

Driven through the comparison loop and its report with pairs of known log-ratio (no worker):
what is asserted is the protocol's answer to a choosing candidate, not a machine's noise.
"""

from __future__ import annotations

import math
import random
from collections.abc import Callable
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest

# private: the comparison loop, driven by pairs of known log-ratio on a fake clock
from optarena.judge.speed import _measure as _measure_module
from optarena.judge.speed import estimate
from optarena.judge.speed._measure import Measurement, MeasurePlan, Outcome
from optarena.judge.speed._pair import PairDiscarded
from optarena.judge.speed._samples import PairRecord, WorkloadSamples
from optarena.judge.speed._stats import decide
from optarena.tasks import BUILTIN_DIR, Task, load_task

CALL_NS = 1_000_000
TRUE = math.log(0.985)
SEEDS = [1, 2, 3, 4, 5, 6]  # seed 7's pairs never favour the baseline enough to hide one


def _plan() -> MeasurePlan:
    return MeasurePlan(
        min_effect=0.03,
        budget_s=60.0,
        warmup_calls=2,
        calls_per_slot=1,
        rounds_per_pair=2,
        min_pairs=6,
        max_pairs=40,
        confidence=0.95,
    )


def _samples(log_ratio: float) -> WorkloadSamples:
    """Two rounds of one call per slot: arm b takes exp(log_ratio) times arm a's time."""
    s = WorkloadSamples(calls_per_slot=1, rounds=2, orders=["ab", "ba"])
    b = round(CALL_NS * math.exp(log_ratio))
    for clock in (s.cpu, s.wall, s.call):
        clock["a"], clock["b"], clock["n"] = [CALL_NS] * 4, [b] * 4, [1000] * 4
    return s


Discard = Callable[[float, list[float], list[float]], "str | None"]


def _measure(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path, task: Task, seed: int, discard: Discard
) -> tuple[Outcome, list[float]]:
    """A candidate 1.5% faster than the baseline (less than the task's 3%: no verdict of its
    own), its pairs spread +-2.5%. `discard(x, counted, hidden)` says whose failure discards
    the pair about to count `x` ("a", "b", "n" for the null arm's worker; None: it counts).
    Returns the outcome and the log-ratios of the pairs that counted."""
    rng = random.Random(seed)
    now = [1000.0]
    counted: list[float] = []
    hidden: list[float] = []
    names = [w.name for w in task.spec.workloads if w.role == "timed"]

    class Session:
        def __init__(self, *args: Any) -> None:
            self.index = args[3]

        def run(self) -> PairRecord:
            now[0] += 1.0
            x = rng.gauss(TRUE, 0.025)
            arm = discard(x, counted, hidden)
            if arm is not None:
                hidden.append(x)
                raise PairDiscarded(f"arm {arm}'s worker could not be frozen: a test's", arm)
            counted.append(x)
            loads = {name: _samples(x) for name in names}
            return PairRecord(self.index, None, "abn", loads, "cgroup", "cgroup", 1.0)

    monkeypatch.setattr(_measure_module, "time", SimpleNamespace(monotonic=lambda: now[0]))
    monkeypatch.setattr(_measure_module, "PairSession", Session)
    monkeypatch.setattr(_measure_module, "pair_dirs", lambda *a: None)
    monkeypatch.setattr(_measure_module, "remove_tree", lambda p: None)
    m = Measurement(task, (tmp_path, tmp_path), _plan(), seed, 0, tmp_path)
    return m.run({"a": "baseline", "b": "candidate"}), counted


def _compare(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path, task: Task, hides: bool, seed: int
) -> tuple[Any, list[float]]:
    """With `hides`, a pair that would favour the baseline fails (its candidate's worker "could
    not be frozen") wherever the judge's cap on discarded pairs (no more than counted, at least
    two) lets it."""

    def choose(x: float, counted: list[float], hidden: list[float]) -> str | None:
        return "b" if hides and x > 0 and len(hidden) + 1 <= max(2, len(counted)) else None

    out, counted = _measure(monkeypatch, tmp_path, task, seed, choose)
    assert out.comparison is not None
    return out.comparison, counted


@pytest.fixture(scope="module")
def task() -> Task:
    return load_task(BUILTIN_DIR / "rmsnorm")


@pytest.mark.parametrize("seed", SEEDS)
def test_a_candidate_that_fails_its_unfavourable_pairs_is_not_improved(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path, task: Task, seed: int
) -> None:
    comp, counted = _compare(monkeypatch, tmp_path, task, hides=True, seed=seed)
    assert comp.stop.discarded and all("arm b's worker" in d for d in comp.stop.discarded)
    # the attack works on the pairs it let count: alone, they read improved
    alone = estimate(counted, 0.95, comp.protocol.bootstrap_seed, 6, comp.protocol.resamples)
    assert decide(alone, 0.03)[0] == "improved", alone
    # counted as the least favourable pair seen, the discarded ones take that verdict away
    assert comp.overall.verdict == "inconclusive", comp.overall
    assert f"{len(comp.stop.discarded)} pair(s) were discarded" in comp.overall.why
    assert "arm b gains no verdict" in comp.overall.why
    assert "discarded_pairs" in comp.overall.notes
    for w in comp.workloads:
        assert w.summary.verdict != "improved", w.summary


def test_without_discarded_pairs_the_same_comparison_is_untouched(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path, task: Task
) -> None:
    """Negative control: the same candidate, nothing discarded, gets the verdict of its pairs'
    own interval, with no note of discarded pairs."""
    for seed in SEEDS:
        comp, counted = _compare(monkeypatch, tmp_path, task, hides=False, seed=seed)
        assert not comp.stop.discarded and len(counted) == comp.stop.pairs
        p = comp.protocol
        own = estimate(counted, 0.95, p.bootstrap_seed, 6, p.resamples)
        assert (comp.overall.verdict, comp.overall.why) == decide(own, 0.03)
        assert "discarded_pairs" not in comp.overall.notes


@pytest.mark.parametrize("arm", ["b", "a"])
def test_an_arm_whose_pairs_fail_more_than_count_is_rejected(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path, task: Task, arm: str
) -> None:
    """Past the cap (more discarded than counted, at least three) measuring stops, and the
    comparison would be `inconclusive` for want of pairs: a candidate losing a comparison could
    end it that way at will. The arm whose worker failed most of them is rejected instead."""
    out, counted = _measure(monkeypatch, tmp_path, task, 1, lambda x, c, h: arm if c else None)
    assert out.comparison is None and out.failure is not None and len(counted) == 1
    assert (out.failure.arm, out.failure.finding.code) == (arm, "freeze_resisted")
    assert "3 of 3 discarded pairs (against 1 measured)" in out.failure.finding.detail
    assert f"arm {arm}'s worker could not be frozen" in out.failure.finding.detail


def test_control_the_null_arms_failures_reject_nobody(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path, task: Task
) -> None:
    """The null arm's worker runs the judge's code: its discards stop the measuring with the
    reason, and the comparison says what it has."""
    out, counted = _measure(monkeypatch, tmp_path, task, 1, lambda x, c, h: "n" if c else None)
    assert out.failure is None and out.comparison is not None and len(counted) == 1
    assert out.comparison.stop.reason == "discarded" and len(out.comparison.stop.discarded) == 3
    assert out.comparison.overall.verdict == "inconclusive"
    assert "discarded_pairs" not in out.comparison.overall.notes
