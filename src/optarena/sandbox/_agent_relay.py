"""The agent's only way out of its network namespace: 127.0.0.1:PORT relayed to a Unix socket.

The agent's network namespace has a loopback and nothing else, so nothing on the host is
reachable from it. For each port a runner allows (the metering proxy), this script listens on
127.0.0.1:PORT *inside* the namespace and relays every connection to a Unix socket that
optarena serves on the host side (`UnixBridge`), which relays it on to the proxy. A Unix
socket is found by its path, not by network namespace, and optarena makes only that one path
visible to the agent; so the proxy is reachable and nothing else on the host's loopback is.

Run as the sandbox's first program (stdlib only, `python -I -S`, so it imports nothing from
the environment the agent might influence):

    python -I -S _agent_relay.py PORT=SOCKET [PORT=SOCKET ...] -- AGENT ARGV...

It binds every port, forks a relay process (killed with the agent by a parent-death signal),
and execs the agent in its own place, so the agent keeps the pid optarena started and waits
for. The relay is the agent's own helper: whatever the agent does to it, it can only reach the
sockets it was given. `Relay` is shared with the host side, where it runs in optarena's own
process, outside the agent's process limit: one thread, at most `MAX_PAIRS` connections at
once, at most one read buffered per direction, whatever the agent opens.
"""

from __future__ import annotations

import contextlib
import os
import selectors
import socket
import sys
import threading
from collections.abc import Callable

PR_SET_PDEATHSIG = 1
MAX_PAIRS = 64  # connections relayed at once (the proxy itself serves 32 and refuses more)
_CHUNK = 65536


class _Pair:
    """Two connected sockets and what each has read that the other has not yet taken."""

    def __init__(self, a: socket.socket, b: socket.socket) -> None:
        self.socks = (a, b)
        self.pending = [b"", b""]  # pending[i]: read from socks[i], not yet written on
        self.eof = [False, False]  # socks[i] has sent its end
        self.passed = [False, False]  # socks[i]'s end was passed on to the other
        self.registered = [False, False]


class _Listening:
    def __init__(self, sock: socket.socket, connect: Callable[[], socket.socket]) -> None:
        self.sock, self.connect = sock, connect


