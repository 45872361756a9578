"""Fixtures for ledger tests: records built without running a trial."""

from __future__ import annotations

import os
import socket
from collections.abc import Callable

import pytest

from optarena.ledger import utc_now
from optarena.records import AgentInfo, AgentLimits, JudgeSettings, TaskInfo, TrialRecord


def running_record(trial_id: str, *, pid: int | None = None, task: str = "rmsnorm") -> TrialRecord:
    """The start record of a trial (state `running`), as the lifecycle writes it."""
    return TrialRecord(
        id=trial_id,
        state="running",
        created_at=utc_now(),
        host=socket.gethostname(),
        pid=os.getpid() if pid is None else pid,
        task=TaskInfo(id=task, version="1.0.0", sha256="t" * 64, root="/tasks/" + task),
        agent=AgentInfo(
            name="command", label="command", is_agent=True, runner="m:C", flags={"command": "x"}
        ),
        labels={"cond": "a"},
        limits=AgentLimits(wall_s=10),
        judge_settings=JudgeSettings(measure=False),
        runtime={"python": "3.11", "sha256": "r" * 64},
        judge_sha256="j" * 64,
        workspace="/ws",
    )


@pytest.fixture
def make_record() -> Callable[..., TrialRecord]:
    return running_record
