"""The relay between the agent's network namespace and the metering proxy (`Relay`, run by
`UnixBridge` in optarena's own process and inside the sandbox): bytes pass both ways intact,
ends pass on, and whatever an agent opens, optarena's process gets one thread and at most
MAX_PAIRS relayed connections for it (600 connections to the bridge socket were 1,804
threads, outside the agent's process limit)."""

from __future__ import annotations

import contextlib
import os
import socket
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from optarena.sandbox import AgentSandbox, AgentSandboxPolicy, probe

# private: the agent sandbox's bridge and relay limit, attacked directly
from optarena.sandbox._agent_net import UnixBridge
from optarena.sandbox._agent_relay import MAX_PAIRS

CAPS = probe()


class Echo:
    """A TCP server on 127.0.0.1 (the proxy's stand-in) that echoes each connection, in
    upper case, until its end; or, `reading=False`, accepts and never reads."""

    def __init__(self, reading: bool = True) -> None:
        self.sock = socket.socket()
        self.sock.bind(("127.0.0.1", 0))
        self.sock.listen(1024)
        self.port = self.sock.getsockname()[1]
        self.accepted = 0
        self.reading = reading
        self.conns: list[socket.socket] = []
        threading.Thread(target=self._serve, daemon=True).start()

    def _serve(self) -> None:
        while True:
            try:
                conn, _ = self.sock.accept()
            except OSError:
                return
            self.accepted += 1
            self.conns.append(conn)
            if self.reading:
                threading.Thread(target=self._echo, args=(conn,), daemon=True).start()

    @staticmethod
    def _echo(conn: socket.socket) -> None:
        # `close` may close the connection under this thread (a target that is gone): then
        # recv or shutdown meet a closed descriptor, which is the end of the echo, not an error
        with conn, contextlib.suppress(OSError):
            while data := conn.recv(65536):
                conn.sendall(data.upper())
            conn.shutdown(socket.SHUT_WR)

    def close(self) -> None:
        with contextlib.suppress(OSError):
            self.sock.shutdown(socket.SHUT_RDWR)  # wakes the accept (a bare close does not)
        self.sock.close()
        for c in self.conns:
            c.close()


@pytest.fixture
def bridge(tmp_path: Path) -> Iterator[tuple[UnixBridge, Echo]]:
    echo = Echo()
    b = UnixBridge(tmp_path / "p.sock", echo.port)
    yield b, echo
    b.close()
    echo.close()


def unix(path: Path) -> socket.socket:
    s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    s.connect(str(path))  # blocking: waits while the bridge's backlog is full
    s.settimeout(30)
    return s


def test_bytes_pass_both_ways_intact_and_the_end_passes_on(
    bridge: tuple[UnixBridge, Echo],
) -> None:
    b, _ = bridge
    data = os.urandom(3 << 20).hex().encode()[: 5 << 20].lower()  # 5 MiB, more than a buffer
    with unix(b.path) as s:
        sender = threading.Thread(target=lambda: (s.sendall(data), s.shutdown(socket.SHUT_WR)))
        sender.start()
        got = bytearray()
        while chunk := s.recv(1 << 16):
            got += chunk
        sender.join()
    assert bytes(got) == data.upper()  # all of it, then the echo's end after ours


def test_an_agent_opening_hundreds_of_connections_gets_one_thread(
    bridge: tuple[UnixBridge, Echo],
) -> None:
    """The reported attack: 600 connections to the bridge socket. The bridge relays at most
    MAX_PAIRS at once in its one thread; the rest are closed at once and counted; once the
    agent lets go, new connections are relayed again."""
    b, echo = bridge
    before = threading.active_count()
    held = [unix(b.path) for _ in range(600)]
    try:
        for s in held[:MAX_PAIRS]:  # the first ones are relayed
            s.sendall(b"x")
            assert s.recv(1) == b"X"
        deadline = time.monotonic() + 30
        while b.refused < 600 - MAX_PAIRS:
            assert time.monotonic() < deadline
            time.sleep(0.05)
        assert echo.accepted == MAX_PAIRS
        relay_threads = threading.active_count() - before - MAX_PAIRS  # less the echo's own
        assert relay_threads <= 0
        for s in held[MAX_PAIRS : MAX_PAIRS + 5]:
            assert s.recv(1) == b""  # refused: closed at once
    finally:
        for s in held:
            s.close()
    deadline = time.monotonic() + 30
    while True:
        try:
            with unix(b.path) as s:
                s.sendall(b"again")
                s.shutdown(socket.SHUT_WR)
                if s.recv(5) == b"AGAIN":
                    break
        except (ConnectionResetError, BrokenPipeError):
            pass  # still refused (closed at once) while the old pairs wind down
        assert time.monotonic() < deadline  # the slots free as the pairs see their ends
        time.sleep(0.05)


