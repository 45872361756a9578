"""The host behind `optarena mcp relay`: how an agent in its sandbox reaches an MCP server that
runs outside it, and how every call it makes there is recorded where it cannot write.

The agent's CLI starts `optarena mcp relay --port P` (or `--socket PATH`) as its MCP server: a
process inside the agent's containment that only copies bytes between its stdio and the host.
The host (in optarena's own process) listens on 127.0.0.1 (reached through the agent sandbox's
loopback relay, like the metering proxy: `RunContext.proxy_ports`) or on a Unix socket in a
fresh directory, and starts one server per connection (`launch`, which a subclass provides), at
most `max_servers` at a time: the servers run outside the agent's process limit, so an agent
opening connections in a loop must not start them without end (a connection beyond the limit
is closed at once).

A connection is served one of two ways:

- handed over (`record=False`): the connection is the server's stdin and stdout, and the server
  keeps its own record (optarena's task tools, `optarena mcp serve`);
- relayed (`record=True`): the host sits between, reads each newline-delimited JSON-RPC
  message, notes every `tools/call` request, and when the reply comes writes one
  `ToolCallRecord` line to `telemetry` (a built server, which cannot be trusted to log its own
  calls). A line it cannot read as JSON-RPC is not passed on: the server never runs a call the
  log did not note.
"""

from __future__ import annotations

import contextlib
import itertools
import json
import os
import secrets
import shutil
import socket
import subprocess
import sys
import tempfile
import threading
import time
from datetime import UTC, datetime
from pathlib import Path
from types import TracebackType
from typing import IO, Any, Self

from optarena.records import (
    NO_REPLY,
    RESULT_EXCERPT,
    ToolCallRecord,
    ToolCallStatus,
    arguments_sha256,
)

MAX_SERVERS = 2  # live servers per host (a CLI keeps one connection; a reconnect overlaps it)


class _Call:
    """A tools/call the relay passed on and whose reply it waits for."""

    def __init__(self, call_id: str, tool: str, arguments: Any) -> None:
        self.call_id = call_id
        self.tool = tool
        self.arguments = arguments
        self.started_at = datetime.now(UTC).isoformat(timespec="milliseconds")
        self.t0 = time.monotonic()


_Pending = dict[Any, _Call]  # JSON-RPC request id -> the call


