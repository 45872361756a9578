"""Statistics for comparing conditions across trials: small pure functions on plain numbers.

Trials are the unit here (not calls, as in the judge): a rate gets a Wilson interval, a median
a percentile bootstrap, a paired difference (by task and repetition) a bootstrap of the mean.
Every random draw comes from an explicit seed, so a comparison recomputes identically.
"""

from __future__ import annotations

import math
import random
from collections.abc import Sequence
from math import comb

Z95 = 1.959963984540054


def wilson(successes: int, n: int, z: float = Z95) -> tuple[float, float] | None:
    """Wilson score interval of a proportion; None without trials. Unlike the normal
    approximation it stays inside [0, 1] and is honest at 0/n and n/n."""
    if n <= 0:
        return None
    p = successes / n
    denom = 1 + z * z / n
    centre = (p + z * z / (2 * n)) / denom
    half = z * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n)) / denom
    return max(0.0, centre - half), min(1.0, centre + half)


def median(values: Sequence[float]) -> float:
    s = sorted(values)
    n = len(s)
    if n == 0:
        raise ValueError("median of no values")
    mid = n // 2
    return s[mid] if n % 2 else (s[mid - 1] + s[mid]) / 2


def percentile(sorted_values: Sequence[float], q: float) -> float:
    """Linear interpolation between order statistics (numpy's default), q in [0, 1]."""
    if not sorted_values:
        raise ValueError("percentile of no values")
    pos = q * (len(sorted_values) - 1)
    lo = math.floor(pos)
    hi = min(lo + 1, len(sorted_values) - 1)
    return sorted_values[lo] + (sorted_values[hi] - sorted_values[lo]) * (pos - lo)


def bootstrap_ci(
    values: Sequence[float],
    stat: str = "median",
    seed: int = 0,
    reps: int = 2000,
    level: float = 0.95,
) -> tuple[float, float] | None:
    """Percentile bootstrap interval of the median or mean; None below two values (one value
    says nothing about spread)."""
    if len(values) < 2:
        return None
    rng = random.Random(seed)
    f = median if stat == "median" else (lambda v: sum(v) / len(v))
    n = len(values)
    draws = sorted(f([values[rng.randrange(n)] for _ in range(n)]) for _ in range(reps))
    a = (1 - level) / 2
    return percentile(draws, a), percentile(draws, 1 - a)


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
    pairs: Sequence[tuple[float, float]], seed: int = 0, reps: int = 2000
) -> tuple[float | None, tuple[float, float] | None]:
    """Mean of (treatment - baseline) over pairs and its bootstrap interval (pairs resampled
    together, so what the pair shares cancels)."""
    diffs = [t - b for b, t in pairs]
    if not diffs:
        return None, None
    return sum(diffs) / len(diffs), bootstrap_ci(diffs, "mean", seed, reps)


def decide(
    estimate: float | None, ci: tuple[float, float] | None, margin: float, n: int
) -> tuple[str, str]:
    """(verdict, why) for a difference with an interval against a practical margin:
    `better` / `worse` when the interval excludes 0 and the estimate is beyond the margin,
    `no_difference` when the interval lies within +-margin, else `undecided`, saying why."""
    if estimate is None or ci is None:
        return "undecided", f"too few pairs to decide ({n}; at least 2 needed)"
    lo, hi = ci
    if lo > 0 and estimate > margin:
        return "better", f"interval {lo:+.3f}..{hi:+.3f} above 0, estimate beyond {margin:.3f}"
    if hi < 0 and estimate < -margin:
        return "worse", f"interval {lo:+.3f}..{hi:+.3f} below 0, estimate beyond {margin:.3f}"
    if -margin <= lo and hi <= margin:
        return "no_difference", f"interval {lo:+.3f}..{hi:+.3f} within +-{margin:.3f}"
    return (
        "undecided",
        f"interval {lo:+.3f}..{hi:+.3f} spans both a change and none with {n} pairs: more "
        "repetitions would narrow it",
    )
