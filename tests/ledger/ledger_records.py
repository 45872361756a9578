"""Building ledger records for tests without running a trial."""

from __future__ import annotations

import os
import socket

from optarena.agents import AgentLimits
from optarena.ledger import AgentInfo, Judgement, JudgeSettings, TaskInfo, TrialRecord, utc_now


def running_record(trial_id: str, *, pid: int | None = None, task: str = "rmsnorm") -> TrialRecord:
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


def judgement(trial_id: str, verdict: str = "accepted", kind: str = "trial") -> Judgement:
    return Judgement.model_validate(
        {
            "trial_id": trial_id,
            "kind": kind,
            "created_at": utc_now(),
            "verdict": verdict,
            "reason_codes": [] if verdict == "accepted" else ["out_of_tolerance"],
            "settings": {"measure": False},
        }
    )


def completed(record: TrialRecord, **update: object) -> TrialRecord:
    fields: dict[str, object] = {
        "state": "complete",
        "finished_at": utc_now(),
        "agent_status": "completed",
        "verdict": "accepted",
    }
    fields.update(update)
    return record.model_copy(update=fields)
