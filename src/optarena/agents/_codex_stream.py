"""Codex CLI's `exec --json` event stream, read into a summary.

Events (seen in recorded streams of codex-cli 0.171.0, kept under tests/agents/data):
`thread.started` (thread id), `turn.started`, `item.started` / `item.updated` /
`item.completed` (items: command_execution, file_change, mcp_tool_call, agent_message,
reasoning, web_search, todo_list, error), `turn.completed` with usage, `turn.failed`, and
top-level `error` (also used for "Reconnecting..." retries).

Usage in `turn.completed`: `input_tokens` includes `cached_input_tokens`, and `output_tokens`
includes `reasoning_output_tokens`. optarena's Usage keeps uncached input, so cached tokens
are subtracted once, and reasoning stays inside output. Codex reports no cost, and no count of
model calls (its "turn" is one user prompt, not one agent step), so `turns` stays unknown.
"""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Iterable
from typing import Any

from pydantic import BaseModel, ConfigDict, Field

from optarena.records import Usage


class CodexStream(BaseModel):
    """What one Codex run said about itself."""

    model_config = ConfigDict(extra="forbid")

    thread_id: str | None = None
    turns_started: int = 0
    turns_completed: int = 0
    turns_failed: int = 0
    errors: list[str] = Field(default_factory=list, description="error events and items")
    commands: list[dict[str, Any]] = Field(default_factory=list, description="command, exit")
    files_changed: list[str] = Field(default_factory=list)
    mcp_calls: list[dict[str, Any]] = Field(default_factory=list)
    last_message: str | None = None
    usage: Usage = Field(default_factory=lambda: Usage(source="agent-reported"))
    unparsed_lines: int = 0


def _int(v: Any) -> int | None:
    return v if isinstance(v, int) and not isinstance(v, bool) else None


class _Tokens:
    """Sums turn usages; a field stays None until some turn reports it."""

    def __init__(self) -> None:
        self.input: int | None = None
        self.cached: int | None = None
        self.output: int | None = None
        self.reasoning: int | None = None
        self.cache_write: int | None = None

    def add(self, u: dict[str, Any]) -> None:
        for attr, key in (
            ("input", "input_tokens"),
            ("cached", "cached_input_tokens"),
            ("output", "output_tokens"),
            ("reasoning", "reasoning_output_tokens"),
            ("cache_write", "cache_write_input_tokens"),
        ):
            v = _int(u.get(key))
            if v is not None:
                setattr(self, attr, (getattr(self, attr) or 0) + v)

    def usage_fields(self) -> dict[str, int | None]:
        uncached = None if self.input is None else self.input - (self.cached or 0)
        return {
            "input_tokens": uncached,
            "cache_read_tokens": self.cached,
            "output_tokens": self.output,
            "reasoning_tokens": self.reasoning,
            "cache_write_tokens": self.cache_write,
        }


def _item(out: CodexStream, item: dict[str, Any], tools: Counter[str]) -> None:
    """A completed item: count tool use and keep what it did."""
    kind = item.get("type")
    if kind == "command_execution":
        tools["command_execution"] += 1
        out.commands.append({"command": item.get("command"), "exit_code": item.get("exit_code")})
    elif kind == "file_change":
        tools["file_change"] += 1
        for ch in item.get("changes") or []:
            if isinstance(ch, dict) and ch.get("path"):
                out.files_changed.append(str(ch["path"]))
    elif kind == "mcp_tool_call":
        name = f"mcp:{item.get('server')}/{item.get('tool')}"
        tools[name] += 1
        call = {"server": item.get("server"), "tool": item.get("tool")}
        call["status"] = item.get("status")
        error = item.get("error")
        if isinstance(error, dict) and error.get("message"):
            call["error"] = str(error["message"])[:500]  # e.g. refused for want of approval
        out.mcp_calls.append(call)
    elif kind == "web_search":
        tools["web_search"] += 1
    elif kind == "agent_message":
        out.last_message = item.get("text")
    elif kind == "error":
        out.errors.append(str(item.get("message")))


def parse_codex_stream(lines: Iterable[str]) -> CodexStream:
    """Read a `codex exec --json` transcript (lines of text) into a CodexStream."""
    out = CodexStream()
    tools: Counter[str] = Counter()
    tokens = _Tokens()
    for line in lines:
        line = line.strip()
        if not line:
            continue
        try:
            ev = json.loads(line)
        except (ValueError, RecursionError):  # the agent's output: nested too deep is not JSON
            out.unparsed_lines += 1
            continue
        if not isinstance(ev, dict):
            out.unparsed_lines += 1
            continue
        etype = ev.get("type")
        if etype == "thread.started":
            out.thread_id = ev.get("thread_id")
        elif etype == "turn.started":
            out.turns_started += 1
        elif etype == "turn.completed":
            out.turns_completed += 1
            if isinstance(ev.get("usage"), dict):
                tokens.add(ev["usage"])
        elif etype == "turn.failed":
            out.turns_failed += 1
            out.errors.append(str((ev.get("error") or {}).get("message")))
        elif etype == "error":
            out.errors.append(str(ev.get("message")))
        elif etype == "item.completed" and isinstance(ev.get("item"), dict):
            _item(out, ev["item"], tools)
    fields = {"source": "agent-reported", "tool_calls": dict(tools), **tokens.usage_fields()}
    out.usage = Usage.model_validate(fields)
    return out
