"""What experiments add to the judge's statistics (`optarena.judge.stats`, the one module for
both): trials are the unit here (not calls), a rate gets a Wilson interval, a median the
expanded bootstrap, a paired difference (by task and repetition) the Student-t interval of its
mean, and below `MIN_PAIRS` pairs there is no verdict. Every random draw comes from an explicit
seed, so a comparison recomputes identically.
"""

from __future__ import annotations

from collections.abc import Sequence
from math import comb

from optarena.judge import stats

CONFIDENCE = 0.95
MIN_PAIRS = 3  # fewer paired trials give no verdict: two say almost nothing about spread


def effective_speedup(accepted: bool, speedup: float | None) -> float:
    """What a user adopting only accepted candidates gets from one trial: the accepted
    candidate's speed-up, else 1.0 (they keep the baseline). A failure counts, not vanishes.
    An accepted candidate without a measured speed-up counts as 1.0 too."""
    if accepted and speedup is not None and speedup > 0:
        return speedup
    return 1.0


def expected_best_of_k(values: Sequence[float], k: int) -> float:
    """Expected maximum of k values drawn without replacement from `values`: what "run k
    times, keep the best" gives on average, exactly (no resampling). Sorted ascending, the i-th
    value (1-based) is the maximum of C(i-1, k-1) of the C(n, k) subsets."""
    n = len(values)
    if not 1 <= k <= n:
        raise ValueError(f"k must be within 1..{n}, got {k}")
    s = sorted(values)
    total = comb(n, k)
    return sum(s[i - 1] * comb(i - 1, k - 1) for i in range(k, n + 1)) / total


def paired_difference(
    pairs: Sequence[tuple[float, float]], min_pairs: int = MIN_PAIRS
) -> stats.Estimate:
    """Mean of (treatment - baseline) over pairs with its t-interval (what a pair shares
    cancels in the difference)."""
    return stats.mean_estimate([t - b for b, t in pairs], CONFIDENCE, min_pairs)


def decide_treatment(
    e: stats.Estimate, margin: float, min_pairs: int = MIN_PAIRS
) -> tuple[str, str]:
    """(verdict, why) for a difference with an interval against a practical margin, from the
    interval alone (as the judge's speed verdicts, `optarena.judge.stats.decide`):
    `no_difference` when the interval lies within +-margin, `better` / `worse` when it excludes
    0 and reaches beyond the margin, else `undecided`, saying why."""
    if e.estimate is None or e.lo is None or e.hi is None:
        if stats.ZERO_VARIANCE in e.notes:
            return "undecided", (
                f"every one of the {e.n} pairs differs by exactly {e.estimate or 0.0:+.3f}: "
                "no spread to build an interval from"
            )
        return "undecided", f"too few pairs to decide ({e.n}; at least {min_pairs} needed)"
    lo, hi = e.lo, e.hi
    side = stats.interval_side(lo, hi, margin)
    if side == "within":
        return "no_difference", f"interval {lo:+.3f}..{hi:+.3f} within +-{margin:.3f}"
    if side == "above":
        return "better", f"interval {lo:+.3f}..{hi:+.3f} above 0, reaching beyond {margin:.3f}"
    if side == "below":
        return "worse", f"interval {lo:+.3f}..{hi:+.3f} below 0, reaching beyond {margin:.3f}"
    return (
        "undecided",
        f"interval {lo:+.3f}..{hi:+.3f} spans both a change and none with {e.n} pairs: more "
        "repetitions would narrow it",
    )
