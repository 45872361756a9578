"""The task tools' telemetry (`logs/tool_calls.jsonl` of a trial run with `--task-tools`):
written by optarena's own tool server, outside the agent's reach.

A call is written when it arrives (`started`) and again when it ends (`ok`, `error`), or when
the server is stopped with the call still running (`cut_off`): a call in flight when the agent
quits is never lost, and one whose server was killed outright still has its `started` line.
`calls_of` reads the lines back as one record per call.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

from optarena.records._evolve import evolve

TELEMETRY_SCHEMA_VERSION = 2  # 2: a line when a call starts, call_id, cut_off

ToolCallStatus = Literal["started", "ok", "error", "cut_off"]


class ToolCallRecord(BaseModel):
    """One line of the telemetry log: a call's start, or how it ended."""

    model_config = ConfigDict(extra="forbid")

    schema_version: int = TELEMETRY_SCHEMA_VERSION
    call_id: str | None = Field(
        default=None, description="ties a call's lines together; None: a version 1 line"
    )
    tool: str = Field(description="tool name as called")
    arguments_sha256: str = Field(description="sha256 of the arguments as canonical JSON")
    started_at: str = Field(description="UTC, ISO 8601, when the server received the call")
    duration_s: float | None = Field(
        default=None, description="wall time from receipt to the end or cut-off; None: started"
    )
    status: ToolCallStatus = Field(
        description="started; ok; error (bad arguments or a failure); cut_off (the server was "
        "stopped, or killed, with the call unfinished)"
    )
    result_bytes: int = Field(default=0, description="size of the result text returned")
    verdict: str | None = Field(
        default=None, description="the judge's verdict or speed verdict the call returned, if any"
    )
    error: str | None = Field(default=None, description="why it failed or was cut off")


NO_END = "no end recorded: the server was killed with the call unfinished"


def calls_of(lines: Iterable[ToolCallRecord]) -> list[ToolCallRecord]:
    """One record per call, in the order the calls arrived: its end, or for a call with only
    its `started` line, that line as `cut_off` (`NO_END`)."""
    calls: dict[str, ToolCallRecord] = {}
    for n, line in enumerate(lines):
        key = line.call_id if line.call_id is not None else f"#{n}"
        if key not in calls or line.status != "started":
            calls[key] = line
    return [
        evolve(c, status="cut_off", error=NO_END) if c.status == "started" else c
        for c in calls.values()
    ]
