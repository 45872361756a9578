"""The OS's second look: where the metric decides before the OS can tell, the rounds the spec
still allows run and the OS is asked once more; it never stops the rounds itself. The rounds
are scripted (the benchmark's own runs are tested end to end in test_external_judge.py)."""

from __future__ import annotations

import math
from collections.abc import Callable
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest

# private: the rounds loop, driven by scripted rounds instead of the project's benchmark
from optarena.judge.external import _bench
from optarena.records import BenchmarkRound, ExternalMetrics
from optarena.tasks.external import Benchmark, ExternalMeasurement, Metric

METRIC = [0.40, 0.42, 0.39, 0.41, 0.40, 0.43, 0.41, 0.40, 0.42, 0.39]  # decided at once
# the candidate's OS CPU time per round (the baseline's is 1.0 s): a noisy first six that
# include no change, then four that show the speed-up
OS_LATE = [0.70, 1.25, 0.68, 1.15, 0.72, 0.95, 0.70, 0.72, 0.69, 0.71]
OS_CLEAR = [0.70, 0.72, 0.69, 0.71, 0.70, 0.73, 0.70, 0.72, 0.69, 0.71]
OS_NEVER = [1.02, 0.97, 1.05, 0.96, 1.01, 0.99, 1.03, 0.98, 1.00, 1.02]  # a lying metric


def _ctx(max_rounds: int, budget_s: float = 600.0) -> Any:
    spec = SimpleNamespace(
        benchmark=Benchmark(command="bench", metric=Metric.model_validate({"json": "seconds"})),
        measurement=ExternalMeasurement(max_rounds=max_rounds, budget_s=budget_s),
        quality=SimpleNamespace(command="gate"),  # a gate: an improvement can stand
    )
    return SimpleNamespace(frozen=SimpleNamespace(spec=spec))


def _script(
    monkeypatch: pytest.MonkeyPatch, os_cpu: list[float], tick: Callable[[], None] = lambda: None
) -> list[int]:
    """Round i reads METRIC[i] and os_cpu[i]; returns the list the rounds are counted in."""
    ran: list[int] = []

    def fake_round(ctx: Any, trees: dict[str, Path], order: Any) -> BenchmarkRound:
        i = len(ran)
        ran.append(i)
        tick()
        return BenchmarkRound(
            order=order, baseline=1.0, candidate=METRIC[i], baseline_wall_s=1.0,
            candidate_wall_s=os_cpu[i], baseline_cpu_s=1.0, candidate_cpu_s=os_cpu[i],
            log_ratio=math.log(METRIC[i]),
        )  # fmt: skip

    monkeypatch.setattr(_bench, "_round", fake_round)
    return ran


def _judge(max_rounds: int, budget_s: float = 600.0) -> ExternalMetrics:
    return _bench.benchmark(_ctx(max_rounds, budget_s), {}, seed=1)


def test_the_os_gets_the_rounds_the_spec_allows_when_the_metric_decides_first(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    ran = _script(monkeypatch, OS_LATE)
    m = _judge(max_rounds=10)
    assert len(ran) == 10 and m.stop.rounds == 10
    assert m.stop.os_second_look and m.stop.reason == "max_rounds"
    assert m.os_check is not None and m.os_check.outcome == "confirmed", m.os_check
    assert m.verdict == "improved"


def test_no_second_look_where_the_os_could_tell_at_the_metric_s_decision(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The negative control: the OS confirmed over the first six, nothing more runs."""
    ran = _script(monkeypatch, OS_CLEAR)
    m = _judge(max_rounds=10)
    assert len(ran) == 6 and m.stop.reason == "decided" and not m.stop.os_second_look
    assert m.os_check is not None and m.os_check.outcome == "confirmed"


def test_the_same_noisy_rounds_stay_unconfirmed_where_the_spec_allows_none_more(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    ran = _script(monkeypatch, OS_LATE)
    m = _judge(max_rounds=6)
    assert len(ran) == 6 and not m.stop.os_second_look
    assert m.os_check is not None and m.os_check.outcome == "unresolved"
    assert m.verdict == "inconclusive" and "not confirmed by the OS" in m.overall.why


def test_a_metric_the_os_never_confirms_stays_inconclusive_after_the_second_look(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """More rounds are no way around the OS: a lying metric is looked at twice, and the
    second look over ten rounds still does not confirm it."""
    ran = _script(monkeypatch, OS_NEVER)
    m = _judge(max_rounds=10)
    assert len(ran) == 10 and m.stop.os_second_look
    assert m.os_check is not None and m.os_check.outcome == "unresolved"
    assert m.verdict == "inconclusive"


def test_the_second_look_keeps_to_the_budget(monkeypatch: pytest.MonkeyPatch) -> None:
    """Rounds of 10 s against a 75 s budget: the metric decides at 6 (60 s), and the second
    look's rounds stop at the first to end past the budget (the 8th, at 80 s), not at 10."""
    now = [1_000_000.0]

    class Clock:
        @staticmethod
        def now(tz: Any) -> Any:
            return SimpleNamespace(timestamp=lambda: now[0])

    def tick() -> None:
        now[0] += 10.0

    monkeypatch.setattr(_bench, "datetime", Clock)
    ran = _script(monkeypatch, OS_LATE, tick)
    m = _judge(max_rounds=10, budget_s=75.0)
    assert len(ran) == 8 and m.stop.reason == "budget" and m.stop.os_second_look
    assert m.stop.rounds == 8
