"""`claude`: Claude Code in headless mode (`claude -p --output-format stream-json --verbose`).

    optarena run --task rmsnorm --agent claude --agent-arg model=claude-sonnet-4-5

Each trial gets its own `CLAUDE_CONFIG_DIR` (the user's settings, memory and MCP servers do
not leak in; `user_config=true` opts back in) and `--strict-mcp-config` (only the servers given
with `mcp_config` exist). Calls go through optarena's metering proxy (`ANTHROPIC_BASE_URL`),
which forwards them to `upstream` (default: the user's `ANTHROPIC_BASE_URL`, else
api.anthropic.com) with the user's own `ANTHROPIC_API_KEY` or `ANTHROPIC_AUTH_TOKEN`.

Permissions: the default mode is `bypassPermissions`, since the agent works in a throwaway
workspace and must run its own tests. Claude Code refuses that mode as root unless
`IS_SANDBOX=1`; with `is_sandbox=auto` (the default) the runner sets it only when running as
root in a bypass mode, and records that it did (`extra.is_sandbox`).
"""

from __future__ import annotations

import json
import os
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any, Literal

from pydantic import Field

from optarena.agents._base import McpServer
from optarena.agents._claude_stream import ClaudeStream, parse_claude_stream
from optarena.agents._cli_agent import CliAgentOptions, CliAgentRunner, Parsed, stream_lines
from optarena.errors import OptarenaError
from optarena.records import AgentLimits, AgentStatus

PINNED = "@anthropic-ai/claude-code@2.1.197"
BYPASS_MODES = ("bypassPermissions",)


class ClaudeOptions(CliAgentOptions):
    """`--agent-arg` options of the claude runner."""

    permission_mode: Literal[
        "acceptEdits", "auto", "bypassPermissions", "default", "dontAsk", "plan"
    ] = "bypassPermissions"
    allowed_tools: list[str] = Field(default_factory=list)
    disallowed_tools: list[str] = Field(default_factory=list)
    mcp_config: str | None = Field(default=None, description="MCP servers: a file or JSON")
    is_sandbox: Literal["auto", "always", "never"] = "auto"
    max_retries: int | None = Field(default=None, ge=0, description="CLAUDE_CODE_MAX_RETRIES")


# Result subtypes that mean the agent ran out of an allowance we gave it.
_BUDGET_SUBTYPES = {"error_max_turns": "max turns reached", "error_max_budget_usd": "max budget"}


def claude_status(stream: ClaudeStream) -> tuple[AgentStatus | None, str]:
    """The status Claude Code's own result line implies; None when there is none."""
    if not stream.has_result:
        return None, "no result line in the stream"
    sub = stream.subtype or ""
    if sub in _BUDGET_SUBTYPES:
        return "budget_exceeded", f"{sub}: {_BUDGET_SUBTYPES[sub]}"
    if stream.is_error:
        text = (stream.result_text or "").strip().splitlines()
        return "failed", f"{sub} (is_error): {text[0][:200] if text else 'no message'}"
    return "completed", sub


