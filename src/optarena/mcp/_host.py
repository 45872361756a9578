"""The task tools for a contained agent: the server runs outside the agent's sandbox, the agent
gets a relay.

The agent's CLI starts `optarena mcp relay --socket PATH` as its MCP server (a process inside
its containment, with its uid). The relay only copies bytes between its stdio and a Unix socket.
Behind the socket, `ToolsHost` (in optarena's own process) starts one `optarena mcp serve` per
connection, as optarena's user, with the connection as its stdin and stdout: the judge, the
task package and the telemetry file stay where the agent cannot write, and the agent can forge
neither a tool result's verdict in the log nor the log itself.
"""

from __future__ import annotations

import contextlib
import os
import socket
import subprocess
import sys
import tempfile
import threading
from pathlib import Path
from types import TracebackType

MAX_SERVERS = 2  # live server processes per host (a CLI keeps one; a reconnect overlaps it)


class ToolsHost:
    """Listens on a Unix socket in a fresh directory; one server process per connection, at
    most `MAX_SERVERS` at a time: the servers run as optarena's user, outside the agent's
    process limit, so an agent opening connections in a loop must not start them without end
    (a connection beyond the limit is closed at once)."""

    def __init__(
        self,
        task_ref: str,
        workspace: Path,
        telemetry: Path,
        max_budget_s: float = 60.0,
        socket_dir: Path | None = None,
        tcp: bool = False,
    ) -> None:
        self.task_ref = task_ref
        self.workspace = workspace
        self.telemetry = telemetry
        self.max_budget_s = max_budget_s
        self._dir = Path(tempfile.mkdtemp(prefix="optarena-tools-", dir=socket_dir))
        self.socket_path = self._dir / "tools.sock"
        self.tcp = tcp  # listen on 127.0.0.1 instead (reached through the agent sandbox's
        # loopback relay, like the metering proxy: RunContext.proxy_ports)
        self.port: int | None = None
        self._sock: socket.socket | None = None
        self._thread: threading.Thread | None = None
        self._children: list[subprocess.Popen[bytes]] = []
        self._lock = threading.Lock()
        self._closed = threading.Event()
        self.refused = 0  # connections closed at once: MAX_SERVERS were running

    def argv(self) -> list[str]:
        """The relay command an agent's MCP configuration names."""
        where = ["--port", str(self.port)] if self.tcp else ["--socket", str(self.socket_path)]
        return [sys.executable, "-m", "optarena", "mcp", "relay", *where]

    def start(self) -> ToolsHost:
        if self.tcp:
            sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
            sock.bind(("127.0.0.1", 0))
            self.port = int(sock.getsockname()[1])
        else:
            os.chmod(self._dir, 0o755)  # the agent's uid must reach the socket
            sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
            sock.bind(str(self.socket_path))
            os.chmod(self.socket_path, 0o666)
        sock.listen(8)
        self._sock = sock
        self._thread = threading.Thread(target=self._accept, daemon=True, name="tools-host")
        self._thread.start()
        return self

    def _accept(self) -> None:
        assert self._sock is not None
        while not self._closed.is_set():
            try:
                conn, _ = self._sock.accept()
            except OSError:
                return
            with self._lock:
                live = sum(c.poll() is None for c in self._children)
            if live >= MAX_SERVERS:
                self.refused += 1
                conn.close()  # each server runs outside the agent's containment: bounded
                continue
            cmd = [
                sys.executable, "-m", "optarena", "mcp", "serve",
                "--task", self.task_ref,
                "--workspace", str(self.workspace),
                "--telemetry", str(self.telemetry),
                "--max-budget-s", str(self.max_budget_s),
            ]  # fmt: skip
            try:
                child = subprocess.Popen(
                    cmd, stdin=conn.fileno(), stdout=conn.fileno(), stderr=subprocess.DEVNULL
                )
            finally:
                conn.close()  # the child holds its own copies
            with self._lock:
                self._children.append(child)

    @property
    def served(self) -> int:
        """Connections served so far (one server process each)."""
        with self._lock:
            return len(self._children)

    def close(self) -> None:
        self._closed.set()
        if self._sock is not None:
            with contextlib.suppress(OSError):
                self._sock.shutdown(socket.SHUT_RDWR)
            self._sock.close()
        with self._lock:
            children = list(self._children)
        for child in children:
            with contextlib.suppress(subprocess.TimeoutExpired):
                child.wait(timeout=5)  # ends when the relay closes its side
            if child.poll() is None:  # a call still running: the server records it cut off
                child.terminate()
                with contextlib.suppress(subprocess.TimeoutExpired):
                    child.wait(timeout=5)
            if child.poll() is None:
                child.kill()
                child.wait()
        with contextlib.suppress(OSError):
            self.socket_path.unlink()
        with contextlib.suppress(OSError):
            self._dir.rmdir()

    def __enter__(self) -> ToolsHost:
        return self.start()

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()


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
