"""The task tools' telemetry (`logs/tool_calls.jsonl` of a trial run with `--task-tools`):
written by optarena's own tool server, outside the agent's reach, one line per call."""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

TELEMETRY_SCHEMA_VERSION = 1


class ToolCallRecord(BaseModel):
    """One tool call as the server saw it (a line of the telemetry log)."""

    model_config = ConfigDict(extra="forbid")

    schema_version: int = TELEMETRY_SCHEMA_VERSION
    tool: str = Field(description="tool name as called")
    arguments_sha256: str = Field(description="sha256 of the arguments as canonical JSON")
    started_at: str = Field(description="UTC, ISO 8601")
    duration_s: float = Field(description="wall time the server spent on the call")
    status: Literal["ok", "error"] = Field(description="error: bad arguments or a failure")
    result_bytes: int = Field(description="size of the result text returned to the agent")
    verdict: str | None = Field(
        default=None, description="the judge's verdict or speed verdict the call returned, if any"
    )
    error: str | None = Field(default=None, description="the error message, when status=error")
