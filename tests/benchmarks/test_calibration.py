"""The A/A calibration checks of `benchmarks/fidelity.py`, its agreement column, and the
tolerance scan of `benchmarks/tolerance_scan.py`, on literal numbers."""

from __future__ import annotations

import math
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "benchmarks"))
from _calibration import comparison_effect, misses, pooled_miss_rate


def test_comparisons_no_more_alike_inside_than_between_read_about_one() -> None:
    # every comparison holds the same three values: their means agree exactly
    assert comparison_effect([[1.0, 2.0, 3.0], [1.0, 2.0, 3.0]]) == 0.0
    # means 0.05 and 1.05 (grand 0.55): between = 2 * (0.25 + 0.25) / 1 = 1.0;
    # within = 4 * 0.0025 / (4 - 2) = 0.005
    assert comparison_effect([[0.0, 0.1], [1.0, 1.1]]) == pytest.approx(200.0)


def test_a_comparison_effect_that_cannot_be_had_is_none() -> None:
    assert comparison_effect([[1.0, 2.0]]) is None  # one comparison
    assert comparison_effect([[1.0], [2.0]]) is None  # no spread within any
    assert comparison_effect([[1.0, 1.0], [2.0, 2.0]]) is None


def test_the_pooled_miss_rate_counts_intervals_that_exclude_zero() -> None:
    groups = [[0.01, -0.02, 0.03], [0.0, 0.02, -0.01], [0.05, -0.04, 0.0]]
    drawn: list[list[float]] = []

    def never(xs: list[float], i: int) -> tuple[float, float]:
        drawn.append(xs)
        return (-1.0, 1.0)

    assert pooled_miss_rate(groups, never, draws=50, seed=3) == 0.0
    assert all(len(xs) == 3 for xs in drawn)  # the median comparison's size
    pool = sorted(x for g in groups for x in g)
    centred = sorted(x - sum(pool) / len(pool) for x in pool)
    assert all(min(xs) >= centred[0] - 1e-12 and max(xs) <= centred[-1] + 1e-12 for xs in drawn)
    assert pooled_miss_rate(groups, lambda xs, i: (0.5, 1.0), draws=10, seed=3) == 1.0
    assert pooled_miss_rate(groups, lambda xs, i: None, draws=10, seed=3) == 0.0  # no interval
    # the same seed, the same draws
    first = pooled_miss_rate(groups, lambda xs, i: (xs[0], xs[0] + 1.0), draws=40, seed=7)
    again = pooled_miss_rate(groups, lambda xs, i: (xs[0], xs[0] + 1.0), draws=40, seed=7)
    assert first == again and first is not None and 0.0 < first < 1.0


def test_a_pooled_miss_rate_that_cannot_be_had_is_none() -> None:
    assert pooled_miss_rate([], lambda xs, i: (0.0, 1.0), draws=10, seed=1) is None
    assert pooled_miss_rate([[0.1], [0.2]], lambda xs, i: (0.0, 1.0), draws=10, seed=1) is None


def test_misses_are_intervals_on_one_side_of_zero() -> None:
    assert misses([[-0.01, 0.02], [0.001, 0.03], [-0.05, -0.01], None, [0.0, 0.1]]) == 2


def test_agreement_says_where_the_in_process_ratio_lies_against_the_interval() -> None:
    from fidelity import agreement

    assert agreement([0.865, 0.964], 0.918) == "inside"
    assert agreement([0.865, 0.964], 0.976) == "1.2% above"  # log(0.976 / 0.964)
    assert agreement([1.684, 1.810], 1.909) == "5.3% above"
    assert agreement([1.10, 1.20], 1.0) == "9.5% below"  # log(1.10)
    assert agreement([0.964, 0.865], 0.9) == "inside"  # ends in either order
    assert agreement(None, 1.0) == "-" and agreement([1.0], 1.0) == "-"


def test_agreement_and_target_carry_the_references_range_over_fresh_processes() -> None:
    """The reference over several fresh processes is a range: the judge agrees with it when
    the two overlap, and the target is read at every pairing of the ends."""
    from fidelity import against_target, agreement

    assert agreement([0.870, 0.917], [0.880, 0.976]) == "inside"  # overlap at 0.880..0.917
    assert agreement([0.745, 0.774], [0.807, 0.830]) == "4.2% above"  # log(0.807 / 0.774)
    assert agreement([1.10, 1.20], [0.95, 1.0]) == "9.5% below"
    assert agreement([1.0, 1.1], []) == "-"
    # a 2x effect, both measurements tight: met, and the range spans every pairing
    fid, target = against_target([1.95, 2.05], [1.97, 2.01])
    assert target == "met" and fid is not None
    assert math.isclose(fid[0], math.log(1.95) / math.log(2.01))
    assert math.isclose(fid[1], math.log(2.05) / math.log(1.97))
    # one reference value gives the old reading; a range can only widen the fidelity range
    assert against_target([1.95, 2.05], 2.0)[1] == "met"
    assert against_target([1.60, 1.70], [1.97, 2.01])[1] == "missed"  # 0.67..0.79
    # a small effect: the reference's own spread leaves the target open, never met or missed
    assert against_target([0.870, 0.917], [0.880, 0.976])[1] == "open"
    # a reference that straddles no change cannot give the effect's size at all
    assert against_target([0.97, 1.01], [0.99, 1.02]) == (None, "open")
    assert against_target(None, [1.9, 2.0]) == (None, "-")


def test_the_tolerance_scan_reads_the_baseline_inside_and_a_wrong_entry_outside(
    tmp_path: Path,
) -> None:
    """`benchmarks/tolerance_scan.py` on literal functions: the baseline itself, and a
    negative control that is off by 1% everywhere."""
    from _inprocess import load_entry
    from tolerance_scan import ratio

    from optarena.tasks import resolve_task

    task = resolve_task("rmsnorm")
    w = task.spec.workload("decode")
    fn = load_entry(task, task.baseline_dir, tmp_path, "scan_test")
    assert 0.0 <= ratio(task, fn, w, 3) < 0.5
    assert ratio(task, lambda *a, **k: fn(*a, **k) * 1.01, w, 3) > 10.0
