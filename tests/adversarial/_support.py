"""Shared by the adversarial tests: fast task copies and the marker for left-over processes."""

from __future__ import annotations

import os
import shutil
import textwrap
from collections.abc import Callable
from pathlib import Path

from optarena.judge import JudgeResult
from optarena.tasks import BUILTIN_DIR, Task, load_task

FAST_LIMITS = """
[limits]
call_timeout_s = 3.0
load_timeout_s = 10.0
total_timeout_s = 90.0
"""

# put in the argv of anything a cheat leaves running; one per xdist worker, so a test checks
# for its own leftovers, never those of a test running beside it
MARKER = f"optarena-adversarial-marker-{os.environ.get('PYTEST_XDIST_WORKER', 'gw')[2:]}-"

JudgeFn = Callable[..., JudgeResult]


def copy_task(dest: Path, task_id: str, limits: str = FAST_LIMITS) -> Task:
    root = dest / task_id
    shutil.copytree(BUILTIN_DIR / task_id, root, ignore=shutil.ignore_patterns("__pycache__"))
    with (root / "task.toml").open("a") as f:
        f.write(textwrap.dedent(limits))
    return load_task(root)
