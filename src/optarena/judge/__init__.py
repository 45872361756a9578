"""The judge: correctness in a separate worker process, compared with an independent oracle."""

from optarena.judge._judge import JudgeOptions, judge, new_seed
from optarena.judge._result import JUDGE_SCHEMA_VERSION, Check, JudgeResult

__all__ = ["JUDGE_SCHEMA_VERSION", "Check", "JudgeOptions",
    "JudgeResult", "judge", "new_seed"]
