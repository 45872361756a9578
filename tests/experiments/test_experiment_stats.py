"""The experiment statistics on literal numbers: paired differences get the t-interval of the
judge's statistics module, fewer than MIN_PAIRS pairs or no spread give `undecided` with the
reason, and a correctness-only plan reports no speed at all."""

from __future__ import annotations

import math

import pytest

# private: the comparison's pure statistics, tested on literal numbers
from optarena.experiments._compare import compare_treatment, summarize_condition
from optarena.experiments._stats import (
    MIN_PAIRS,
    decide_treatment,
    effective_speedup,
    expected_best_of_k,
    paired_difference,
)
from optarena.judge import stats
from optarena.records import TrialRow


def test_effective_speedup_counts_failures_as_the_baseline() -> None:
    assert effective_speedup(True, 1.8) == 1.8
    assert effective_speedup(False, 3.0) == 1.0
    assert effective_speedup(True, None) == 1.0


def test_expected_best_of_k_is_exact() -> None:
    v = [1.0, 2.0, 3.0]
    assert expected_best_of_k(v, 1) == pytest.approx(2.0)
    # subsets of 2: {1,2}->2 {1,3}->3 {2,3}->3
    assert expected_best_of_k(v, 2) == pytest.approx(8 / 3)
    assert expected_best_of_k(v, 3) == 3.0
    with pytest.raises(ValueError):
        expected_best_of_k(v, 4)


def test_three_pairs_of_small_gains_are_undecided_not_better() -> None:
    """Differences .1, .2, .3: the percentile bootstrap read [0.10, 0.30] and 'better'."""
    e = paired_difference([(0.0, 0.1), (0.0, 0.2), (0.0, 0.3)])
    assert e.estimate == pytest.approx(0.2) and (e.lo, e.hi) == pytest.approx(
        (-0.0484, 0.4484), abs=1e-4
    )
    verdict, why = decide_treatment(e, math.log(1.05))
    assert verdict == "undecided" and "more repetitions" in why


def test_decisions_on_literal_pairs() -> None:
    pairs = [(0.0, 0.20), (0.1, 0.32), (0.05, 0.24), (0.0, 0.18)]
    e = paired_difference(pairs)
    assert e.estimate == pytest.approx(0.1975)
    assert (e.lo, e.hi) == pytest.approx((0.1703, 0.2247), abs=1e-4)  # t(0.975, 3) = 3.182
    assert decide_treatment(e, math.log(1.05))[0] == "better"
    worse = paired_difference([(0.2, 0.0), (0.3, 0.05), (0.25, 0.0), (0.2, 0.01)])
    assert decide_treatment(worse, 0.05)[0] == "worse"
    same = paired_difference([(0.0, 0.01), (0.0, -0.01), (0.0, 0.005), (0.0, 0.0)])
    assert decide_treatment(same, 0.05)[0] == "no_difference"


def test_the_interval_decides_not_its_centre() -> None:
    """An effect of about the margin: its centre falls short of it, its interval excludes 0
    and reaches beyond it, so the change is real and may matter. A rule on the centre called
    this undecided, and a planted effect of exactly the margin half the time."""
    small = stats.Estimate(n=8, estimate=0.04, lo=0.01, hi=0.07, mad=0.01, outliers=0)
    verdict, why = decide_treatment(small, 0.05)
    assert verdict == "better" and "reaching beyond 0.050" in why
    mirror = stats.Estimate(n=8, estimate=-0.04, lo=-0.07, hi=-0.01, mad=0.01, outliers=0)
    assert decide_treatment(mirror, 0.05)[0] == "worse"
    # negative controls: real but proved smaller than the margin; or holding 0
    proved_small = stats.Estimate(n=8, estimate=0.02, lo=0.01, hi=0.04, mad=0.01, outliers=0)
    assert decide_treatment(proved_small, 0.05)[0] == "no_difference"
    holds_zero = stats.Estimate(n=8, estimate=0.06, lo=-0.01, hi=0.12, mad=0.01, outliers=0)
    assert decide_treatment(holds_zero, 0.05)[0] == "undecided"


def test_too_few_pairs_or_no_spread_give_no_verdict_and_say_why() -> None:
    two = paired_difference([(0.0, 0.5), (0.0, 0.6)])
    assert MIN_PAIRS == 3 and two.lo is None
    v, why = decide_treatment(two, 0.05)
    assert v == "undecided" and why == "too few pairs to decide (2; at least 3 needed)"
    flat = paired_difference([(0.0, 0.0)] * 5)
    v, why = decide_treatment(flat, 0.05)
    assert v == "undecided" and "no spread" in why


def _row(cond: str, rep: int, accepted: bool) -> TrialRow:
    return TrialRow(
        trial_id=f"{cond}{rep}", task="t", condition=cond, repetition=rep, outcome="complete",
        attempts=1, agent_status="completed", verdict="accepted" if accepted else "rejected",
        speedup=None, speed_verdict=None, effective_speedup=1.0, metered_tokens=None,
        metered_cost_usd=None, reported_tokens=None, reported_cost_usd=None,
        agent_wall_s=None, wall_s=None, identity="same",
    )  # fmt: skip


def test_a_correctness_only_plan_reports_no_speed() -> None:
    """[judge] measure = false: no effective speed-up 1.000 (1.000..1.000), no confident
    no_difference on speed: nothing was measured, and the report says so."""
    rows = [_row(c, r, c == "a" or r > 0) for c in ("a", "b") for r in range(4)]
    s = summarize_condition("a", [r for r in rows if r.condition == "a"], 0, 0, measured=False)
    assert s.speed_measured is False
    assert (s.effective_median, s.effective_ci, s.best_of_k, s.improvement_rate) == (
        None, None, [], None,
    )  # fmt: skip
    assert s.correctness_rate == 1.0
    t = compare_treatment("b", "a", rows, 0.05, measured=False)
    assert t.verdict == "not_measured" and "not measured" in t.why
    assert t.log_speedup_diff is None and t.log_speedup_ci is None
    assert t.correctness_diff == pytest.approx(-0.25)
