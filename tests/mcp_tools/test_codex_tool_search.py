"""Codex's deferred MCP tools, without Codex: the scripted model's side of the Responses API's
client tool search (the shapes Codex 0.171 sends and parses, recorded from real runs), the
task-tools script's search-then-call flow, and the `mcp_servers` table the hook gives Codex."""

from __future__ import annotations

import json
import tomllib
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from optarena.agents.codex import CodexOptions, CodexRunner
from optarena.fakemodel import (
    SEARCH_QUERY,
    Conversation,
    OptimizeScript,
    Reply,
    TaskToolsScript,
    Tool,
    parse_request,
    render,
)
from optarena.mcp import TOOL_NAMES, TaskToolsHook
from optarena.records import AgentLimits

TOOLS: list[dict[str, Any]] = [
    {"type": "function", "name": "exec_command", "parameters": {"type": "object"}},
    {"type": "tool_search", "execution": "client", "description": "# Tool discovery"},
    {"type": "web_search", "external_web_access": False},
]
SEARCH_CALL = {
    "type": "tool_search_call",
    "id": "tsc_1",
    "call_id": "call_ts1",
    "status": "completed",
    "execution": "client",
    "arguments": {"query": SEARCH_QUERY, "limit": 8},
}
LOADED = {
    "type": "namespace",
    "name": "mcp__optarena",
    "description": "optarena's judge for this task.",
    "tools": [
        {"type": "function", "name": n, "defer_loading": True, "parameters": {"type": "object"}}
        for n in ("check_correctness", "task_info", "measure")
    ],
}


def _output(tools: list[dict[str, Any]]) -> dict[str, Any]:
    return {
        "type": "tool_search_output",
        "id": "tso_1",
        "call_id": "call_ts1",
        "status": "completed",
        "execution": "client",
        "tools": tools,
    }


def _conv(*items: dict[str, Any]) -> Conversation:
    body = {"model": "gpt-5.5", "stream": True, "tools": TOOLS, "input": list(items)}
    return parse_request("responses", body)


def test_hosted_tools_go_by_type_and_a_search_loads_namespaced_tools() -> None:
    conv = _conv(SEARCH_CALL, _output([LOADED]))
    assert conv.tools[:3] == ["exec_command", "tool_search", "web_search"]
    assert "mcp__optarena__check_correctness" in conv.tools
    assert conv.namespaced["mcp__optarena__measure"] == ("mcp__optarena", "measure")
    assert [c.name for c in conv.calls] == ["tool_search"]
    assert conv.calls[0].args == {"query": SEARCH_QUERY, "limit": 8}
    assert conv.result_of(conv.calls[0]) is not None


def test_a_call_in_a_namespace_is_named_by_namespace_and_name() -> None:
    call = {
        "type": "function_call",
        "name": "check_correctness",
        "namespace": "mcp__optarena",
        "arguments": "{}",
        "call_id": "call_c",
    }
    conv = _conv(call, {"type": "function_call_output", "call_id": "call_c", "output": "ok"})
    assert [c.name for c in conv.calls] == ["mcp__optarena__check_correctness"]


def _streamed_item(reply: Reply, tools: list[dict[str, Any]]) -> dict[str, Any]:
    body = {"model": "gpt-5.5", "stream": True, "tools": tools, "input": []}
    _, events = render("responses", reply, "gpt-5.5", True, body)
    done = [
        json.loads(e.decode().split("data: ", 1)[1])
        for e in events
        if b"response.output_item.done" in e.split(b"\n", 1)[0]
    ]
    assert len(done) == 1
    return dict(done[0]["item"])


def test_the_search_is_a_client_tool_search_call_with_object_arguments() -> None:
    args = {"query": SEARCH_QUERY, "limit": 8}
    item = _streamed_item(Reply("s", tool=Tool("tool_search", args)), TOOLS)
    assert item["type"] == "tool_search_call" and item["execution"] == "client"
    assert item["arguments"] == args and item["call_id"].startswith("call_")
    # Offered as a plain function (no hosted tool_search), it is an ordinary function call.
    plain = [{"type": "function", "name": "tool_search", "parameters": {"type": "object"}}]
    assert _streamed_item(Reply("s", tool=Tool("tool_search", args)), plain)["type"] == (
        "function_call"
    )


