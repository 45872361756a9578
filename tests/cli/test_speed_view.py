"""The words around a speed result: why an inconclusive one is inconclusive, the A/A warning,
the speed line. Pure functions over the `metrics` format, tested on literal numbers."""

from __future__ import annotations

from typing import Any

# private: the command line's speed views, tested on built metrics
from optarena.cli._speed_view import aa_warning, speed_text, why_inconclusive
from optarena.records import (
    AAControl,
    Comparison,
    Instructions,
    Metrics,
    SpeedProtocol,
    Stop,
    Summary,
)


def _summary(verdict: Any, ratio: float | None, ci: list[float] | None) -> Summary:
    return Summary(
        ratio=ratio, ratio_ci=ci, speedup=None if ratio is None else 1 / ratio,
        speedup_ci=None if ci is None else sorted(1 / x for x in ci), verdict=verdict, why="",
        pairs=0, outliers=0, notes=[],
    )  # fmt: skip


def _comparison(
    verdict: Any, ratio: float | None, ci: list[float] | None, pairs: int, reason: Any
) -> Metrics:
    protocol = SpeedProtocol(
        min_effect=0.02, budget_s=30.0, warmup_calls=2, calls_per_slot=8, rounds_per_pair=2,
        min_pairs=6, max_pairs=40, confidence=0.95, precision=0.01, resamples=1000,
        bootstrap_seed=1, stream=0, cpus=[None],
    )  # fmt: skip
    summary = _summary(verdict, ratio, ci)
    return Metrics(
        arms={"a": "baseline", "b": "candidate"},
        protocol=protocol,
        overall=summary,
        workloads=[],
        stop=Stop(reason=reason, pairs=pairs, rounds=0, samples=0, budget_s=30.0, used_s=30.2),
        clock="cpu",
        clock_note="",
        integrity=[],
        cpu_accounting="cgroup2",
        freeze="cgroup2",
        verdict=verdict,
        instructions=Instructions(available=False, reason="not asked"),
    )


def _aa(floor: float | None) -> AAControl:
    c = _comparison("no_difference", 1.0, [0.99, 1.01], 8, "decided")
    return AAControl(comparison=Comparison.model_validate(c.model_dump(include=set(
        Comparison.model_fields))), noise_floor=floor)  # fmt: skip


def test_noise_wider_than_the_minimum_effect_says_so_and_what_would_help() -> None:
    # the case: the baseline against itself, 1.023 (0.957..1.080) after 30 s
    lines = why_inconclusive(_comparison("inconclusive", 1.023, [0.957, 1.080], 12, "budget"))
    assert lines[0] == (
        "inconclusive: the noise (interval +-6.2%) is wider than the minimum effect (2.0%), "
        "after 12 process pairs"
    )
    assert "stopped at the budget (30.2 of 30 s); --budget-s 120 gives about 4x" in lines[1]
    assert lines[2] == "  or ask a coarser question: --min-effect 0.07"


def test_too_few_pairs_for_an_interval() -> None:
    lines = why_inconclusive(_comparison("inconclusive", 0.96, None, 2, "budget"))
    assert lines[0] == (
        "inconclusive: 2 process pair(s) are too few for an interval (at least 6 needed)"
    )
    assert lines[1].endswith("--budget-s 136 gives about 6 or more")  # 1.5 * 6 * 15.1 s


def test_an_estimate_on_the_edge_of_the_minimum_effect() -> None:
    lines = why_inconclusive(_comparison("inconclusive", 0.98, [0.97, 0.99], 40, "max_pairs"))
    assert lines[0].startswith("inconclusive: the estimate (1.02x faster) is too close to the min")
    assert lines[1] == "  measuring stopped at the most pairs the protocol allows (40)"
    assert len(lines) == 2


def test_a_decided_comparison_needs_no_explanation() -> None:
    assert why_inconclusive(_comparison("improved", 0.8, [0.75, 0.88], 8, "decided")) == []


def test_an_aa_noise_floor_wider_than_the_minimum_effect_is_a_warning() -> None:
    warning = aa_warning(_aa(0.06), 0.02)
    assert warning is not None and "noise floor +-6.0% is wider than the minimum effect 2.0%" in (
        warning
    )
    assert "--min-effect 0.06" in warning
    assert aa_warning(_aa(0.01), 0.02) is None
    assert aa_warning(_aa(None), 0.02) is None


def test_the_speed_line_reads_one_way() -> None:
    """One convention in every view: `1.25x faster`, `1.02x slower` (the time ratio read as
    slower for a faster candidate: '0.80x baseline (-20%)')."""
    m = _comparison("improved", 0.8, [0.75, 0.88], 8, "decided")
    assert speed_text(m) == "1.25x faster, 1.14x..1.33x faster, improved"
    m = _comparison("inconclusive", 1.023, None, 2, "budget")
    assert speed_text(m) == "1.02x slower, no interval, inconclusive"
    m = _comparison("inconclusive", 0.99, [0.95, 1.04], 9, "budget")
    assert speed_text(m) == "1.01x faster, 1.04x slower..1.05x faster, inconclusive"
    assert speed_text(None, "rejected") == "none (rejected)"
    assert speed_text(None, "accepted") == "not measured"


def test_a_scaled_benchmark_shows_both_sizes_and_the_os_check() -> None:
    """`trial show` of an external benchmark with a scale: the OS's CPU at both sizes beside
    the metric, and the OS check's outcome with what the spec could add."""
    from rich.console import Console

    # private: see above
    from optarena.cli._speed_view import benchmark_view
    from optarena.records import BenchmarkRound, BenchmarkStop, ExternalMetrics, OsCheck, ScaleRuns

    low = ScaleRuns(
        baseline=1e-3, candidate=1e-4, baseline_wall_s=0.2, candidate_wall_s=0.2,
        baseline_cpu_s=0.15, candidate_cpu_s=0.16,
    )  # fmt: skip
    rnd = BenchmarkRound(
        order="AB", baseline=1e-3, candidate=1e-4, baseline_wall_s=0.5, candidate_wall_s=0.3,
        baseline_cpu_s=0.45, candidate_cpu_s=0.21, log_ratio=-2.3, low=low,
    )  # fmt: skip
    check = OsCheck(
        outcome="unresolved", basis="scaled_difference", clock="cpu", ratio=0.9,
        ratio_ci=[0.7, 1.1], metric_ratio=0.1, why="the OS's CPU time of the scaled part ...",
        advice="raise [benchmark] scale.high",
    )  # fmt: skip
    m = ExternalMetrics(
        metric={"json": "seconds"}, direction="lower", ratio_meaning="c/b",
        verdict="inconclusive", overall=_summary("inconclusive", 0.1, [0.09, 0.11]),
        stop=BenchmarkStop(reason="max_rounds", rounds=1, budget_s=30, os_second_look=True),
        rounds=[rnd],
        scale=[1, 192], os_check=check, crosscheck=[check.why],
    )  # fmt: skip
    console = Console(width=200, record=True)
    console.print(benchmark_view(m))
    text = console.export_text()
    assert "cpu b / c (s) @192" in text and "cpu b / c (s) @1" in text
    assert "0.45 / 0.21" in text and "0.15 / 0.16" in text
    assert "OS check: unresolved (scaled_difference)" in text
    assert "to resolve it: raise [benchmark] scale.high" in text
    assert "stopped: max_rounds after 1 rounds" in text and "the OS looked once more" in text