class ClaudeRunner(CliAgentRunner):
    """Claude Code, headless; see the module docstring."""

    name = "claude"
    binary = "claude"
    package = PINNED
    home_env = "CLAUDE_CONFIG_DIR"
    options_class = ClaudeOptions
    install_hint = f"npm install -g {PINNED}"
    takes_mcp = True
    skills_dir = ".claude/skills"

    options: ClaudeOptions

    @classmethod
    def mcp_args(cls, servers: Sequence[McpServer], given: Mapping[str, str]) -> dict[str, str]:
        """`mcp_config` with only `servers` (`--strict-mcp-config` is always passed) and their
        tools allowed by name after any the user allowed (`mcp__SERVER__TOOL`)."""
        config = {s.name: {"command": s.command[0], "args": list(s.command[1:])} for s in servers}
        tools = [f"mcp__{s.name}__{t}" for s in servers for t in s.tools]
        allowed = ",".join([*filter(None, [given.get("allowed_tools")]), *tools])
        return {
            **given,
            "mcp_config": json.dumps({"mcpServers": config}),
            "allowed_tools": allowed,
        }

    def check_credentials(self, env: Mapping[str, str]) -> None:
        if self.options.user_config or not self.options.meter:
            return  # the user's own login, or Claude Code's own error
        if not (env.get("ANTHROPIC_API_KEY") or env.get("ANTHROPIC_AUTH_TOKEN")):
            raise OptarenaError(
                "agent 'claude': set ANTHROPIC_API_KEY (or ANTHROPIC_AUTH_TOKEN), or pass "
                "--agent-arg user_config=true to use your own Claude Code login"
            )

    def default_upstream(self, env: Mapping[str, str]) -> str:
        return env.get("ANTHROPIC_BASE_URL") or "https://api.anthropic.com"

    def is_sandbox(self) -> bool:
        """Whether to set IS_SANDBOX=1: only as root, in a bypass mode, unless told."""
        o = self.options
        if o.is_sandbox != "auto":
            return o.is_sandbox == "always"
        return os.geteuid() == 0 and o.permission_mode in BYPASS_MODES

    def command(
        self,
        exe: str,
        workspace: Path,
        prompt: str,
        limits: AgentLimits,
        api_url: str | None,
        resume: str | None = None,
    ) -> list[str]:
        o = self.options
        argv = [exe, "-p", "--output-format", "stream-json", "--verbose"]
        if resume is not None:
            argv += ["--resume", resume]  # the session in this config home, same workspace
        argv += ["--permission-mode", o.permission_mode]
        if o.model:
            argv += ["--model", o.model]
        if limits.max_turns is not None:
            argv += ["--max-turns", str(limits.max_turns)]
        if limits.max_cost_usd is not None:
            argv += ["--max-budget-usd", f"{limits.max_cost_usd:g}"]
        if o.allowed_tools:
            argv += ["--allowedTools", ",".join(o.allowed_tools)]
        if o.disallowed_tools:
            argv += ["--disallowedTools", ",".join(o.disallowed_tools)]
        if not o.user_config:
            argv.append("--strict-mcp-config")
        if o.mcp_config:
            argv += ["--mcp-config", o.mcp_config]
        return [*argv, *o.extra_args, "--", prompt]

    def environment(self, home: Path | None, api_url: str | None) -> dict[str, str]:
        env = {
            "DISABLE_AUTOUPDATER": "1",
            "DISABLE_TELEMETRY": "1",
            "DISABLE_ERROR_REPORTING": "1",
            "CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC": "1",
        }
        if home is not None:
            env["CLAUDE_CONFIG_DIR"] = str(home)
        if api_url is not None:
            env["ANTHROPIC_BASE_URL"] = api_url
        if self.options.max_retries is not None:
            env["CLAUDE_CODE_MAX_RETRIES"] = str(self.options.max_retries)
        if self.is_sandbox():
            env["IS_SANDBOX"] = "1"
        if self.options.mcp_config:
            # `-p` mode connects MCP servers in the background and, in the pinned 2.1.x
            # releases, never offers a server still pending at start-up: wait for them.
            env |= {"MCP_CONNECTION_NONBLOCKING": "false", "MCP_CONNECT_TIMEOUT_MS": "30000"}
        return env

    def parse(self, stdout: Path) -> Parsed:
        stream = parse_claude_stream(stream_lines(stdout))
        status, detail = claude_status(stream)
        extra: dict[str, Any] = {
            "claude": {
                "subtype": stream.subtype,
                "is_error": stream.is_error,
                "api_error_status": stream.api_error_status,
                "permission_mode": stream.permission_mode,
                "model": stream.model,
                "version": stream.version,
                "permission_denials": stream.permission_denials,
                "result": (stream.result_text or "")[:2000] or None,
            },
            "is_sandbox": self.is_sandbox(),
        }
        if stream.permission_denials:
            names = sorted({str(d.get("tool_name")) for d in stream.permission_denials})
            detail += f"; {len(stream.permission_denials)} permission denials ({', '.join(names)})"
        return Parsed(stream.usage, stream.session_id, status, detail, extra)
