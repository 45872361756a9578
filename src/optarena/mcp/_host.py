"""The task tools for a contained agent: the server runs outside the agent's sandbox, the agent
gets a relay.

The agent's CLI starts `optarena mcp relay --socket PATH` as its MCP server (a process inside
its containment, with its uid). The relay (`relay`, here) only copies bytes between its stdio
and a Unix socket (or a loopback port). Behind it, `ToolsHost` (a `RelayHost`, in optarena's own
process) starts one `optarena mcp serve` per connection, as optarena's user, with the
connection as its stdin and stdout: the judge, the task package and the telemetry file stay
where the agent cannot write, and the agent can forge neither a tool result's verdict in the
log nor the log itself.
"""

from __future__ import annotations

import contextlib
import os
import socket
import sys
import threading
from pathlib import Path

from optarena.agents import RelayHost

MAX_SERVERS = 2  # live server processes per host (a CLI keeps one; a reconnect overlaps it)


class ToolsHost(RelayHost):
    """The task tools' `RelayHost`: a Unix socket in a fresh directory (or, `tcp`, a loopback
    port), each connection handed to its own `optarena mcp serve` as optarena's user, which
    writes the telemetry itself; at most `MAX_SERVERS` at a time."""

    def __init__(
        self,
        task_ref: str,
        workspace: Path,
        telemetry: Path,
        max_budget_s: float = 60.0,
        socket_dir: Path | None = None,
        tcp: bool = False,
    ) -> None:
        super().__init__(
            "tools",
            record=False,
            telemetry=telemetry,
            tcp=tcp,
            socket_dir=socket_dir,
            max_servers=MAX_SERVERS,
        )
        self.task_ref = task_ref
        self.workspace = workspace
        self.max_budget_s = max_budget_s

    def launch(self, n: int, workdir: Path) -> tuple[list[str], Path | None]:
        cmd = [
            sys.executable, "-m", "optarena", "mcp", "serve",
            "--task", self.task_ref,
            "--workspace", str(self.workspace),
            "--telemetry", str(self.telemetry),
            "--max-budget-s", str(self.max_budget_s),
        ]  # fmt: skip
        return cmd, None


def relay(socket_path: Path | None = None, port: int | None = None) -> int:
    """Copy stdin to the host's socket (a Unix socket, or 127.0.0.1:port) and the socket to
    stdout until either side ends."""
    if port is not None:
        sock = socket.create_connection(("127.0.0.1", port))
    else:
        assert socket_path is not None
        sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        sock.connect(str(socket_path))
    stdin, stdout = sys.stdin.buffer.fileno(), sys.stdout.buffer.fileno()

    def up() -> None:
        while data := os.read(stdin, 65536):
            sock.sendall(data)
        with contextlib.suppress(OSError):
            sock.shutdown(socket.SHUT_WR)

    t = threading.Thread(target=up, daemon=True)
    t.start()
    while data := sock.recv(65536):
        view = memoryview(data)
        while view:
            view = view[os.write(stdout, view) :]
    return 0
