"""Fixtures for the adversarial suite: fast task copies, a judging helper, and the after-test
check that nothing a candidate started is still running."""

from __future__ import annotations

import os
import textwrap
from collections.abc import Iterator
from pathlib import Path

import pytest

from adversarial._support import MARKER, JudgeFn, copy_task
from optarena.judge import JudgeOptions, JudgeResult, judge
from optarena.processes import descendants, is_zombie, process_table
from optarena.tasks import Task


@pytest.fixture(scope="session")
def tasks(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Task]:
    base = tmp_path_factory.mktemp("adversarial-tasks")
    return {tid: copy_task(base, tid) for tid in ("rmsnorm", "softmax")}


@pytest.fixture
def judge_source(tmp_path: Path) -> JudgeFn:
    """Judge `source` as the task's solution.py (correctness only), with optional policy."""
    counter = iter(range(1000))

    def run(task: Task, source: str, options: JudgeOptions | None = None) -> JudgeResult:
        d = tmp_path / f"cand-{next(counter)}"
        d.mkdir()
        (d / task.spec.entry.file).write_text(textwrap.dedent(source))
        return judge(task, d, options or JudgeOptions(measure=False))

    return run


def _marked() -> list[int]:
    found = []
    for pid in process_table():
        try:
            with open(f"/proc/{pid}/cmdline", "rb") as f:
                if MARKER.encode() in f.read():
                    found.append(pid)
        except OSError:
            continue
    return found


def _own_cgroups() -> list[Path]:
    base = Path("/sys/fs/cgroup/pids")
    return list(base.glob(f"optarena-{os.getpid()}-*")) if base.is_dir() else []


@pytest.fixture(autouse=True)
def no_strays() -> Iterator[None]:
    """After every test: no live descendant of this process, no marked process anywhere on the
    machine, no cgroup of ours left behind."""
    yield
    live = [p for p in descendants([os.getpid()]) if not is_zombie(p)]
    assert live == [], f"processes left running: {live}"
    assert _marked() == [], "a process a candidate started is still running"
    assert _own_cgroups() == [], "a worker cgroup was not removed"
