"""Claude Code's `-p --output-format stream-json --verbose` stream, read into a summary.

The stream is JSON lines: one `system/init` (session id, model, version, tools), then
`assistant` and `user` messages as the agent works, then one `result` line with the run's
subtype, cost and usage. Two details matter for honest numbers (seen in recorded streams of
Claude Code 2.1.197, kept under tests/agents/data):

* `result.usage` covers the main loop only and can be all zeros even after spending
  (e.g. `error_max_budget_usd`); `result.modelUsage` covers every call of every model, so it
  is the token source when present.
* A stream cut short (killed on timeout) has no `result` line: tokens and cost are then
  unknown (None), not the partial sums of the assistant messages, whose output counts are
  placeholders written before the message finished.
"""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Iterable
from typing import Any

from pydantic import BaseModel, ConfigDict, Field

from optarena.records import Usage


class ClaudeStream(BaseModel):
    """What one Claude Code run said about itself."""

    model_config = ConfigDict(extra="forbid")

    session_id: str | None = None
    version: str | None = Field(default=None, description="claude_code_version from init")
    model: str | None = Field(default=None, description="the session model from init")
    permission_mode: str | None = None
    subtype: str | None = Field(default=None, description="result subtype; None: no result")
    is_error: bool | None = None
    api_error_status: int | None = None
    result_text: str | None = None
    permission_denials: list[dict[str, Any]] = Field(default_factory=list)
    usage: Usage = Field(default_factory=lambda: Usage(source="agent-reported"))
    unparsed_lines: int = Field(default=0, description="lines that were not JSON objects")

    @property
    def has_result(self) -> bool:
        return self.subtype is not None


def _int(v: Any) -> int | None:
    return v if isinstance(v, int) and not isinstance(v, bool) else None


def _sum(values: Iterable[int | None]) -> int | None:
    vals = list(values)
    if not vals or any(v is None for v in vals):
        return None
    return sum(v for v in vals if v is not None)


def _tokens_from_model_usage(mu: dict[str, Any]) -> dict[str, int | None]:
    per = [m for m in mu.values() if isinstance(m, dict)]
    return {
        "input_tokens": _sum(_int(m.get("inputTokens")) for m in per),
        "output_tokens": _sum(_int(m.get("outputTokens")) for m in per),
        "cache_read_tokens": _sum(_int(m.get("cacheReadInputTokens")) for m in per),
        "cache_write_tokens": _sum(_int(m.get("cacheCreationInputTokens")) for m in per),
    }


def _tokens_from_usage(u: dict[str, Any]) -> dict[str, int | None]:
    return {
        "input_tokens": _int(u.get("input_tokens")),
        "output_tokens": _int(u.get("output_tokens")),
        "cache_read_tokens": _int(u.get("cache_read_input_tokens")),
        "cache_write_tokens": _int(u.get("cache_creation_input_tokens")),
    }


def _apply_result(out: ClaudeStream, ev: dict[str, Any], tools: Counter[str]) -> None:
    out.subtype = str(ev.get("subtype") or "unknown")
    out.is_error = bool(ev.get("is_error"))
    out.api_error_status = _int(ev.get("api_error_status"))
    out.session_id = ev.get("session_id") or out.session_id
    res = ev.get("result")
    out.result_text = res if isinstance(res, str) else None
    denials = ev.get("permission_denials")
    out.permission_denials = [d for d in denials if isinstance(d, dict)] if denials else []
    mu = ev.get("modelUsage")
    if isinstance(mu, dict) and mu:
        tokens = _tokens_from_model_usage(mu)
    elif isinstance(ev.get("usage"), dict):
        tokens = _tokens_from_usage(ev["usage"])
    else:
        tokens = {}
    cost = ev.get("total_cost_usd")
    out.usage = Usage(
        source="agent-reported",
        cost_usd=float(cost) if isinstance(cost, int | float) else None,
        turns=_int(ev.get("num_turns")),
        tool_calls=dict(tools),
        models=mu if isinstance(mu, dict) and mu else None,
        **tokens,
    )


def parse_claude_stream(lines: Iterable[str]) -> ClaudeStream:
    """Read a stream-json transcript (lines of text) into a ClaudeStream."""
    out = ClaudeStream()
    tools: Counter[str] = Counter()
    seen_tool_ids: set[str] = set()
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
        if etype == "system" and ev.get("subtype") == "init":
            out.session_id = ev.get("session_id") or out.session_id
            out.version = ev.get("claude_code_version")
            out.model = ev.get("model")
            out.permission_mode = ev.get("permissionMode")
        elif etype == "assistant":
            out.session_id = out.session_id or ev.get("session_id")
            for block in (ev.get("message") or {}).get("content") or []:
                if isinstance(block, dict) and block.get("type") == "tool_use":
                    tid = str(block.get("id"))
                    if tid not in seen_tool_ids:
                        seen_tool_ids.add(tid)
                        tools[str(block.get("name"))] += 1
        elif etype == "result":
            _apply_result(out, ev, tools)
    if not out.has_result:
        out.usage = Usage(source="agent-reported", tool_calls=dict(tools) or None)
    return out
