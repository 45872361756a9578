"""One speed convention for every view: a speed-up in words, `1.16x faster` or `1.08x slower`.

A speed-up is the baseline's time over the candidate's (above 1: the candidate is faster). The
old views printed the time ratio ("0.86x baseline (-14%)"), which reads as slower for a faster
candidate; JSON keeps both figures under their names (`speedup`, `ratio` = candidate time over
baseline time), the words are for people.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

SAME = 0.005  # within half a percent the words say "no change"


def speed_words(speedup: float | None) -> str:
    """`1.16x faster`, `1.08x slower`, `no change (1.00x)`; `unknown` without a figure."""
    if speedup is None or not math.isfinite(speedup) or speedup <= 0:
        return "unknown"
    if abs(speedup - 1.0) < SAME:
        return "no change (1.00x)"
    return f"{speedup:.2f}x faster" if speedup > 1 else f"{1 / speedup:.2f}x slower"


def interval_words(ci: Sequence[float] | None) -> str:
    """A speed-up interval in the same words: `1.08x..1.25x faster`, `1.10x slower..1.05x
    faster`; `no interval` without one."""
    if not ci or len(ci) != 2 or min(ci) <= 0:
        return "no interval"
    lo, hi = sorted(ci)
    if lo >= 1:
        return f"{lo:.2f}x..{hi:.2f}x faster"
    if hi <= 1:
        return f"{1 / hi:.2f}x..{1 / lo:.2f}x slower"
    return f"{1 / lo:.2f}x slower..{hi:.2f}x faster"
