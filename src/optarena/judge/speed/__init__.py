"""The speed phase: the timing protocol, its statistics and its report.

Owns the phase and `compare`'s arms (`_phase`: private copies at equal-length paths, the A/A
control, noise floors), the comparison loop over fresh process pairs (`_measure`), one pair's
protocol (`_pair`: ABBA/BAAB rounds, the null arm, the judge's clocks) and what it records
(`_samples`: raw samples per arm, slot sizes), the checks on timed
calls (`_checks`), the per-pair integrity checks (`_integrity`), the arms' files (`_arms`),
instruction counts (`_instructions`), the turning of pairs into the `metrics` format (`_report`)
and the one statistics module (`_stats`, public as `optarena.judge.stats`; external tasks and
experiments use it too).
"""

from optarena.judge.speed import _stats as stats
from optarena.judge.speed._instructions import count_instructions
from optarena.judge.speed._measure import MIN_PAIRS_GRACE
from optarena.judge.speed._phase import (
    MAIN_STREAM,
    SpeedOptions,
    SpeedResult,
    apply_floor,
    compare_dirs,
    measure_candidate,
    run_aa,
)
from optarena.judge.speed._report import summarize
from optarena.judge.speed._stats import Estimate, decided, estimate, median

__all__ = [
    "MAIN_STREAM",
    "MIN_PAIRS_GRACE",
    "Estimate",
    "SpeedOptions",
    "SpeedResult",
    "apply_floor",
    "compare_dirs",
    "count_instructions",
    "decided",
    "estimate",
    "measure_candidate",
    "median",
    "run_aa",
    "stats",
    "summarize",
]