def test_a_target_that_never_reads_holds_back_the_sender(tmp_path: Path) -> None:
    """The relay holds at most one read per direction: an agent writing into a stalled
    connection is held back by its own socket, nothing piles up in optarena's memory."""
    stalled = Echo(reading=False)
    b = UnixBridge(tmp_path / "s.sock", stalled.port)
    try:
        with unix(b.path) as s:
            s.setblocking(False)
            sent = 0
            quiet_since = time.monotonic()
            while time.monotonic() - quiet_since < 1.0 and sent < 256 << 20:
                try:
                    sent += s.send(b"y" * 65536)
                    quiet_since = time.monotonic()
                except BlockingIOError:
                    time.sleep(0.01)
            assert sent < 64 << 20  # socket buffers and one read; never the 256 MiB
    finally:
        b.close()
        stalled.close()


def test_closing_the_bridge_cuts_every_connection(bridge: tuple[UnixBridge, Echo]) -> None:
    b, _ = bridge
    held = [unix(b.path) for _ in range(5)]
    for s in held:
        s.sendall(b"x")
        assert s.recv(1) == b"X"
    b.close()
    for s in held:
        assert s.recv(1) == b""
        s.close()
    assert not b.path.exists()


def test_a_target_that_is_gone_closes_the_agents_connection(tmp_path: Path) -> None:
    with socket.socket() as gone:
        gone.bind(("127.0.0.1", 0))
        port = gone.getsockname()[1]  # nothing listens on it once closed
    b = UnixBridge(tmp_path / "g.sock", port)
    try:
        with unix(b.path) as s:
            assert s.recv(1) == b""
    finally:
        b.close()


FLOOD = """python3 - <<'EOF'
import glob, os, socket, time
# the bridge's socket path, from the in-namespace relay's command line (PORT=SOCKET)
relay = [open(p, "rb").read().split(b"\\0") for p in glob.glob("/proc/[0-9]*/cmdline")]
found = {{a.split(b"=", 1)[1].decode() for r in relay if any(b"_agent_relay" in x for x in r)
          for a in r if b".sock" in a}}
[path] = [p for p in found if os.path.exists(p)]  # other agents' relays show, not their sockets
held = []
for _ in range(600):
    s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    s.connect(path)
    held.append(s)
url = os.environ.get("OPTARENA_PROXY_URL")  # in a trial: the metering proxy's
for port in (int(url.rsplit(":", 1)[1]) if url else {port},):
    for _ in range(200):
        try:
            held.append(socket.create_connection(("127.0.0.1", port), timeout=3))
        except OSError:
            pass
print("held", len(held), flush=True)
time.sleep(2)
EOF"""


@pytest.mark.skipif(CAPS.netns is not None, reason=f"no netns: {CAPS.netns}")
def test_a_contained_agent_flooding_the_bridge_adds_one_thread(tmp_path: Path) -> None:
    """The attack from inside the sandbox: 600 connections straight to the bridge socket and
    200 through the in-namespace relay, held. optarena's thread count is sampled meanwhile."""
    echo = Echo(reading=False)
    ws, home = tmp_path / "ws", tmp_path / "home"
    ws.mkdir()
    home.mkdir()
    sb = AgentSandbox(AgentSandboxPolicy(), writable=[ws, home], ports=[echo.port], home=home)
    peak, stop = [threading.active_count()], threading.Event()

    def sample() -> None:
        while not stop.wait(0.02):
            peak.append(threading.active_count())

    sampler = threading.Thread(target=sample)
    sampler.start()
    baseline = threading.active_count()
    log = tmp_path / "agent.log"
    try:
        with open(log, "wb") as f:
            script = FLOOD.format(port=echo.port)
            proc = sb.spawn(["sh", "-c", script], env=dict(os.environ), stdout=f, stderr=f)
        proc.wait(timeout=120)
        refused = sum(br.refused for br in sb.bridges)
    finally:
        sb.close()
        stop.set()
        sampler.join()
        echo.close()
    assert "held 800" in log.read_text(), log.read_text()
    assert max(peak) <= baseline + 2  # the bridge's one thread (the sampler counted already)
    assert echo.accepted <= MAX_PAIRS
    assert refused >= 600 - MAX_PAIRS