class RelayHost:
    """One server's host; see the module docstring. A subclass says how a connection's server
    starts (`launch`)."""

    def __init__(
        self,
        name: str,
        *,
        record: bool,
        telemetry: Path | None = None,
        tcp: bool = True,
        socket_dir: Path | None = None,
        max_servers: int = MAX_SERVERS,
    ) -> None:
        self.name = name  # the server's name, as the agent's CLI and the records know it
        self.record = record
        self.telemetry = telemetry  # the calls' log, outside the agent's reach
        self.tcp = tcp
        self.max_servers = max_servers
        self._dir = Path(tempfile.mkdtemp(prefix=f"optarena-{name}-", dir=socket_dir))
        self.socket_path = self._dir / f"{name}.sock"
        self.port: int | None = None
        self.refused = 0  # connections closed at once: `max_servers` were running
        self._sock: socket.socket | None = None
        self._lock = threading.Lock()
        self._children: list[subprocess.Popen[bytes]] = []
        self._threads: list[threading.Thread] = []
        self._closed = threading.Event()
        self._session = secrets.token_hex(4)  # call ids unique among hosts sharing a log
        self._ids = itertools.count(1)

    # ---- what a subclass provides ---------------------------------------------------------

    def launch(self, n: int, workdir: Path) -> tuple[list[str], Path | None]:
        """The command (and working directory) of the server for connection `n` (from 1);
        `workdir` is a fresh directory of this host's, kept until it closes."""
        raise NotImplementedError

    # ---- the host ---------------------------------------------------------------------------

    def argv(self) -> list[str]:
        """The relay command an agent's MCP configuration names."""
        where = ["--port", str(self.port)] if self.tcp else ["--socket", str(self.socket_path)]
        return [sys.executable, "-m", "optarena", "mcp", "relay", *where]

    def start(self) -> Self:
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
        t = threading.Thread(target=self._accept, daemon=True, name=f"relay-host-{self.name}")
        t.start()
        return self

    @property
    def served(self) -> int:
        """Connections served so far (one server process each)."""
        with self._lock:
            return len(self._children)

    def _accept(self) -> None:
        assert self._sock is not None
        n = 0
        while not self._closed.is_set():
            try:
                conn, _ = self._sock.accept()
            except OSError:
                return
            with self._lock:
                live = sum(c.poll() is None for c in self._children)
            if live >= self.max_servers:
                self.refused += 1
                conn.close()  # each server runs outside the agent's containment: bounded
                continue
            n += 1
            workdir = self._dir / f"conn{n}"
            workdir.mkdir()
            argv, cwd = self.launch(n, workdir)
            if self.record:
                self._relay(conn, argv, cwd)
                continue
            try:
                child = subprocess.Popen(
                    argv, cwd=cwd, stdin=conn.fileno(), stdout=conn.fileno(),
                    stderr=subprocess.DEVNULL,
                )  # fmt: skip
            finally:
                conn.close()  # the child holds its own copies
            with self._lock:
                self._children.append(child)

    def _relay(self, conn: socket.socket, argv: list[str], cwd: Path | None) -> None:
        child = subprocess.Popen(
            argv, cwd=cwd, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL,
        )  # fmt: skip
        with self._lock:
            self._children.append(child)
        pending: _Pending = {}
        for target in (self._up, self._down):
            t = threading.Thread(target=target, args=(conn, child, pending), daemon=True)
            t.start()
            self._threads.append(t)

    def _up(self, conn: socket.socket, child: subprocess.Popen[bytes], pending: _Pending) -> None:
        """Agent -> server: note every tools/call request (batches too) and pass the line on.
        A line the relay cannot read as JSON-RPC is not passed on: the server must never run
        a call that the log did not note."""
        assert child.stdin is not None
        reader = conn.makefile("rb")
        try:
            for line in reader:
                msgs = _messages(line)
                calls = [m for m in msgs or [] if m.get("method") == "tools/call"]
                if msgs is None or any(not isinstance(m.get("id"), str | int) for m in calls):
                    continue
                for msg in calls:
                    params = msg.get("params")
                    params = params if isinstance(params, dict) else {}
                    call_id = f"{self._session}-{next(self._ids)}"
                    call = _Call(call_id, str(params.get("name")), params.get("arguments"))
                    with self._lock:
                        pending[msg["id"]] = call
                child.stdin.write(line)
                child.stdin.flush()
        except (OSError, ValueError):
            pass
        finally:
            with contextlib.suppress(OSError):
                child.stdin.close()

    def _down(self, conn: socket.socket, child: subprocess.Popen[bytes], pending: _Pending) -> None:
        """Server -> agent: record the reply of each noted call, pass every byte on."""
        out: IO[bytes] | None = child.stdout
        assert out is not None
        try:
            for line in out:
                for msg in _messages(line) or []:
                    if "result" not in msg and "error" not in msg:
                        continue
                    with self._lock:
                        call = pending.pop(msg.get("id"), None)
                    if call is not None:
                        self._write(call, msg)
                conn.sendall(line)
        except OSError:
            pass
        finally:
            with contextlib.suppress(OSError):
                conn.shutdown(socket.SHUT_RDWR)
            conn.close()
            with self._lock:
                left = list(pending.values())
                pending.clear()
            for call in left:
                self._write(call, None)

    def _write(self, call: _Call, reply: dict[str, Any] | None) -> None:
        """One line for a call: its reply, or `cut_off` when none came."""
        status: ToolCallStatus = "cut_off"
        text = ""
        if reply is not None:
            result = reply.get("result")
            failed = "error" in reply or (isinstance(result, dict) and result.get("isError"))
            status = "error" if failed else "ok"
            text = json.dumps(reply.get("error") if "error" in reply else result)
        rec = ToolCallRecord(
            call_id=call.call_id,
            server=self.name,
            tool=call.tool,
            arguments_sha256=arguments_sha256(call.arguments),
            arguments=call.arguments,
            started_at=call.started_at,
            duration_s=round(time.monotonic() - call.t0, 4) if reply is not None else None,
            status=status,
            result_bytes=len(text.encode()),
            result=text[:RESULT_EXCERPT],
            error=None if reply is not None else NO_REPLY,
        )
        if self.telemetry is None:
            return
        with self._lock, self.telemetry.open("a", encoding="utf-8") as f:
            f.write(rec.model_dump_json() + "\n")

    def close(self) -> None:
        """Stop listening; end every server (a stdio server at the end of its input, one
        still running a call by SIGTERM, then SIGKILL); remove the host's directory."""
        self._closed.set()
        if self._sock is not None:
            with contextlib.suppress(OSError):
                self._sock.shutdown(socket.SHUT_RDWR)
            self._sock.close()
            self._sock = None
        with self._lock:
            children = list(self._children)
        for child in children:
            with contextlib.suppress(OSError):
                if child.stdin is not None:
                    child.stdin.close()
            with contextlib.suppress(subprocess.TimeoutExpired):
                child.wait(timeout=5)  # ends when the relay closes its side
            if child.poll() is None:  # a call still running: the server records it cut off
                child.terminate()
                with contextlib.suppress(subprocess.TimeoutExpired):
                    child.wait(timeout=5)
            if child.poll() is None:
                child.kill()
                child.wait()
        for t in self._threads:
            t.join(timeout=5)
        shutil.rmtree(self._dir, ignore_errors=True)

    def __enter__(self) -> Self:
        return self.start()

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()


def _messages(line: bytes) -> list[dict[str, Any]] | None:
    """The JSON-RPC message(s) of one line (an object, or a batch of them); None when the line
    is not that (nested too deep to parse included)."""
    try:
        msg = json.loads(line)
    except (ValueError, RecursionError):
        return None
    batch = msg if isinstance(msg, list) else [msg]
    return batch if batch and all(isinstance(m, dict) for m in batch) else None
