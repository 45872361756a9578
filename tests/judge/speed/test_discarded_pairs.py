"""Pairs that ran but were discarded are not neutral: code that can make its own pairs fail
(a worker that cannot be frozen, a clock that gives a round nothing) chooses which pairs count.
A pair discarded for an arm's failure forbids every verdict that arm could gain from.

Driven through the comparison loop and its report with pairs of known log-ratio (no worker):
what is asserted is the protocol's answer to a choosing candidate, not a machine's noise.
"""

from __future__ import annotations

import math
import random
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest

# private: the comparison loop, driven by pairs of known log-ratio on a fake clock
from optarena.judge.speed import _measure
from optarena.judge.speed._measure import Measurement, MeasurePlan
from optarena.judge.speed._pair import PairDiscarded
from optarena.judge.speed._samples import PairRecord, WorkloadSamples
from optarena.judge.speed._stats import decide, estimate
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


def _compare(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path, task: Task, hides: bool, seed: int
) -> tuple[Any, list[float]]:
    """A candidate 1.5% faster than the baseline (less than the task's 3%: no verdict of its
    own), its pairs spread +-2.5%; with `hides`, a pair that would favour
    the baseline fails (its candidate's worker "could not be frozen") wherever the judge's cap
    on discarded pairs (no more than counted, at least two) lets it. Returns the comparison and
    the log-ratios of the pairs that counted."""
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
            if hides and x > 0 and len(hidden) + 1 <= max(2, len(counted)):
                hidden.append(x)
                why = "arm b's worker could not be frozen: a choosing candidate"
                raise PairDiscarded(why, "b")
            counted.append(x)
            loads = {name: _samples(x) for name in names}
            return PairRecord(self.index, None, "abn", loads, "cgroup", "cgroup", 1.0)

    monkeypatch.setattr(_measure, "time", SimpleNamespace(monotonic=lambda: now[0]))
    monkeypatch.setattr(_measure, "PairSession", Session)
    monkeypatch.setattr(_measure, "pair_dirs", lambda *a: None)
    monkeypatch.setattr(_measure, "remove_tree", lambda p: None)
    m = Measurement(task, (tmp_path, tmp_path), _plan(), seed, 0, tmp_path)
    out = m.run({"a": "baseline", "b": "candidate"})
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
