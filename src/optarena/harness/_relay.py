"""A built MCP server, activated for an agent: run contained, reached through optarena's relay,
every `tools/call` recorded outside the agent's reach.

The agent's CLI starts `optarena mcp relay --port P` (inside the agent's sandbox; it only copies
bytes to 127.0.0.1:P). Behind that port, `ServerHost` (in optarena's process) starts the
qualified version of the server (a fresh copy of its snapshot, never the workspace's copy the
agent could have changed) inside the agent sandbox, and sits between the two: it reads each
newline-delimited JSON-RPC message, remembers every `tools/call` request, and when the reply
comes writes one `RelayedCall` line to the telemetry file, in the trial's work directory. The
agent can neither skip the record nor write it.
"""

from __future__ import annotations

import contextlib
import json
import shutil
import socket
import subprocess
import sys
import tempfile
import threading
import time
from datetime import UTC, datetime
from pathlib import Path
from typing import IO, Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from optarena.agents import SandboxSpec
from optarena.harness._wrap import wrap

TELEMETRY_SCHEMA_VERSION = 1
_Pending = dict[Any, tuple[str, Any, float, str]]  # request id -> (tool, arguments, t0, at)


class RelayedCall(BaseModel):
    """One tools/call through a relay (a line of the telemetry log)."""

    model_config = ConfigDict(extra="forbid")

    schema_version: int = TELEMETRY_SCHEMA_VERSION
    server: str
    tool: str
    arguments: Any = Field(default=None, description="as the agent sent them")
    started_at: str = Field(description="UTC, ISO 8601")
    duration_s: float | None = Field(description="until the server's reply; None: no reply")
    status: Literal["ok", "error", "no_reply"]
    result_bytes: int = 0
    result: str = Field(default="", description="the reply's text, first 2000 characters")


MAX_CONNECTIONS = 2  # live servers per activated server (a CLI keeps one connection)


class ServerHost:
    """One activated server: listens on a loopback port, one contained server per connection,
    at most `MAX_CONNECTIONS` at a time (beyond, a connection is closed at once)."""

    def __init__(
        self, name: str, snapshot: Path, command: list[str], spec: SandboxSpec | None = None
    ) -> None:
        self.name = name
        self.snapshot = snapshot
        self.command = command
        self.spec = spec  # how the agent is contained: its servers are, the same way
        self.workspace: Path | None = None  # the agent's, readable for the server
        self.telemetry: Path | None = None
        self.port: int | None = None
        self._sock: socket.socket | None = None
        self._lock = threading.Lock()
        self._children: list[subprocess.Popen[bytes]] = []
        self._threads: list[threading.Thread] = []
        self._tmp = Path(tempfile.mkdtemp(prefix=f"optarena-mcp-{name}-"))
        self._closed = threading.Event()

    def argv(self) -> list[str]:
        return [sys.executable, "-m", "optarena", "mcp", "relay", "--port", str(self.port)]

    def start(self) -> ServerHost:
        sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        sock.bind(("127.0.0.1", 0))
        sock.listen(8)
        self.port = int(sock.getsockname()[1])
        self._sock = sock
        t = threading.Thread(target=self._accept, daemon=True, name=f"mcp-host-{self.name}")
        t.start()
        return self

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
            if live >= MAX_CONNECTIONS:
                conn.close()  # a copy and a server per connection: bounded
                continue
            n += 1
            copy = self._tmp / f"conn{n}" / self.name
            shutil.copytree(self.snapshot, copy, symlinks=True)
            # only its own copy is writable (the sandbox gives it to the server's uid; the
            # workspace stays the agent's, readable)
            shown = [self.workspace] if self.workspace is not None else []
            argv = wrap(self.command, [copy], shown, self.spec)
            child = subprocess.Popen(
                argv, cwd=copy, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
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
                    started = datetime.now(UTC).isoformat(timespec="milliseconds")
                    with self._lock:
                        pending[msg["id"]] = (
                            str(params.get("name")), params.get("arguments"),
                            time.monotonic(), started,
                        )  # fmt: skip
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
                        self._record(call, msg)
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
                self._record(call, None)

    def _record(self, call: tuple[str, Any, float, str], reply: dict[str, Any] | None) -> None:
        tool, arguments, t0, started = call
        status: Literal["ok", "error", "no_reply"] = "no_reply"
        text = ""
        if reply is not None:
            result = reply.get("result")
            failed = "error" in reply or (isinstance(result, dict) and result.get("isError"))
            status = "error" if failed else "ok"
            text = json.dumps(reply.get("error") if "error" in reply else result)
        rec = RelayedCall(
            server=self.name,
            tool=tool,
            arguments=arguments,
            started_at=started,
            duration_s=round(time.monotonic() - t0, 4) if reply is not None else None,
            status=status,
            result_bytes=len(text.encode()),
            result=text[:2000],
        )
        if self.telemetry is None:
            return
        with self._lock, self.telemetry.open("a", encoding="utf-8") as f:
            f.write(rec.model_dump_json() + "\n")

    def close(self) -> None:
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
                child.wait(timeout=5)  # a stdio server ends at EOF
            if child.poll() is None:
                child.terminate()
                with contextlib.suppress(subprocess.TimeoutExpired):
                    child.wait(timeout=5)
            if child.poll() is None:
                child.kill()
                child.wait()
        for t in self._threads:
            t.join(timeout=5)
        shutil.rmtree(self._tmp, ignore_errors=True)


def _messages(line: bytes) -> list[dict[str, Any]] | None:
    """The JSON-RPC message(s) of one line (an object, or a batch of them); None when the line
    is not that (nested too deep to parse included)."""
    try:
        msg = json.loads(line)
    except (ValueError, RecursionError):
        return None
    batch = msg if isinstance(msg, list) else [msg]
    return batch if batch and all(isinstance(m, dict) for m in batch) else None


def read_telemetry(text: str) -> list[RelayedCall]:
    return [RelayedCall.model_validate_json(x) for x in text.splitlines() if x.strip()]
