"""How an activated, qualified MCP server is offered to each CLI (the hook's servers through the
runner's `mcp_args`, parsed back from the argv the runner writes): Codex needs the server
required and each of its tools approved by name, or a fresh `codex exec` session never gets to
call it; Claude Code needs the tools allowed by name and the wait for servers at start-up."""

from __future__ import annotations

import json
import sys
import tomllib
from collections.abc import Iterator
from pathlib import Path

import pytest

from optarena.agents.claude import ClaudeOptions, ClaudeRunner
from optarena.agents.codex import CodexOptions, CodexRunner
from optarena.harness import HarnessHook

# private: the hook's record of a started server, checked after a trial
from optarena.harness._hook import ActiveServer
from optarena.records import AgentLimits


@pytest.fixture
def hook(tmp_path: Path) -> Iterator[HarnessHook]:
    server = ActiveServer("bench", tmp_path, [sys.executable, "server.py"], ["probe", "size"])
    with HarnessHook([server]) as h:
        yield h


def test_codex_gets_the_built_server_required_with_its_tools_approved(
    hook: HarnessHook, tmp_path: Path
) -> None:
    args = CodexRunner.mcp_args(hook.mcp_servers(), {"model": "gpt-5.5"})
    runner = CodexRunner(CodexOptions.from_strings(args))
    argv = runner.command("codex", tmp_path, "go", AgentLimits(), "http://127.0.0.1:7")
    (override,) = [argv[i + 1] for i, a in enumerate(argv) if a == "-c" and "mcp" in argv[i + 1]]
    server = tomllib.loads(override)["mcp_servers"]["bench"]
    assert server["args"][-3:-1] == ["relay", "--port"]  # the relay, never the agent's copy
    assert server["required"] is True and server["startup_timeout_sec"] >= 30
    assert server["tools"] == {t: {"approval_mode": "approve"} for t in ("probe", "size")}


def test_claude_gets_the_tools_allowed_by_name_and_waits_for_the_server(
    hook: HarnessHook, tmp_path: Path
) -> None:
    args = ClaudeRunner.mcp_args(hook.mcp_servers(), {"allowed_tools": "Read"})
    runner = ClaudeRunner(ClaudeOptions.from_strings(args))
    argv = runner.command("claude", tmp_path, "go", AgentLimits(), "http://127.0.0.1:7")
    allowed = argv[argv.index("--allowedTools") + 1].split(",")
    assert allowed == ["Read", "mcp__bench__probe", "mcp__bench__size"]
    config = json.loads(argv[argv.index("--mcp-config") + 1])
    assert list(config["mcpServers"]) == ["bench"] and "--strict-mcp-config" in argv
    env = runner.environment(tmp_path, "http://127.0.0.1:7")
    assert env["MCP_CONNECTION_NONBLOCKING"] == "false"
    plain = ClaudeRunner(ClaudeOptions.from_strings({}))  # no servers: nothing to wait for
    assert "MCP_CONNECTION_NONBLOCKING" not in plain.environment(tmp_path, None)


def test_the_users_codex_servers_are_kept_beside_the_built_one(hook: HarnessHook) -> None:
    mine = json.dumps({"docs": {"command": "docs-server"}})
    args = CodexRunner.mcp_args(hook.mcp_servers(), {"mcp_servers": mine})
    assert list(json.loads(args["mcp_servers"])) == ["docs", "bench"]


def test_a_runner_that_takes_no_mcp_servers_refuses_them(hook: HarnessHook) -> None:
    from optarena.agents import mcp_runners, runner_class
    from optarena.errors import OptarenaError

    assert mcp_runners() == ["claude", "codex"]
    with pytest.raises(OptarenaError, match="agent 'command' takes no MCP servers"):
        runner_class("command").mcp_args(hook.mcp_servers(), {})


def test_closing_the_hook_closes_its_hosts(tmp_path: Path) -> None:
    server = ActiveServer("bench", tmp_path, [sys.executable, "server.py"], ["probe"])
    with HarnessHook([server]) as h:
        (host,) = h.hosts
        assert host.port is not None
    assert h.hosts == [] and host._sock is None
