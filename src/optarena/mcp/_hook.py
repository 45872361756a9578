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

from optarena.agents import AgentOutcome, RunContext
from optarena.agents.codex import codex_mcp_server
from optarena.errors import OptarenaError
from optarena.mcp._host import ToolsHost
from optarena.mcp._tools import TOOL_NAMES
from optarena.trials import TrialHook, keep_log

SERVER_NAME = "optarena"
TELEMETRY_LOG = "tool_calls.jsonl"
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
        if agent == "claude":
            allowed = [f"mcp__{SERVER_NAME}__{t}" for t in TOOL_NAMES]
            server = {"command": argv[0], "args": argv[1:]}
            return {
                "mcp_config": json.dumps({"mcpServers": {SERVER_NAME: server}}),
                "allowed_tools": ",".join(allowed),
            }
        if agent == "codex":
            # `tool_timeout_sec` leaves a `measure` call its whole budget plus the correctness
            # run before it.
            timeout = self.max_budget_s + CODEX_TOOL_MARGIN_S
            table = codex_mcp_server(argv, list(TOOL_NAMES), timeout)
            return {"mcp_servers": json.dumps({SERVER_NAME: table})}
        raise OptarenaError(f"--task-tools is for the claude and codex agents, not '{agent}'")

    def before_agent(self, context: RunContext) -> RunContext | None:
        assert self.host is not None and self.host.port is not None
        self.host.workspace = context.paths.workspace
        self.host.telemetry = context.paths.work / TELEMETRY_LOG
        ports = (*context.proxy_ports, self.host.port)
        return dataclasses.replace(context, proxy_ports=ports)

    def after_agent(self, context: RunContext, outcome: AgentOutcome) -> AgentOutcome:
        self.close()  # the server's telemetry, written outside the agent's reach, is complete
        keep_log(context.paths.work / TELEMETRY_LOG, context.paths.logs / TELEMETRY_LOG)
        return outcome

    def close(self) -> None:
        if self.host is not None:
            self.host.close()
            self.host = None
