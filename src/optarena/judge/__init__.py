"""The judge: correctness in a separate worker process, compared with an independent oracle."""

from optarena.judge._judge import judge, new_seed
from optarena.judge._result import JUDGE_SCHEMA_VERSION, Check, JudgeResult

__all__ = ["JUDGE_SCHEMA_VERSION", "Check", "JudgeResult", "judge", "new_seed"]
