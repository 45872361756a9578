"""`optarena run --task-tools`: the agent gets optarena's task tools, contained.

Before the trial, `TaskToolsHook.start` opens the tools host on a loopback port and says how
each CLI names the server (the relay command). Before the agent runs, the hook points the host
at the trial's workspace, sends telemetry to the trial's work directory (out of the agent's
reach) and opens the port into the agent's sandbox. After the agent's tree has ended, it
closes the host and copies the telemetry into the trial's logs, which the trial stores in the
ledger with everything else: `trial show` lists the tool calls.
"""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path
from typing import Any

from optarena.agents import AgentOutcome, RunContext
from optarena.errors import OptarenaError
from optarena.mcp._host import ToolsHost
from optarena.mcp._tools import TOOL_NAMES
from optarena.runs import TrialHook, keep_log

SERVER_NAME = "optarena"
TELEMETRY_LOG = "tool_calls.jsonl"
CODEX_STARTUP_TIMEOUT_S = 60.0
CODEX_TOOL_MARGIN_S = 120.0


class TaskToolsHook(TrialHook):
    def __init__(self, task_ref: str, max_budget_s: float = 30.0) -> None:
        self.task_ref = task_ref
        self.max_budget_s = max_budget_s
        self.host: ToolsHost | None = None

    def start(self) -> TaskToolsHook:
        # The workspace and telemetry file are the trial's; they are set in before_agent,
        # before the agent (the only client) can connect.
        self.host = ToolsHost(
            self.task_ref, Path("."), Path(TELEMETRY_LOG), self.max_budget_s, tcp=True
        )
        self.host.start()
        return self

    def agent_args(self, agent: str) -> dict[str, str]:
        """What the runner needs to offer the tools: Claude Code's `--mcp-config` (with
        `--strict-mcp-config`, which the runner always passes) and the tools allowed by name;
        Codex's `mcp_servers` table."""
        if self.host is None:
            raise RuntimeError("start the hook first")
        argv = self.host.argv()
        server: dict[str, Any] = {"command": argv[0], "args": argv[1:]}
        if agent == "claude":
            allowed = [f"mcp__{SERVER_NAME}__{t}" for t in TOOL_NAMES]
            return {
                "mcp_config": json.dumps({"mcpServers": {SERVER_NAME: server}}),
                "allowed_tools": ",".join(allowed),
            }
        if agent == "codex":
            return {"mcp_servers": json.dumps({SERVER_NAME: self._codex_server(server)})}
        raise OptarenaError(f"--task-tools is for the claude and codex agents, not '{agent}'")

    def _codex_server(self, server: dict[str, Any]) -> dict[str, Any]:
        """Codex's `mcp_servers.optarena` table. `required`: `codex exec` otherwise starts the
        first turn without waiting for MCP servers, and a server still starting (optarena's
        takes a second or two) is missing from that turn's tool search; required, Codex waits
        for it (up to `startup_timeout_sec`) and fails the run if it cannot start, instead of
        running an agent without the tools it was promised. `tool_timeout_sec` leaves a
        `measure` call its whole budget plus the correctness run before it. Each task tool is
        approved by name (as Claude Code's allowed tools are): `codex exec` runs with approval
        policy `never`, under which a tool that needs approval is refused, never asked about."""
        approved = {t: {"approval_mode": "approve"} for t in TOOL_NAMES}
        return server | {
            "tools": approved,
            "required": True,
            "startup_timeout_sec": CODEX_STARTUP_TIMEOUT_S,
            "tool_timeout_sec": self.max_budget_s + CODEX_TOOL_MARGIN_S,
        }

    def before_agent(self, context: RunContext) -> RunContext | None:
        assert self.host is not None and self.host.port is not None
        self.host.workspace = context.paths.workspace
        self.host.telemetry = context.paths.work / TELEMETRY_LOG
        # Claude Code's -p mode connects MCP servers in the background and, in the pinned
        # 2.1.x releases, never offers a server that was still pending at start-up: make it
        # wait for the tools (optarena's server takes a second or two to start).
        env = {
            **context.env,
            "MCP_CONNECTION_NONBLOCKING": "false",
            "MCP_CONNECT_TIMEOUT_MS": "30000",
        }
        return dataclasses.replace(
            context, env=env, proxy_ports=(*context.proxy_ports, self.host.port)
        )

    def after_agent(self, context: RunContext, outcome: AgentOutcome) -> AgentOutcome:
        self.close()  # the server's telemetry, written outside the agent's reach, is complete
        keep_log(context.paths.work / TELEMETRY_LOG, context.paths.logs / TELEMETRY_LOG)
        return outcome

    def close(self) -> None:
        if self.host is not None:
            self.host.close()
            self.host = None