def test_a_namespaced_call_names_its_namespace() -> None:
    tool = Tool("measure", {"budget_s": 3.0}, namespace="mcp__optarena")
    item = _streamed_item(Reply("m", tool=tool), TOOLS)
    assert (item["type"], item["name"], item["namespace"]) == (
        "function_call",
        "measure",
        "mcp__optarena",
    )
    assert json.loads(item["arguments"]) == {"budget_s": 3.0}
    assert "namespace" not in _streamed_item(Reply("m", tool=Tool("measure", {})), TOOLS)


class _Done(OptimizeScript):
    """The optimize part already done: every reply would be its finish."""

    def __init__(self) -> None:
        super().__init__("solution.py", "", "", marker="def f")

    def decide(self, conv: Conversation) -> Reply:
        return Reply("finish", text="done")


def _result(call_id: str) -> dict[str, Any]:
    return {"type": "function_call_output", "call_id": call_id, "output": "verdict: rejected"}


def _namespaced(name: str, call_id: str, args: str = "{}") -> dict[str, Any]:
    call = {"type": "function_call", "name": name, "namespace": "mcp__optarena"}
    return call | {"arguments": args, "call_id": call_id}


def test_the_script_searches_once_then_calls_both_tools_in_their_namespace() -> None:
    script = TaskToolsScript(_Done())
    first = script.decide(_conv())
    assert first.tool == Tool("tool_search", {"query": SEARCH_QUERY, "limit": 8})
    found = [SEARCH_CALL, _output([LOADED])]
    check = script.decide(_conv(*found))
    assert check.tool == Tool("check_correctness", {}, namespace="mcp__optarena")
    checked = [*found, _namespaced("check_correctness", "c1"), _result("c1")]
    measure = script.decide(_conv(*checked))
    assert measure.tool == Tool("measure", {"budget_s": 3.0}, namespace="mcp__optarena")
    measured = [*checked, _namespaced("measure", "m1", '{"budget_s": 3.0}'), _result("m1")]
    assert script.decide(_conv(*measured)).rule == "finish"
    assert script.searches == 1
    assert script.called == ["mcp__optarena__check_correctness", "mcp__optarena__measure"]


def test_a_search_that_finds_nothing_is_not_repeated() -> None:
    script = TaskToolsScript(_Done())
    assert script.decide(_conv(SEARCH_CALL, _output([]))).rule == "finish"
    assert script.searches == 0 and script.called == []


@pytest.fixture
def hook() -> Iterator[TaskToolsHook]:
    with TaskToolsHook("rmsnorm", max_budget_s=3.0) as h:
        yield h


def test_codex_gets_a_required_server_with_the_task_tools_approved(
    hook: TaskToolsHook, tmp_path: Path
) -> None:
    """Parsed back from the `-c` override exactly as the runner writes it."""
    runner = CodexRunner(CodexOptions.from_strings(CodexRunner.mcp_args(hook.mcp_servers(), {})))
    argv = runner.command("codex", tmp_path, "go", AgentLimits(), "http://127.0.0.1:7")
    (override,) = [argv[i + 1] for i, a in enumerate(argv) if a == "-c" and "mcp" in argv[i + 1]]
    assert override.startswith("mcp_servers.optarena=")
    server = tomllib.loads(override)["mcp_servers"]["optarena"]
    assert server["args"][-3:-1] == ["relay", "--port"]
    assert server["required"] is True and server["startup_timeout_sec"] >= 30
    assert server["tool_timeout_sec"] > 3.0
    assert server["tools"] == {t: {"approval_mode": "approve"} for t in TOOL_NAMES}
