"""One neutral view of a model request, whichever of the three APIs it came through.

Scripts decide their reply from what the conversation contains (which tools were called,
what they returned), never from a call counter, so a retried or reordered request gets the
same answer a real model would be asked for.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from typing import Any

from optarena.proxy import ApiKind


@dataclass(frozen=True)
class ToolCall:
    """A tool call the assistant made earlier in the conversation."""

    id: str
    name: str
    args: dict[str, Any] | str

    def text(self) -> str:
        """The arguments as one string, for matching."""
        return self.args if isinstance(self.args, str) else json.dumps(self.args)


@dataclass(frozen=True)
class ToolResult:
    """What a tool call returned; `name` is the called tool's name when it can be resolved."""

    call_id: str
    name: str | None
    output: str
    is_error: bool = False


@dataclass
class Conversation:
    """The parts of a request a script looks at."""

    api: ApiKind
    model: str | None
    stream: bool
    system: str = ""
    user_texts: list[str] = field(default_factory=list)
    calls: list[ToolCall] = field(default_factory=list)
    results: list[ToolResult] = field(default_factory=list)
    tools: list[str] = field(default_factory=list)
    # Tools in a namespace (the Responses API's deferred tools, loaded by a tool_search):
    # qualified name `NAMESPACE__NAME` -> (namespace, name), how a call must name them.
    namespaced: dict[str, tuple[str, str]] = field(default_factory=dict)

    def result_of(self, call: ToolCall) -> ToolResult | None:
        return next((r for r in self.results if r.call_id == call.id), None)

    def all_text(self) -> str:
        return "\n".join([self.system, *self.user_texts])

    def cwd(self) -> str | None:
        """The agent's working directory as its harness told the model, if it did."""
        text = self.all_text()
        for pattern in (
            r"<cwd>([^<\n]+)</cwd>",
            r"[Pp]rimary working directory: ?(\S+)",
            r"[Ww]orking directory: ?(\S+)",
        ):
            m = re.search(pattern, text)
            if m:
                return m.group(1).strip()
        return None


def _text_of(content: Any) -> str:
    """Text of a message `content`: a string, or a list of typed blocks."""
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        parts = []
        for block in content:
            if isinstance(block, str):
                parts.append(block)
            elif isinstance(block, dict) and isinstance(block.get("text"), str):
                parts.append(block["text"])
            elif isinstance(block, dict) and "content" in block:
                parts.append(_text_of(block["content"]))
        return "\n".join(parts)
    return ""


def _args(raw: Any) -> dict[str, Any] | str:
    if isinstance(raw, dict):
        return raw
    if isinstance(raw, str):
        try:
            parsed = json.loads(raw)
        except ValueError:
            return raw
        return parsed if isinstance(parsed, dict) else raw
    return {}


def _names(calls: list[ToolCall], results: list[ToolResult]) -> list[ToolResult]:
    by_id = {c.id: c.name for c in calls}
    return [
        ToolResult(r.call_id, r.name or by_id.get(r.call_id), r.output, r.is_error) for r in results
    ]


def _anthropic(conv: Conversation, body: dict[str, Any]) -> None:
    conv.system = _text_of(body.get("system"))
    for msg in body.get("messages") or []:
        content = msg.get("content")
        blocks = content if isinstance(content, list) else [{"type": "text", "text": content}]
        for b in blocks:
            if not isinstance(b, dict):
                continue
            if b.get("type") == "text" and msg.get("role") in ("user", "system"):
                conv.user_texts.append(str(b.get("text") or ""))
            elif b.get("type") == "tool_use":
                conv.calls.append(
                    ToolCall(str(b.get("id")), str(b.get("name")), _args(b.get("input")))
                )
            elif b.get("type") == "tool_result":
                conv.results.append(
                    ToolResult(
                        str(b.get("tool_use_id")),
                        None,
                        _text_of(b.get("content")),
                        bool(b.get("is_error")),
                    )
                )
    conv.tools = [str(t.get("name")) for t in body.get("tools") or [] if isinstance(t, dict)]


