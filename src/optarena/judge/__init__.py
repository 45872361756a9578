"""The judge: correctness in a separate worker process, compared with an independent oracle;
then speed, paired against the baseline (or any other candidate) with an A/A control."""

from optarena.judge._compare import CompareResult, aa_control, compare
from optarena.judge._judge import JudgeOptions, judge
from optarena.judge._result import JUDGE_SCHEMA_VERSION, Check, JudgeResult
from optarena.judge._seal import JudgeTamperedError, verify_judge
from optarena.judge.external import BaseRun, BrokenTaskError, check_base, judge_external
from optarena.judge.speed import (
    MIN_PAIRS_GRACE,
    stats,  # the one statistics module (experiments too)
)

__all__ = [
    "JUDGE_SCHEMA_VERSION",
    "MIN_PAIRS_GRACE",
    "BaseRun",
    "BrokenTaskError",
    "Check",
    "CompareResult",
    "JudgeOptions",
    "JudgeResult",
    "JudgeTamperedError",
    "aa_control",
    "check_base",
    "compare",
    "judge",
    "judge_external",
    "stats",
    "verify_judge",
]
