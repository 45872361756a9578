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
sockets it was given. `pump` is shared with the host side.
"""

from __future__ import annotations

import contextlib
import os
import socket
import sys
import threading

PR_SET_PDEATHSIG = 1


def pump(src: socket.socket, dst: socket.socket) -> None:
    """Copy bytes until EOF, then pass the EOF on (half-close); ends on any socket error."""
    try:
        while True:
            data = src.recv(65536)
            if not data:
                break
            dst.sendall(data)
        with contextlib.suppress(OSError):
            dst.shutdown(socket.SHUT_WR)
    except OSError:
        with contextlib.suppress(OSError):
            dst.shutdown(socket.SHUT_RDWR)


def relay_pair(a: socket.socket, b: socket.socket) -> None:
    """Relay both directions between two connected sockets; close both when both are done."""

    def run() -> None:
        back = threading.Thread(target=pump, args=(b, a), daemon=True)
        back.start()
        pump(a, b)
        back.join()
        a.close()
        b.close()

    threading.Thread(target=run, daemon=True).start()


def _serve(listener: socket.socket, target: str) -> None:
    while True:
        try:
            conn, _ = listener.accept()
        except OSError:
            return
        out = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        try:
            out.connect(target)
        except OSError:
            conn.close()
            out.close()
            continue
        relay_pair(conn, out)


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
        threads = [threading.Thread(target=_serve, args=pair, daemon=True) for pair in listeners]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
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
