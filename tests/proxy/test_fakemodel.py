"""The scripted model: replies decided from the conversation's content, in each harness's
dialect, rendered in each API's wire form with the scripted usage."""

from __future__ import annotations

import json
from typing import Any

import pytest

from optarena.fakemodel import USAGE, Reply, Tool, optimize_script, parse_request, render

# private: the fake model's and the proxy's token arithmetic, on literal replies
from optarena.fakemodel._render import served_tokens
from optarena.proxy import SseUsage
from optarena.proxy._usage import tokens_from_reply

SYSTEM = "You are an agent.\nPrimary working directory: /work/ws\n"
CLAUDE_TOOLS = [{"name": n, "input_schema": {}} for n in ("Read", "Write", "Bash", "Edit")]


def claude_request(*turns: dict[str, Any]) -> dict[str, Any]:
    messages = [{"role": "user", "content": [{"type": "text", "text": "Optimize it"}]}]
    messages += list(turns)
    return {"model": "claude-x", "system": SYSTEM, "messages": messages, "tools": CLAUDE_TOOLS}


def use(tid: str, name: str, args: dict[str, Any]) -> dict[str, Any]:
    return {"role": "assistant", "content": [{"type": "tool_use", "id": tid, "name": name,
                                               "input": args}]}  # fmt: skip


def result(tid: str, text: str, is_error: bool = False) -> dict[str, Any]:
    block = {"type": "tool_result", "tool_use_id": tid, "content": text, "is_error": is_error}
    return {"role": "user", "content": [block]}


def test_claude_dialect_walks_read_write_check_finish() -> None:
    script = optimize_script("rmsnorm")
    decide = lambda *t: script.decide(parse_request("anthropic", claude_request(*t)))  # noqa: E731
    r = decide()
    assert r.rule == "read" and r.tool is not None
    assert r.tool.args == {"file_path": "/work/ws/solution.py"}
    read = (use("t1", "Read", {"file_path": "/work/ws/solution.py"}),
            result("t1", "1\tdef rmsnorm(x, weight, *, eps):"))  # fmt: skip
    r = decide(*read)
    assert r.rule == "write" and r.tool is not None and r.tool.name == "Write"
    assert isinstance(r.tool.args, dict) and "einsum" in r.tool.args["content"]
    wrote = (use("t2", "Write", r.tool.args), result("t2", "updated"))
    r = decide(*read, *wrote)
    assert r.rule == "check" and r.tool is not None and r.tool.name == "Bash"
    checked = (use("t3", "Bash", r.tool.args), result("t3", "optarena-check: syntax ok"))
    assert decide(*read, *wrote, *checked).rule == "finish"
    # the same content gets the same answer: no call counter
    assert decide(*read).rule == "write"


def test_claude_denied_writes_give_up() -> None:
    script = optimize_script("rmsnorm")
    turns = [use("t1", "Read", {}), result("t1", "def rmsnorm")]
    for tid in ("t2", "t3"):
        turns += [use(tid, "Write", {"file_path": "/w/solution.py"}), result(tid, "no", True)]
    assert script.decide(parse_request("anthropic", claude_request(*turns))).rule == "give-up"


def test_codex_dialect_patches_with_apply_patch() -> None:
    tools = [
        {"type": "function", "name": "exec_command"},
        {"type": "custom", "name": "apply_patch"},
    ]
    req: dict[str, Any] = {"model": "gpt", "instructions": "x", "tools": tools, "input": [
        {"type": "message", "role": "user", "content": [{"type": "input_text", "text": "go"}]},
    ]}  # fmt: skip
    script = optimize_script("rmsnorm")
    r = script.decide(parse_request("responses", req))
    assert r.rule == "read" and r.tool is not None and r.tool.name == "exec_command"
    req["input"] += [
        {"type": "function_call", "call_id": "c1", "name": "exec_command",
         "arguments": json.dumps(r.tool.args)},
        {"type": "function_call_output", "call_id": "c1", "output": "def rmsnorm(x)"},
    ]  # fmt: skip
    r = script.decide(parse_request("responses", req))
    assert r.rule == "write" and r.tool is not None and r.tool.name == "apply_patch"
    assert isinstance(r.tool.args, str)
    assert r.tool.args.startswith("*** Begin Patch\n*** Update File: solution.py\n")
    assert "\n-    mean_square = np.mean(x**2, axis=-1, keepdims=True)\n" in r.tool.args
    assert "\n+    sum_sq = np.einsum" in r.tool.args


def test_a_harness_without_known_tools_gets_the_code_as_text() -> None:
    req = {"model": "g", "messages": [{"role": "user", "content": "optimize"}]}
    r = optimize_script("rmsnorm").decide(parse_request("chat", req))
    assert r.tool is None and r.text is not None and "einsum" in r.text


@pytest.mark.parametrize("api", ["anthropic", "responses", "chat"])
@pytest.mark.parametrize(
    "reply",
    [
        Reply("read", USAGE["read"], tool=Tool("Read", {"file_path": "/w/solution.py"})),
        Reply("write", USAGE["write"], tool=Tool("apply_patch", "*** Begin Patch\n")),
        Reply("finish", USAGE["finish"], text="done"),
    ],
    ids=["function-tool", "freeform-tool", "text"],
)
def test_rendered_usage_reads_back_as_scripted(api: Any, reply: Reply) -> None:
    data, _ = render(api, reply, "m", False, {})
    _, events = render(api, reply, "m", True, {"stream_options": {"include_usage": True}})
    tracker = SseUsage(api)
    tracker.feed(b"".join(events))
    assert data is not None
    want = served_tokens(api, reply.usage)
    assert tokens_from_reply(api, data) == want == tracker.tokens
