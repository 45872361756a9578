"""Judging a candidate of an external task: the project's own gate and benchmark, frozen.

Owns the judgement (`_judge`: two clean clones at the frozen base, set-up, the gate on both,
the benchmark in AB/BA rounds, `check_base`), the commands it runs in the candidate sandbox and
what it reads back from them (`_run`), the sealed worktrees every command starts from
(`_tree`), the set-up cache (`_setup`), the benchmark's rounds (`_bench`), the OS's cross-check
of the printed metric (`_crosscheck`) and what one judgement carries from step to step
(`_ctx`). It shares the speed phase's statistics and summary, not its timing protocol.
"""

from optarena.judge.external._ctx import BrokenTaskError
from optarena.judge.external._judge import BaseRun, check_base, judge_external

__all__ = ["BaseRun", "BrokenTaskError", "check_base", "judge_external"]
