"""The attempt trial's hook: the task state carried over and the built MCP servers activated.

Skills reach the fresh session as files (the trial copies the iteration's activation directory
into the workspace before the baseline commit). MCP servers need processes: one `ServerHost` per
qualified server, offered to the CLI through its own flags (Claude Code: `--mcp-config` with the
tools allowed by name, `--strict-mcp-config` always; Codex: `mcp_servers`). After the agent's
tree has ended the hosts are closed and their telemetry copied into the trial's logs, which the
trial stores in the ledger with everything else.

With task state `continue` the previous iteration's delivered files are written into the
workspace after the baseline commit, before the agent starts: one lineage, judged as a whole
against the task's baseline.
"""

from __future__ import annotations

import dataclasses
import json
import shutil
from pathlib import Path
from typing import Any

from optarena.agents import AgentOutcome, RunContext, SandboxSpec
from optarena.agents.codex import codex_mcp_server
from optarena.errors import OptarenaError
from optarena.harness._relay import ServerHost
from optarena.trials import TrialHook, keep_log

TELEMETRY_LOG = "harness_tool_calls.jsonl"
CODEX_TOOL_TIMEOUT_S = 120.0  # a built tool's call; the attempt's own timeout still applies


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

    def start(self) -> HarnessHook:
        for s in self.servers:
            self.hosts.append(ServerHost(s.name, s.snapshot, s.command, self.spec).start())
        return self

    def agent_args(self, agent: str, given: dict[str, str]) -> dict[str, str]:
        """`given` (the user's --agent-arg) with the servers added in the CLI's own terms."""
        if not self.hosts:
            return dict(given)
        if agent == "codex":
            tables = {
                h.name: codex_mcp_server(h.argv(), s.tools, CODEX_TOOL_TIMEOUT_S)
                for h, s in zip(self.hosts, self.servers, strict=True)
            }
            mine = json.loads(given["mcp_servers"]) if given.get("mcp_servers") else {}
            return {**given, "mcp_servers": json.dumps({**mine, **tables})}
        servers: dict[str, dict[str, Any]] = {}
        for h in self.hosts:
            argv = h.argv()
            servers[h.name] = {"command": argv[0], "args": argv[1:]}
        tools = [f"mcp__{s.name}__{t}" for s in self.servers for t in s.tools]
        if agent == "claude":
            allowed = ",".join([*filter(None, [given.get("allowed_tools")]), *tools])
            return {
                **given,
                "mcp_config": json.dumps({"mcpServers": servers}),
                "allowed_tools": allowed,
            }
        raise OptarenaError(f"MCP servers can be activated for claude and codex, not '{agent}'")

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