def _qualified(namespace: Any, name: Any) -> str:
    """A namespaced tool's name as one string: Codex's own `mcp__SERVER__TOOL` form."""
    return f"{namespace}__{name}" if namespace else str(name)


def _tool_names(tools: Any) -> list[str]:
    """Names of offered tools; a hosted tool with no name (`tool_search`, `web_search`) goes
    by its type."""
    return [str(t.get("name") or t.get("type")) for t in tools or [] if isinstance(t, dict)]


def _load(conv: Conversation, tools: Any) -> None:
    """Tools a `tool_search_output` made callable: plain functions, or namespaces of them."""
    for t in tools or []:
        if not isinstance(t, dict):
            continue
        if t.get("type") == "namespace":
            for inner in t.get("tools") or []:
                if isinstance(inner, dict) and inner.get("name"):
                    name = _qualified(t.get("name"), inner["name"])
                    conv.namespaced[name] = (str(t.get("name")), str(inner["name"]))
                    conv.tools.append(name)
        elif t.get("name"):
            conv.tools.append(str(t["name"]))


def _responses(conv: Conversation, body: dict[str, Any]) -> None:
    conv.system = _text_of(body.get("instructions"))
    conv.tools = _tool_names(body.get("tools"))
    items = body.get("input")
    if isinstance(items, str):
        items = [{"type": "message", "role": "user", "content": items}]
    for it in items or []:
        if not isinstance(it, dict):
            continue
        t = it.get("type", "message")
        if t == "message" and it.get("role") in ("user", "developer", "system"):
            conv.user_texts.append(_text_of(it.get("content")))
        elif t in ("function_call", "custom_tool_call", "local_shell_call"):
            raw = it.get("arguments") if t == "function_call" else it.get("input")
            name = _qualified(it.get("namespace"), it.get("name"))
            conv.calls.append(ToolCall(str(it.get("call_id")), name, _args(raw)))
        elif t in ("function_call_output", "custom_tool_call_output"):
            conv.results.append(
                ToolResult(str(it.get("call_id")), None, _text_of(it.get("output")))
            )
        elif t == "tool_search_call":
            conv.calls.append(
                ToolCall(str(it.get("call_id")), "tool_search", _args(it.get("arguments")))
            )
        elif t == "tool_search_output":
            tools = it.get("tools")
            conv.results.append(ToolResult(str(it.get("call_id")), None, json.dumps(tools)))
            _load(conv, tools)


def _chat(conv: Conversation, body: dict[str, Any]) -> None:
    for msg in body.get("messages") or []:
        role = msg.get("role")
        if role in ("system", "developer"):
            conv.system += _text_of(msg.get("content"))
        elif role == "user":
            conv.user_texts.append(_text_of(msg.get("content")))
        elif role == "assistant":
            for tc in msg.get("tool_calls") or []:
                fn = tc.get("function") or {}
                conv.calls.append(
                    ToolCall(str(tc.get("id")), str(fn.get("name")), _args(fn.get("arguments")))
                )
        elif role == "tool":
            conv.results.append(
                ToolResult(str(msg.get("tool_call_id")), None, _text_of(msg.get("content")))
            )
    conv.tools = [
        str((t.get("function") or {}).get("name"))
        for t in body.get("tools") or []
        if isinstance(t, dict)
    ]


def parse_request(api: ApiKind, body: dict[str, Any]) -> Conversation:
    """The neutral view of a request body of API `api`."""
    model = body.get("model")
    conv = Conversation(
        api=api, model=model if isinstance(model, str) else None, stream=bool(body.get("stream"))
    )
    {"anthropic": _anthropic, "responses": _responses, "chat": _chat}[api](conv, body)
    conv.results = _names(conv.calls, conv.results)
    return conv