class Relay:
    """Relays connection pairs in one thread with a selector: at most `limit` pairs at once
    (a connection over it is closed at once and counted in `refused`), each direction holding
    at most one read until it is written on, a half-close passed on, an error on either side
    closing both. `run` until `close`."""

    def __init__(self, limit: int = MAX_PAIRS) -> None:
        self.limit = limit
        self.refused = 0
        self._sel = selectors.DefaultSelector()
        self._wake_r, self._wake_w = socket.socketpair()
        self._wake_r.setblocking(False)
        self._sel.register(self._wake_r, selectors.EVENT_READ, None)
        self._pairs: set[_Pair] = set()
        self._closing = threading.Event()

    def listen(self, listener: socket.socket, connect: Callable[[], socket.socket]) -> None:
        """Relay every connection `listener` accepts to a socket `connect` opens (before
        `run`)."""
        listener.setblocking(False)
        self._sel.register(listener, selectors.EVENT_READ, _Listening(listener, connect))

    def close(self) -> None:
        """Stop `run` (from another thread): it closes every relayed connection."""
        self._closing.set()
        with contextlib.suppress(OSError):
            self._wake_w.send(b"x")

    def run(self) -> None:
        try:
            while not self._closing.is_set():
                for key, mask in self._sel.select():
                    if key.data is None:
                        continue  # woken to stop
                    if isinstance(key.data, _Listening):
                        self._accept(key.data.sock, key.data.connect)
                    else:
                        pair, side = key.data
                        self._step(pair, side, mask)
        finally:
            for pair in list(self._pairs):
                self._drop(pair)
            for s in (self._wake_r, self._wake_w):
                s.close()
            self._sel.close()

    def _accept(self, listener: socket.socket, connect: Callable[[], socket.socket]) -> None:
        while True:
            try:
                conn, _ = listener.accept()
            except (BlockingIOError, InterruptedError):
                return
            except OSError:  # the listener was closed
                with contextlib.suppress(KeyError, ValueError):
                    self._sel.unregister(listener)
                return
            if len(self._pairs) >= self.limit:
                self.refused += 1
                conn.close()
                continue
            try:
                out = connect()
            except OSError:
                conn.close()
                continue
            pair = _Pair(conn, out)
            for s in pair.socks:
                s.setblocking(False)
            self._pairs.add(pair)
            self._update(pair)

    def _step(self, pair: _Pair, side: int, mask: int) -> None:
        other = 1 - side
        sock = pair.socks[side]
        try:
            if mask & selectors.EVENT_WRITE and pair.pending[other]:
                sent = sock.send(pair.pending[other])
                pair.pending[other] = pair.pending[other][sent:]
            if mask & selectors.EVENT_READ and not pair.pending[side] and not pair.eof[side]:
                data = sock.recv(_CHUNK)
                if data:
                    pair.pending[side] = data
                    self._flush(pair, side)
                else:
                    pair.eof[side] = True
            for i in (0, 1):
                if pair.eof[i] and not pair.pending[i] and not pair.passed[i]:
                    pair.passed[i] = True
                    pair.socks[1 - i].shutdown(socket.SHUT_WR)
        except (BlockingIOError, InterruptedError):
            pass
        except OSError:
            self._drop(pair)
            return
        if all(pair.passed):
            self._drop(pair)
        else:
            self._update(pair)

    def _flush(self, pair: _Pair, side: int) -> None:
        """Write what `side` just read straight on, as much as the other side takes now."""
        try:
            sent = pair.socks[1 - side].send(pair.pending[side])
        except (BlockingIOError, InterruptedError):
            return
        pair.pending[side] = pair.pending[side][sent:]

    def _update(self, pair: _Pair) -> None:
        """Each socket waits to read while it has nothing pending and has not ended, and to
        write while the other side has something pending for it."""
        for i, sock in enumerate(pair.socks):
            events = 0
            if not pair.pending[i] and not pair.eof[i]:
                events |= selectors.EVENT_READ
            if pair.pending[1 - i]:
                events |= selectors.EVENT_WRITE
            if events and pair.registered[i]:
                self._sel.modify(sock, events, (pair, i))
            elif events:
                self._sel.register(sock, events, (pair, i))
            elif pair.registered[i]:
                self._sel.unregister(sock)
            pair.registered[i] = bool(events)

    def _drop(self, pair: _Pair) -> None:
        self._pairs.discard(pair)
        for i, sock in enumerate(pair.socks):
            if pair.registered[i]:
                with contextlib.suppress(KeyError, ValueError):
                    self._sel.unregister(sock)
                pair.registered[i] = False
            with contextlib.suppress(OSError):
                sock.shutdown(socket.SHUT_RDWR)
            sock.close()


def _unix(path: str) -> Callable[[], socket.socket]:
    def connect() -> socket.socket:
        out = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        try:
            out.connect(path)
        except OSError:
            out.close()
            raise
        return out

    return connect


def _die_with_parent(parent: int) -> None:
    import ctypes

    with contextlib.suppress(OSError, AttributeError):
        ctypes.CDLL(None, use_errno=True).prctl(PR_SET_PDEATHSIG, 9, 0, 0, 0)
    if os.getppid() != parent:  # the agent was gone before the signal was armed
        os._exit(0)


def main(args: list[str]) -> None:
    if "--" not in args:
        sys.exit("usage: _agent_relay.py PORT=SOCKET ... -- ARGV...")
    cut = args.index("--")
    specs, argv = args[:cut], args[cut + 1 :]
    listeners = []
    for spec in specs:
        port, _, target = spec.partition("=")
        s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        s.bind(("127.0.0.1", int(port)))
        s.listen(128)
        listeners.append((s, target))
    parent = os.getpid()
    if os.fork() == 0:
        _die_with_parent(parent)
        relay = Relay()
        for listener, target in listeners:
            relay.listen(listener, _unix(target))
        relay.run()
        os._exit(0)
    for s, _ in listeners:
        s.close()
    try:
        os.execvp(argv[0], argv)
    except OSError as e:
        print(f"optarena agent sandbox: cannot run {argv[0]}: {e}", file=sys.stderr)
        os._exit(127)


if __name__ == "__main__":
    main(sys.argv[1:])
