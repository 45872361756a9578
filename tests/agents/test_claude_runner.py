"""The claude runner: command line, environment, options, and a run end to end with a stand-in
executable that replays a recorded Claude Code stream (the real CLI runs in tests/e2e)."""

from __future__ import annotations

import os
import stat
from pathlib import Path

import pytest

from optarena.agents import RunContext, create_runner, run_metered
from optarena.agents.claude import ClaudeOptions, ClaudeRunner
from optarena.errors import OptarenaError
from optarena.fakemodel import FakeModelServer, make_script
from optarena.records import AgentLimits

DATA = Path(__file__).parent / "data"


def stand_in(tmp_path: Path, body: str) -> str:
    exe = tmp_path / "claude"
    exe.write_text(f"#!/bin/sh\n{body}\n")
    exe.chmod(exe.stat().st_mode | stat.S_IEXEC)
    return str(exe)


def test_command_line_carries_limits_tools_and_mcp(tmp_path: Path) -> None:
    r = create_runner(
        "claude",
        {
            "model": "claude-sonnet-4-5",
            "allowed_tools": "Read,Edit",
            "mcp_config": '{"mcpServers": {}}',
            "extra_args": "--effort low",
        },
    )
    assert isinstance(r, ClaudeRunner)
    limits = AgentLimits(wall_s=60, max_turns=7, max_cost_usd=0.5)
    argv = r.command("claude", tmp_path, "-do it", limits, "http://127.0.0.1:1")
    assert argv[:5] == ["claude", "-p", "--output-format", "stream-json", "--verbose"]
    assert argv[-2:] == ["--", "-do it"]  # a prompt starting with '-' stays a prompt
    joined = " ".join(argv)
    for part in (
        "--model claude-sonnet-4-5",
        "--max-turns 7",
        "--max-budget-usd 0.5",
        "--allowedTools Read,Edit",
        "--strict-mcp-config",
        '--mcp-config {"mcpServers": {}}',
        "--permission-mode bypassPermissions",
        "--effort low",
    ):
        assert part in joined


def test_environment_isolates_config_and_points_at_the_proxy(tmp_path: Path) -> None:
    r = ClaudeRunner(ClaudeOptions(max_retries=0))
    env = r.environment(tmp_path / "home", "http://127.0.0.1:5")
    assert env["CLAUDE_CONFIG_DIR"] == str(tmp_path / "home")
    assert env["ANTHROPIC_BASE_URL"] == "http://127.0.0.1:5"
    assert env["CLAUDE_CODE_MAX_RETRIES"] == "0"
    assert ("IS_SANDBOX" in env) == (os.geteuid() == 0)  # only root needs it for bypass
    assert "IS_SANDBOX" not in ClaudeRunner(ClaudeOptions(is_sandbox="never")).environment(
        None, None
    )
    assert "IS_SANDBOX" not in ClaudeRunner(
        ClaudeOptions(permission_mode="acceptEdits")
    ).environment(None, None)


def test_bad_options_and_missing_key_are_clear(monkeypatch: pytest.MonkeyPatch) -> None:
    with pytest.raises(OptarenaError, match="unknown option; known:"):
        create_runner("claude", {"modle": "x"})
    with pytest.raises(OptarenaError, match="permission_mode"):
        create_runner("claude", {"permission_mode": "yolo"})
    monkeypatch.delenv("ANTHROPIC_API_KEY", raising=False)
    monkeypatch.delenv("ANTHROPIC_AUTH_TOKEN", raising=False)
    with pytest.raises(OptarenaError, match="set ANTHROPIC_API_KEY"):
        ClaudeRunner(ClaudeOptions(bin="/bin/true")).check_available()
    with pytest.raises(OptarenaError, match="needs '/nonexistent/claude'"):
        ClaudeRunner(ClaudeOptions(bin="/nonexistent/claude")).check_available()


def test_flags_record_env_names_not_values() -> None:
    r = ClaudeRunner(ClaudeOptions(model="m", env={"ANTHROPIC_API_KEY": "sk-secret"}))
    assert r.flags() == {"model": "m", "env": ["ANTHROPIC_API_KEY"]}


def test_run_with_a_recorded_stream(tmp_path: Path) -> None:
    exe = stand_in(tmp_path, f"cat {DATA / 'claude_success.jsonl'}")
    (tmp_path / "ws").mkdir()
    with FakeModelServer(make_script("hello")) as fake:
        r = ClaudeRunner(ClaudeOptions(bin=exe, upstream=fake.url))
        ctx = RunContext.bare(tmp_path / "ws", tmp_path / "trial" / "logs")
        out = run_metered(r, ctx, "go", AgentLimits(wall_s=30))
    assert out.status == "completed" and out.exit_code == 0
    assert out.session_id == "a1119cb2-9eb6-404c-986d-c1d7b1a6e80e"
    assert out.usage.cost_usd == 0.030860999999999996
    assert out.metered_usage is not None and out.metered_usage.calls == 0  # it never called
    assert Path(out.logs["stdout"]).read_text().startswith('{"type":"system"')
    assert out.extra["config_home"] == str(tmp_path / "trial" / "claude-home")


def test_timeout_kills_the_agent(tmp_path: Path) -> None:
    exe = stand_in(tmp_path, "sleep 30 &\nwait")
    (tmp_path / "ws").mkdir()
    r = ClaudeRunner(ClaudeOptions(bin=exe, meter=False, grace_s=0.2))
    ctx = RunContext.bare(tmp_path / "ws", tmp_path / "logs")
    out = run_metered(r, ctx, "go", AgentLimits(wall_s=0.5))
    assert out.status == "timeout" and out.metered_usage is None
    assert out.usage.input_tokens is None  # no result line: unknown, not zero
    assert out.wall_s is not None and out.wall_s < 10


def test_resume_continues_the_session(tmp_path: Path) -> None:
    r = ClaudeRunner(ClaudeOptions())
    argv = r.command("claude", tmp_path, "go on", AgentLimits(), None, "sess-1")
    assert argv[argv.index("--resume") + 1] == "sess-1" and argv[-2:] == ["--", "go on"]
    assert "--resume" not in r.command("claude", tmp_path, "go", AgentLimits(), None)
