"""`codex`: Codex CLI, non-interactive (`codex exec --json --skip-git-repo-check`).

    optarena run --task rmsnorm --agent codex --agent-arg model=gpt-5.1-codex

Each trial gets its own `CODEX_HOME` (the user's config.toml is not read; `user_config=true`
opts back in). Codex ignores `OPENAI_BASE_URL` and only speaks the Responses API, so the runner
points it at optarena's metering proxy with a custom model provider given as `-c` overrides
(`model_provider="optarena"`, `model_providers.optarena={base_url=..., env_key=...,
wire_api="responses"}`); the user's `OPENAI_API_KEY` (or `env_key`) travels through the proxy
to `upstream` (default api.openai.com). MCP servers are given as `-c mcp_servers.NAME={...}`.

Codex reports tokens but no cost: the agent-reported cost comes from optarena's price table
for the model, or is unknown.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any, Literal

from pydantic import Field, field_validator

from optarena.agents._base import McpServer, RunContext
from optarena.agents._cli_agent import CliAgentOptions, CliAgentRunner, Parsed, stream_lines
from optarena.agents._codex_stream import CodexStream, parse_codex_stream
from optarena.errors import OptarenaError
from optarena.proxy import load_prices
from optarena.records import AgentLimits, AgentStatus, Usage, evolve

PINNED = "@openai/codex@0.171.0"
PROVIDER = "optarena"
# Codex splits a `-c` key on dots and takes each part literally (no TOML quoted keys: a quoted
# name keeps its quotes and fails Codex's own server-name check), so a server name must be a
# bare key within Codex's pattern `^[a-zA-Z0-9_:@/.-]+$`, less the dot.
SERVER_NAME = re.compile(r"^[A-Za-z0-9_:@/-]+$")


class CodexOptions(CliAgentOptions):
    """`--agent-arg` options of the codex runner."""

    sandbox: Literal["read-only", "workspace-write", "danger-full-access"] = "workspace-write"
    bypass_sandbox: bool = Field(
        default=False, description="--dangerously-bypass-approvals-and-sandbox"
    )
    mcp_servers: dict[str, dict[str, Any]] = Field(
        default_factory=dict, description="name -> {command, args, env, url, ...}"
    )
    config: list[str] = Field(default_factory=list, description="raw `-c key=value` overrides")
    env_key: str = Field(default="OPENAI_API_KEY", description="variable holding the API key")
    max_retries: int | None = Field(
        default=None, ge=0, description="request_max_retries and stream_max_retries"
    )

    @field_validator("mcp_servers")
    @classmethod
    def _bare_server_names(cls, servers: dict[str, dict[str, Any]]) -> dict[str, dict[str, Any]]:
        bad = [name for name in servers if not SERVER_NAME.match(name)]
        if bad:
            raise ValueError(
                f"MCP server name {bad[0]!r}: expected letters, digits and _ : @ / - only "
                "(Codex reads the name from a dotted `-c mcp_servers.NAME=...` key)"
            )
        return servers


def toml_value(value: Any) -> str:
    """A TOML inline value (for `-c key=value`): strings, numbers, booleans, lists, tables."""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int | float):
        return repr(value)
    if isinstance(value, str):
        return json.dumps(value)  # a JSON string is a valid TOML basic string
    if isinstance(value, list):
        return "[" + ", ".join(toml_value(v) for v in value) + "]"
    if isinstance(value, dict):
        items = ", ".join(f"{json.dumps(str(k))} = {toml_value(v)}" for k, v in value.items())
        return "{" + items + "}"
    raise OptarenaError(f"codex: cannot express {value!r} as a TOML value")


MCP_STARTUP_TIMEOUT_S = 60.0


def codex_mcp_server(command: list[str], tools: list[str], tool_timeout_s: float) -> dict[str, Any]:
    """The `mcp_servers.NAME` table for a server optarena offers to `codex exec` and whose tools
    the agent must be able to call. `required`: `codex exec` otherwise starts the first turn
    without waiting for MCP servers, and a server still starting is missing from that turn's
    tool search; required, Codex waits for it (up to `startup_timeout_sec`) and fails the run if
    it cannot start, instead of running an agent without the tools it was promised. Each tool
    is approved by name (as Claude Code's allowed tools are): `codex exec` runs with approval
    policy `never`, under which a tool that needs approval is refused, never asked about."""
    return {
        "command": command[0],
        "args": command[1:],
        "tools": {t: {"approval_mode": "approve"} for t in tools},
        "required": True,
        "startup_timeout_sec": MCP_STARTUP_TIMEOUT_S,
        "tool_timeout_sec": tool_timeout_s,
    }


def codex_status(stream: CodexStream) -> tuple[AgentStatus | None, str]:
    """The status the event stream implies; None when it does not say."""
    if stream.turns_failed:
        last = stream.errors[-1] if stream.errors else "turn failed"
        return "failed", f"turn.failed: {last[:200]}"
    if stream.turns_completed:
        return "completed", "turn.completed"
    return None, stream.errors[-1][:200] if stream.errors else "no turn.completed event"


class CodexRunner(CliAgentRunner):
    """Codex CLI, `codex exec`; see the module docstring."""

    name = "codex"
    binary = "codex"
    package = PINNED
    home_env = "CODEX_HOME"
    options_class = CodexOptions
    install_hint = f"npm install -g {PINNED}"
    takes_mcp = True
    skills_dir = ".agents/skills"

    options: CodexOptions

    @classmethod
    def mcp_args(cls, servers: Sequence[McpServer], given: Mapping[str, str]) -> dict[str, str]:
        """`mcp_servers` with each of `servers` as a required server, its tools approved by name
        (`codex_mcp_server`), added to any the user gave."""
        tables = {
            s.name: codex_mcp_server(list(s.command), list(s.tools), s.tool_timeout_s)
            for s in servers
        }
        mine = json.loads(given["mcp_servers"]) if given.get("mcp_servers") else {}
        return {**given, "mcp_servers": json.dumps({**mine, **tables})}

    def check_credentials(self, env: Mapping[str, str]) -> None:
        if self.options.meter and not env.get(self.options.env_key):
            raise OptarenaError(
                f"agent 'codex': set {self.options.env_key} (the API key the metering proxy "
                "passes on), or choose another variable with --agent-arg env_key=NAME"
            )

    def default_upstream(self, env: Mapping[str, str]) -> str:
        return env.get("OPENAI_BASE_URL") or "https://api.openai.com"

    def _overrides(self, api_url: str | None) -> list[str]:
        o = self.options
        out: list[str] = []
        if api_url is not None:
            provider: dict[str, Any] = {
                "name": "optarena metering proxy",
                "base_url": f"{api_url}/v1",
                "env_key": o.env_key,
                "wire_api": "responses",
            }
            if o.max_retries is not None:
                provider |= {"request_max_retries": o.max_retries}
                provider |= {"stream_max_retries": o.max_retries}
            out += [f"model_provider={toml_value(PROVIDER)}"]
            out += [f"model_providers.{PROVIDER}={toml_value(provider)}"]
        for name, server in o.mcp_servers.items():
            out.append(f"mcp_servers.{name}={toml_value(server)}")
        return out + list(o.config)

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
        argv = [exe, "exec", "--json", "--skip-git-repo-check", "--color", "never"]
        argv += ["--cd", str(workspace)]
        if o.bypass_sandbox:
            argv.append("--dangerously-bypass-approvals-and-sandbox")
        else:
            argv += ["--sandbox", o.sandbox]
        if o.model:
            argv += ["--model", o.model]
        for override in self._overrides(api_url):
            argv += ["-c", override]
        argv += o.extra_args
        if resume is not None:
            # `exec resume` takes no --cd or --sandbox of its own: the exec options above apply
            return [*argv, "resume", resume, "--", prompt]
        return [*argv, "--", prompt]

    def environment(self, home: Path | None, api_url: str | None) -> dict[str, str]:
        return {"CODEX_HOME": str(home)} if home is not None else {}

    def parse(self, stdout: Path) -> Parsed:
        stream = parse_codex_stream(stream_lines(stdout))
        status, detail = codex_status(stream)
        extra = {
            "codex": {
                "thread_id": stream.thread_id,
                "errors": stream.errors[-20:],
                "commands": stream.commands[-50:],
                "files_changed": stream.files_changed,
                "mcp_calls": stream.mcp_calls,
                "last_message": (stream.last_message or "")[:2000] or None,
            }
        }
        return Parsed(stream.usage, stream.thread_id, status, detail, extra)

    def reported_usage(self, parsed: Parsed, context: RunContext) -> Usage:
        """Codex reports no cost: price its tokens with the model it was given, else the one
        model the proxy saw it use; unknown when neither is priced."""
        model = self.options.model
        if model is None and context.metered is not None:
            seen = set((context.metered().models or {}).keys())
            model = seen.pop() if len(seen) == 1 else None
        u = parsed.usage
        prices = load_prices()
        cost = prices.cost(
            model,
            input=u.input_tokens,
            output=u.output_tokens,
            cache_read=u.cache_read_tokens,
            cache_write=u.cache_write_tokens,
        )
        if cost is not None:
            parsed.extra["codex"]["cost_source"] = f"price table {prices.version}, {model}"
        return evolve(u, cost_usd=cost)
