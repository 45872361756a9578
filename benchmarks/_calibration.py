"""Is the judge's interval honest on A/A comparisons? Two checks on their per-pair log-ratios.

An A/A interval that excludes no change more often than 1 - confidence allows has one of two
causes, and they call for different fixes:

- a *comparison effect*: something fixed for the whole comparison (not redrawn per process
  pair) that moves every pair of it the same way. The pairs' spread cannot show it, so no
  interval over pairs can cover it. `comparison_effect` is the one-way ANOVA ratio of the
  spread between comparisons' means to what the spread within them predicts: about 1 where
  there is none, well above 1 where there is;
- the interval itself, over so few pairs (6 to 12), on this distribution. `pooled_miss_rate`
  shuffles all the pairs into comparisons of the usual size, centred on no change (so no
  comparison effect is left), and counts how often the interval misses no change.

Small pure functions, tested on literal numbers (tests/benchmarks/test_calibration.py).
"""

from __future__ import annotations

import statistics
from collections.abc import Callable, Sequence

import numpy as np


def comparison_effect(groups: Sequence[Sequence[float]]) -> float | None:
    """F = (between-comparison mean square) / (within-comparison mean square); None where it
    cannot be had (fewer than two comparisons of two pairs, or no spread within any)."""
    gs = [np.asarray(g, dtype=np.float64) for g in groups if len(g) >= 2]
    k = len(gs)
    n = sum(g.size for g in gs)
    if k < 2:
        return None
    grand = float(np.concatenate(gs).mean())
    between = sum(g.size * (float(g.mean()) - grand) ** 2 for g in gs) / (k - 1)
    within = sum(float(((g - g.mean()) ** 2).sum()) for g in gs) / (n - k)
    return None if within == 0 else between / within


Interval = Callable[[list[float], int], "tuple[float, float] | None"]


def pooled_miss_rate(
    groups: Sequence[Sequence[float]], interval: Interval, draws: int, seed: int
) -> float | None:
    """Share of `draws` comparisons, each the median comparison's number of pairs drawn
    without replacement from all pairs centred on 0, whose `interval(pairs, draw)` excludes 0
    (an interval of None counts as no miss: no verdict can come of it)."""
    sizes = [len(g) for g in groups if len(g)]
    if not sizes or draws < 1:
        return None
    size = int(statistics.median_low(sizes))
    pool = np.concatenate([np.asarray(g, dtype=np.float64) for g in groups if len(g)])
    if size < 2 or pool.size < size:
        return None
    pool -= pool.mean()
    rng = np.random.default_rng(seed)
    misses = 0
    for i in range(draws):
        got = interval([float(x) for x in rng.choice(pool, size=size, replace=False)], i)
        misses += _excludes_zero(got)
    return misses / draws


def misses(intervals: Sequence[Sequence[float] | None]) -> int:
    """Intervals (on the log scale) that exclude 0."""
    return sum(_excludes_zero(ci) for ci in intervals)


def _excludes_zero(ci: Sequence[float] | None) -> bool:
    return ci is not None and (ci[0] > 0 or ci[1] < 0)
