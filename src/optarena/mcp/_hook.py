"""`optarena run --task-tools`: the agent gets optarena's task tools, contained.

The trial enters the hook before its runner is made: the hook opens the tools host on a
loopback port and offers it as one MCP server (`mcp_servers`: the relay command, the tools by
name), which the runner turns into its CLI's own options (`AgentRunner.mcp_args`). Before the
agent runs, the hook points the host at the trial's workspace, sends telemetry to the trial's
work directory (out of the agent's reach) and opens the port into the agent's sandbox. After
the agent's tree has ended, it closes the host and copies the telemetry into the trial's logs,
which the trial stores in the ledger with everything else: `trial show` lists the tool calls.
"""

from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import Self

from optarena.agents import McpServer, RunContext
from optarena.judge import MIN_PAIRS_GRACE
from optarena.mcp._host import ToolsHost
from optarena.mcp._tools import TOOL_NAMES
from optarena.records import AgentOutcome
from optarena.trials import TrialHook, keep_log

SERVER_NAME = "optarena"
TELEMETRY_LOG = "tool_calls.jsonl"
# a call's timeout beyond the measure budget: a `measure` call runs correctness first
TOOL_MARGIN_S = 120.0


class TaskToolsHook(TrialHook):
    def __init__(self, task_ref: str, max_budget_s: float = 30.0) -> None:
        self.task_ref = task_ref
        self.max_budget_s = max_budget_s
        self.host: ToolsHost | None = None

    def __enter__(self) -> Self:
        # The workspace and telemetry file are the trial's; they are set in before_agent,
        # before the agent (the only client) can connect.
        self.host = ToolsHost(
            self.task_ref, Path("."), Path(TELEMETRY_LOG), self.max_budget_s, tcp=True
        )
        self.host.start()
        return self

    def mcp_servers(self) -> list[McpServer]:
        """The task tools as one server (`optarena`), each tool allowed by name; a call may
        take the measure budget (stretched by half to reach the minimum pairs) and the
        correctness run before it."""
        if self.host is None:
            raise RuntimeError("enter the hook first")
        timeout = self.max_budget_s * MIN_PAIRS_GRACE + TOOL_MARGIN_S
        return [McpServer(SERVER_NAME, tuple(self.host.argv()), TOOL_NAMES, timeout)]

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
