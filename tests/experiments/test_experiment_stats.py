"""The experiment statistics on literal numbers."""

from __future__ import annotations

import math

import pytest

from optarena.experiments._stats import (
    bootstrap_ci,
    decide,
    effective_speedup,
    expected_best_of_k,
    median,
    paired_difference,
    percentile,
    wilson,
)


def test_wilson_matches_the_textbook_values() -> None:
    lo, hi = wilson(8, 10) or (0, 0)
    assert lo == pytest.approx(0.4902, abs=1e-4) and hi == pytest.approx(0.9433, abs=1e-4)
    lo0, hi0 = wilson(0, 5) or (1, 1)
    assert lo0 == 0.0 and hi0 == pytest.approx(0.4345, abs=1e-4)
    assert wilson(5, 5) is not None and wilson(5, 5)[1] == 1.0  # type: ignore[index]
    assert wilson(0, 0) is None


def test_median_and_percentile() -> None:
    assert median([3.0, 1.0, 2.0]) == 2.0
    assert median([4.0, 1.0, 2.0, 3.0]) == 2.5
    assert percentile([1.0, 2.0, 3.0, 4.0], 0.5) == 2.5
    assert percentile([1.0, 2.0, 3.0, 4.0], 0.0) == 1.0
    with pytest.raises(ValueError):
        median([])


def test_bootstrap_is_seeded_and_brackets_the_median() -> None:
    data = [1.0, 1.2, 0.9, 1.1, 1.3, 1.05]
    a = bootstrap_ci(data, seed=3)
    assert a == bootstrap_ci(data, seed=3)
    assert a is not None and a[0] <= median(data) <= a[1]
    assert bootstrap_ci([1.0]) is None


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


def test_paired_difference_and_decision() -> None:
    pairs = [(0.0, 0.20), (0.1, 0.32), (0.05, 0.24), (0.0, 0.18)]
    est, ci = paired_difference(pairs, seed=1)
    assert est == pytest.approx(0.1975)
    assert ci is not None and 0.17 <= ci[0] <= est <= ci[1] <= 0.23
    verdict, why = decide(est, ci, math.log(1.05), len(pairs))
    assert verdict == "better" and "above 0" in why
    assert decide(-0.2, (-0.3, -0.1), 0.05, 4)[0] == "worse"
    assert decide(0.0, (-0.01, 0.02), 0.05, 4)[0] == "no_difference"
    v, why = decide(0.03, (-0.2, 0.25), 0.05, 3)
    assert v == "undecided" and "more repetitions" in why
    v, why = decide(None, None, 0.05, 1)
    assert v == "undecided" and "too few pairs" in why
