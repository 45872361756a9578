"""Every cheat is rejected with its own reason code, never a performance number, and the judge
stays healthy (the no_strays fixture checks that nothing it started survives)."""

from __future__ import annotations

import socket
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from adversarial._support import FAST_LIMITS, MARKER, JudgeFn, copy_task
from adversarial.cheats import CHEATS, Cheat
from optarena.judge import JudgeOptions
from optarena.sandbox import SandboxPolicy
from optarena.tasks import Task


@pytest.fixture(scope="module")
def listener() -> Iterator[socket.socket]:
    """A TCP server on 127.0.0.1 that a cheat would fetch answers from."""
    srv = socket.socket()
    srv.bind(("127.0.0.1", 0))
    srv.listen(8)
    srv.setblocking(False)
    yield srv
    srv.close()


def _task_for(cheat: Cheat, tasks: dict[str, Task], tmp_path: Path) -> Task:
    if cheat.limits is None and not cheat.unsandboxed:
        return tasks[cheat.task]
    return copy_task(tmp_path, cheat.task, cheat.limits or FAST_LIMITS)


def test_the_suite_is_broad() -> None:
    assert len(CHEATS) >= 25
    assert {c.task for c in CHEATS} == {"rmsnorm", "softmax"}
    assert len({c.code for c in CHEATS}) >= 20


@pytest.mark.parametrize("cheat", CHEATS, ids=[c.name for c in CHEATS])
def test_cheat_is_rejected_with_its_reason(
    cheat: Cheat,
    tasks: dict[str, Task],
    judge_source: JudgeFn,
    listener: socket.socket,
    tmp_path: Path,
) -> None:
    task = _task_for(cheat, tasks, tmp_path)
    source = (
        cheat.source.replace("@TASK_ROOT@", str(task.root))
        .replace("@PORT@", str(listener.getsockname()[1]))
        .replace("@MARKER@", MARKER)
    )
    policy = SandboxPolicy.none() if cheat.unsandboxed else None
    t0 = time.monotonic()
    result = judge_source(task, source, JudgeOptions(measure=False, sandbox=policy))
    assert result.verdict == "rejected"
    assert cheat.code in result.reason_codes, result.reasons
    assert result.metrics is None
    assert time.monotonic() - t0 < 30
    assert not Path(f"/tmp/{MARKER}-written").exists()
    with pytest.raises(BlockingIOError):
        listener.accept()  # nothing ever connected
    if not cheat.unsandboxed:
        assert result.integrity["status"] == "unchanged"
