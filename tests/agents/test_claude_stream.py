"""The Claude Code stream-json parser, on streams recorded from Claude Code 2.1.197 driven by
optarena's scripted model server (tests/agents/data/claude_*.jsonl)."""

from __future__ import annotations

from pathlib import Path

# private: the claude runner's stream parser, tested on recorded output
from optarena.agents._claude_stream import parse_claude_stream
from optarena.agents.claude import claude_status

DATA = Path(__file__).parent / "data"


def parse(name: str):  # type: ignore[no-untyped-def]
    return parse_claude_stream(DATA.joinpath(name).read_text().splitlines())


def test_success_stream_usage_session_and_tools() -> None:
    s = parse("claude_success.jsonl")
    assert s.session_id == "a1119cb2-9eb6-404c-986d-c1d7b1a6e80e"
    assert s.version == "2.1.197"
    assert (s.subtype, s.is_error) == ("success", False)
    u = s.usage
    assert u.source == "agent-reported"
    # modelUsage counts every call (a side call of 12 in / 9 out included); result.usage
    # counts the main loop only (1600 / 1060), so modelUsage is the source.
    assert (u.input_tokens, u.output_tokens) == (1612, 1069)
    assert (u.cache_read_tokens, u.cache_write_tokens) == (8300, 2000)
    assert u.reasoning_tokens is None  # Claude Code does not report it separately
    assert u.cost_usd == 0.030860999999999996
    assert u.turns == 4
    assert u.tool_calls == {"Read": 1, "Write": 1, "Bash": 1}
    assert u.models is not None and set(u.models) == {"claude-sonnet-4-5"}
    assert claude_status(s) == ("completed", "success")


def test_permission_denials_are_kept() -> None:
    s = parse("claude_permission_denied.jsonl")
    assert s.permission_mode == "default"
    assert [d["tool_name"] for d in s.permission_denials] == ["Write", "Write"]
    assert s.usage.tool_calls == {"Read": 1, "Write": 2}
    assert claude_status(s)[0] == "completed"


def test_max_turns_is_a_budget_stop() -> None:
    s = parse("claude_max_turns.jsonl")
    assert (s.subtype, s.is_error) == ("error_max_turns", True)
    assert claude_status(s) == ("budget_exceeded", "error_max_turns: max turns reached")


def test_max_budget_uses_model_usage_when_result_usage_is_zero() -> None:
    s = parse("claude_max_budget.jsonl")
    assert s.subtype == "error_max_budget_usd"
    assert s.usage.input_tokens == 1012  # result.usage says 0 here; modelUsage does not
    assert s.usage.cost_usd is not None and s.usage.cost_usd > 0.01
    assert claude_status(s)[0] == "budget_exceeded"


def test_api_error_is_a_failure_with_the_status() -> None:
    s = parse("claude_api_error.jsonl")
    assert (s.is_error, s.api_error_status) == (True, 500)
    status, detail = claude_status(s)
    assert status == "failed"
    assert "API Error: 500 scripted upstream failure" in detail


def test_cut_stream_has_unknown_tokens_not_partial_sums() -> None:
    lines = DATA.joinpath("claude_success.jsonl").read_text().splitlines()[:-1]  # no result
    s = parse_claude_stream(lines)
    assert s.subtype is None and s.session_id is not None
    assert s.usage.input_tokens is None and s.usage.cost_usd is None
    assert s.usage.tool_calls == {"Read": 1, "Write": 1, "Bash": 1}
    assert claude_status(s) == (None, "no result line in the stream")


def test_garbage_lines_are_counted_not_fatal() -> None:
    s = parse_claude_stream(["not json", "[1, 2]", "", '{"type": "unknown"}'])
    assert s.unparsed_lines == 2
    assert s.usage.input_tokens is None
