"""The comparison loop's budget: whole pairs, stretched by half at most where that reaches
`min_pairs` (below them the time spent buys no interval), and never past the deadline."""

from __future__ import annotations

from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest

# private: the loop, driven by pairs of known length on a fake clock
from optarena.judge.speed import MIN_PAIRS_GRACE, _measure
from optarena.judge.speed._measure import Measurement, MeasurePlan, out_of_budget
from optarena.judge.speed._samples import PairRecord
from optarena.tasks import BUILTIN_DIR, load_task


def _plan(budget_s: float, min_pairs: int = 6) -> MeasurePlan:
    return MeasurePlan(
        min_effect=0.03,
        budget_s=budget_s,
        warmup_calls=2,
        calls_per_slot=8,
        rounds_per_pair=2,
        min_pairs=min_pairs,
        max_pairs=60,
        confidence=0.95,
    )


def test_the_budget_stretches_only_where_it_reaches_min_pairs() -> None:
    plan = _plan(30.0)  # min_pairs 6
    assert MIN_PAIRS_GRACE == 1.5
    assert not out_of_budget(plan, 5, 25.0, 5.0)  # within the budget
    assert not out_of_budget(plan, 5, 26.0, 5.0)  # 31 s: the sixth pair, in the stretch
    assert not out_of_budget(plan, 4, 26.0, 5.0)  # two pairs missing, 36 s: both fit
    assert out_of_budget(plan, 2, 26.0, 5.0)  # four missing, 46 s: the stretch buys nothing
    assert out_of_budget(plan, 6, 26.0, 5.0)  # min_pairs reached: the budget is the budget
    assert out_of_budget(plan, 5, 30.0, 16.0)  # 46 s: past the stretch


def _loop(
    monkeypatch: pytest.MonkeyPatch,
    tmp_path: Path,
    pair_s: float,
    budget_s: float,
    deadline: float | None = None,
) -> tuple[str, list[float]]:
    """Run the loop with pairs of `pair_s` seconds each; (stop reason, each pair's start)."""
    now = [1000.0]
    starts: list[float] = []

    class Session:
        def __init__(self, *args: Any) -> None:
            pass

        def run(self) -> PairRecord:
            starts.append(now[0] - 1000.0)
            now[0] += pair_s
            return PairRecord(len(starts) - 1, None, "ab", {}, "cgroup", "cgroup", pair_s)

    monkeypatch.setattr(_measure, "time", SimpleNamespace(monotonic=lambda: now[0]))
    monkeypatch.setattr(_measure, "PairSession", Session)
    monkeypatch.setattr(_measure, "pair_dirs", lambda *a: None)
    monkeypatch.setattr(_measure, "remove_tree", lambda p: None)
    # no pair is ever decided here: the budget alone stops the loop
    monkeypatch.setattr(_measure, "overall_log_ratios", lambda pairs, w, c: [0.0] * len(pairs))
    monkeypatch.setattr(_measure, "decided", lambda *a: False)
    task = load_task(BUILTIN_DIR / "rmsnorm")
    m = Measurement(task, (tmp_path, tmp_path), _plan(budget_s), 1, 0, tmp_path, deadline=deadline)
    pairs: list[PairRecord] = []
    reason = m._loop(pairs, now[0])
    assert len(pairs) == len(starts)
    return reason, starts


@pytest.mark.parametrize(
    ("pair_s", "budget_s", "deadline", "reason", "starts"),
    [
        # gemm-c's 2x candidate: 5.3 s pairs in a 26 s budget ended at 5 pairs, no interval
        pytest.param(5, 26, None, "budget", [0, 5, 10, 15, 20, 25], id="a-sixth-in-the-stretch"),
        pytest.param(6, 26, None, "budget", [0, 6, 12, 18, 24, 30], id="two-missing-both-fit"),
        # negative control: at 20 s four pairs are missing, 60 s > 39 s: the budget holds
        pytest.param(10, 26, None, "budget", [0, 10], id="no-stretch-that-buys-nothing"),
        pytest.param(5, 40, None, "budget", [0, 5, 10, 15, 20, 25, 30, 35], id="from-min-pairs-on"),
        pytest.param(
            5, 26, 1027, "deadline", [0, 5, 10, 15, 20], id="the-deadline-never-stretches"
        ),
    ],
)
def test_pairs_start_as_the_budget_allows(
    monkeypatch: pytest.MonkeyPatch,
    tmp_path: Path,
    pair_s: float,
    budget_s: float,
    deadline: float | None,
    reason: str,
    starts: list[float],
) -> None:
    assert _loop(monkeypatch, tmp_path, pair_s, budget_s, deadline) == (reason, starts)
