"""The attempt trial's hook: the task state carried over and the built MCP servers activated.

Skills reach the fresh session as files (the trial copies the iteration's activation directory
into the workspace before the baseline commit). MCP servers need processes: the trial enters the
hook, which starts one `ServerHost` per qualified server and offers them (`mcp_servers`), each
tool by name, for the runner to pass through its CLI's own options (`AgentRunner.mcp_args`).
After the agent's tree has ended the hosts are closed and their telemetry copied into the
trial's logs, which the trial stores in the ledger with everything else.

With task state `continue` the previous iteration's delivered files are written into the
workspace after the baseline commit, before the agent starts: one lineage, judged as a whole
against the task's baseline.
"""

from __future__ import annotations

import dataclasses
import shutil
from pathlib import Path
from typing import Self

from optarena.agents import McpServer, RunContext, SandboxSpec
from optarena.harness._relay import ServerHost
from optarena.records import AgentOutcome
from optarena.trials import TrialHook, keep_log

TELEMETRY_LOG = "harness_tool_calls.jsonl"
TOOL_TIMEOUT_S = 120.0  # a built tool's call; the attempt's own timeout still applies


@dataclasses.dataclass(frozen=True)
class ActiveServer:
    name: str
    snapshot: Path
    command: list[str]
    tools: list[str]


class HarnessHook(TrialHook):
    def __init__(
        self,
        servers: list[ActiveServer],
        carry: Path | None = None,
        spec: SandboxSpec | None = None,
    ) -> None:
        self.servers = servers
        self.carry = carry  # the previous delivery's editable files (task state continue)
        self.spec = spec  # how the servers are contained (`trials.agent_sandbox_spec`)
        self.hosts: list[ServerHost] = []

    def __enter__(self) -> Self:
        try:
            for s in self.servers:
                self.hosts.append(ServerHost(s.name, s.snapshot, s.command, self.spec).start())
        except BaseException:
            self.close()
            raise
        return self

    def mcp_servers(self) -> list[McpServer]:
        """The started servers, each reached through the relay to its host."""
        return [
            McpServer(h.name, tuple(h.argv()), tuple(s.tools), TOOL_TIMEOUT_S)
            for h, s in zip(self.hosts, self.servers, strict=True)
        ]

    def before_agent(self, context: RunContext) -> RunContext | None:
        if self.carry is not None:
            for src in sorted(p for p in self.carry.rglob("*") if p.is_file()):
                dest = context.workspace / src.relative_to(self.carry)
                dest.parent.mkdir(parents=True, exist_ok=True)
                shutil.copyfile(src, dest)
        if not self.hosts:
            return None
        for h in self.hosts:
            h.telemetry = context.paths.work / TELEMETRY_LOG
            h.workspace = context.workspace
        ports = [h.port for h in self.hosts if h.port is not None]
        return dataclasses.replace(context, proxy_ports=(*context.proxy_ports, *ports))

    def after_agent(self, context: RunContext, outcome: AgentOutcome) -> AgentOutcome:
        if not self.hosts:
            return outcome
        self.close()
        keep_log(context.paths.work / TELEMETRY_LOG, context.paths.logs / TELEMETRY_LOG)
        return outcome

    def close(self) -> None:
        for h in self.hosts:
            h.close()
        self.hosts = []
