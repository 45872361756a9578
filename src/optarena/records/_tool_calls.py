"""The record of an agent's MCP tool calls, one JSON line each, written outside the agent's
reach: by optarena's task tools server (`logs/tool_calls.jsonl` of a trial run with
`--task-tools`) and by the relay host in front of a harness-built server
(`logs/harness_tool_calls.jsonl`).

The task tools write a call when it arrives (`started`) and again when it ends (`ok`, `error`),
or when the server is stopped with the call still running (`cut_off`): a call in flight when
the agent quits is never lost, and one whose server was killed outright still has its `started`
line. A relay writes one line per call when the reply comes (or, with none, `cut_off`), with
the server's name, the arguments and an excerpt of the reply. `calls_of` reads the lines back as
one record per call.

Versions: 1, a whole call per line; 2, a line when a call starts, `call_id`, `cut_off`; 3,
`server`, `arguments` and `result`, so that a relay's calls are the same record (a relay's own
version 1 lines, `RelayedCall` until then, are read as version 3: `no_reply` is `cut_off`).
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterable
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from optarena.records._evolve import evolve

TELEMETRY_SCHEMA_VERSION = 3  # 2: a line when a call starts, call_id, cut_off; 3: server, ...

ToolCallStatus = Literal["started", "ok", "error", "cut_off"]


class ToolCallRecord(BaseModel):
    """One line of the telemetry log: a call's start, or how it ended."""

    model_config = ConfigDict(extra="forbid")

    schema_version: int = TELEMETRY_SCHEMA_VERSION
    call_id: str | None = Field(
        default=None, description="ties a call's lines together; None: a version 1 line"
    )
    server: str | None = Field(
        default=None, description="the server a relay passed the call to; None: the task tools"
    )
    tool: str = Field(description="tool name as called")
    arguments_sha256: str = Field(description="sha256 of the arguments as canonical JSON")
    arguments: Any = Field(
        default=None, description="as the agent sent them, where a relay recorded the call"
    )
    started_at: str = Field(description="UTC, ISO 8601, when the server received the call")
    duration_s: float | None = Field(
        default=None,
        description="wall time from receipt to the end or cut-off; None: started, or a relayed "
        "call that got no reply",
    )
    status: ToolCallStatus = Field(
        description="started; ok; error (bad arguments or a failure); cut_off (the server was "
        "stopped, or killed, with the call unfinished)"
    )
    result_bytes: int = Field(default=0, description="size of the result text returned")
    result: str = Field(
        default="", description="the reply's text, its first 2000 characters (a relay's calls)"
    )
    verdict: str | None = Field(
        default=None, description="the judge's verdict or speed verdict the call returned, if any"
    )
    error: str | None = Field(default=None, description="why it failed or was cut off")


NO_END = "no end recorded: the server was killed with the call unfinished"
NO_REPLY = "no reply: the server's output ended with the call unanswered"
RESULT_EXCERPT = 2000  # characters of a reply a relay keeps


def arguments_sha256(arguments: Any) -> str:
    """The sha256 of a call's arguments as canonical JSON (what every tool-call line carries)."""
    text = json.dumps(arguments, sort_keys=True, default=str, separators=(",", ":"))
    return hashlib.sha256(text.encode()).hexdigest()


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
