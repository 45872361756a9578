"""A built MCP server, activated for an agent: run contained, reached through optarena's relay,
every `tools/call` recorded outside the agent's reach.

The agent's CLI starts `optarena mcp relay --port P` (inside the agent's sandbox; it only copies
bytes to 127.0.0.1:P). Behind that port, `ServerHost` (a recording `agents.RelayHost`, in
optarena's process) starts the qualified version of the server (a fresh copy of its snapshot,
never the workspace's copy the agent could have changed) inside the agent sandbox, and sits
between the two: each `tools/call` becomes one `records.ToolCallRecord` line in the telemetry
file, in the trial's work directory. The agent can neither skip the record nor write it.
"""

from __future__ import annotations

import shutil
from pathlib import Path

from optarena.agents import RelayHost, SandboxSpec
from optarena.harness._wrap import wrap
from optarena.records import ToolCallRecord, load_tool_call

MAX_CONNECTIONS = 2  # live servers per activated server (a CLI keeps one connection)


class ServerHost(RelayHost):
    """One activated server: listens on a loopback port, one contained server per connection,
    at most `MAX_CONNECTIONS` at a time (beyond, a connection is closed at once)."""

    def __init__(
        self, name: str, snapshot: Path, command: list[str], spec: SandboxSpec | None = None
    ) -> None:
        super().__init__(name, record=True, tcp=True, max_servers=MAX_CONNECTIONS)
        self.snapshot = snapshot
        self.command = command
        self.spec = spec  # how the agent is contained: its servers are, the same way
        self.workspace: Path | None = None  # the agent's, readable for the server

    def launch(self, n: int, workdir: Path) -> tuple[list[str], Path | None]:
        copy = workdir / self.name
        shutil.copytree(self.snapshot, copy, symlinks=True)
        # only its own copy is writable (the sandbox gives it to the server's uid; the
        # workspace stays the agent's, readable)
        shown = [self.workspace] if self.workspace is not None else []
        return wrap(self.command, [copy], shown, self.spec), copy


def read_telemetry(text: str, where: str = "relay telemetry") -> list[ToolCallRecord]:
    """The calls of a relay's telemetry log (older `RelayedCall` lines included)."""
    return [
        load_tool_call(line, f"{where}:{n}")
        for n, line in enumerate(text.splitlines(), 1)
        if line.strip()
    ]
