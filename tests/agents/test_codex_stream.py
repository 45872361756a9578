"""The Codex `exec --json` parser, on streams recorded from codex-cli 0.171.0 driven by
optarena's scripted model server (tests/agents/data/codex_*.jsonl)."""

from __future__ import annotations

import json
from pathlib import Path

# private: the codex runner's stream parser, tested on recorded output
from optarena.agents._codex_stream import parse_codex_stream
from optarena.agents.codex import codex_status, toml_value

DATA = Path(__file__).parent / "data"


def test_success_stream_splits_cached_and_reasoning_once() -> None:
    s = parse_codex_stream(DATA.joinpath("codex_success.jsonl").read_text().splitlines())
    assert s.thread_id == "01a23699-925d-7281-b1b0-91ed2ae23c12"
    u = s.usage
    # turn.completed: input_tokens 9900 includes cached 8300; output 1060 includes 100 reasoning
    assert (u.input_tokens, u.cache_read_tokens) == (1600, 8300)
    assert (u.output_tokens, u.reasoning_tokens) == (1060, 100)
    assert u.cache_write_tokens == 0
    assert u.cost_usd is None  # Codex reports no cost
    assert u.turns is None
    assert u.tool_calls == {"command_execution": 2, "file_change": 1}
    assert s.files_changed == ["/tmp/exp/ws2/solution.py"]
    assert s.last_message == "Replaced solution.py with a faster version."
    assert codex_status(s) == ("completed", "turn.completed")


def test_failed_turn_is_a_failure_with_the_message() -> None:
    s = parse_codex_stream(DATA.joinpath("codex_api_error.jsonl").read_text().splitlines())
    assert s.turns_failed == 1
    assert s.usage.input_tokens is None and s.usage.output_tokens is None
    status, detail = codex_status(s)
    assert status == "failed" and detail.startswith("turn.failed:")


def test_two_turns_are_summed() -> None:
    usage = {"input_tokens": 100, "cached_input_tokens": 40, "output_tokens": 30}
    turn = json.dumps({"type": "turn.completed", "usage": usage})
    s = parse_codex_stream([turn, turn])
    assert (s.usage.input_tokens, s.usage.cache_read_tokens, s.usage.output_tokens) == (
        120,
        80,
        60,
    )
    assert s.usage.reasoning_tokens is None  # never reported: unknown, not zero


def test_mcp_and_error_items() -> None:
    lines = [
        '{"type":"item.completed","item":{"id":"i","type":"mcp_tool_call","server":"t",'
        '"tool":"bench","status":"completed"}}',
        # Codex 0.171's words for an MCP call refused under approval policy `never`
        '{"type":"item.completed","item":{"id":"k","type":"mcp_tool_call","server":"t",'
        '"tool":"bench","arguments":{},"result":null,"error":{"message":"MCP tool call '
        'requires approval, but approval policy is never"},"status":"failed"}}',
        '{"type":"item.completed","item":{"id":"j","type":"error","message":"boom"}}',
        "garbage",
    ]
    s = parse_codex_stream(lines)
    assert s.usage.tool_calls == {"mcp:t/bench": 2}
    refused = "MCP tool call requires approval, but approval policy is never"
    assert s.mcp_calls == [
        {"server": "t", "tool": "bench", "status": "completed"},
        {"server": "t", "tool": "bench", "status": "failed", "error": refused},
    ]
    assert s.errors == ["boom"] and s.unparsed_lines == 1
    assert codex_status(s) == (None, "boom")


def test_toml_values_for_overrides() -> None:
    server = {"command": "python3", "args": ["-m", "x"], "env": {"A": "1"}, "enabled": True}
    assert toml_value(server) == (
        '{"command" = "python3", "args" = ["-m", "x"], "env" = {"A" = "1"}, "enabled" = true}'
    )
    assert toml_value('say "hi"') == '"say \\"hi\\""'
