"""The host side of the agent's network: a loopback inside its namespace, and one Unix socket
per allowed port, relayed to that port on the host's 127.0.0.1.

See `_agent_relay` for the namespace side. The bridge accepts only on its own socket file,
which lives in a directory that other agents' sandboxes do not show, and connects only to the
one port it was made for: an agent that reaches the bridge reaches the metering proxy and
nothing else.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import socket
import struct
import threading
from pathlib import Path

from optarena.sandbox._agent_relay import Relay

SIOCGIFFLAGS = 0x8913
SIOCSIFFLAGS = 0x8914
IFF_UP = 0x1


def loopback_up() -> None:
    """Bring up `lo` in the current (new, empty) network namespace. In the forked child,
    while it still holds CAP_NET_ADMIN there."""
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
        req = struct.pack("16sH22x", b"lo", 0)
        flags = struct.unpack("16sH", fcntl.ioctl(s, SIOCGIFFLAGS, req)[:18])[1]
        fcntl.ioctl(s, SIOCSIFFLAGS, struct.pack("16sH22x", b"lo", flags | IFF_UP))


class UnixBridge:
    """Listens on a Unix socket at `path`; relays each connection to 127.0.0.1:`port`, in
    one thread, at most `MAX_PAIRS` at once (`Relay`): this runs in optarena's process, so
    an agent opening connections in a loop must not start threads or hold descriptors here
    without bound. `refused` counts the connections closed over the limit."""

    def __init__(self, path: Path, port: int, mode: int = 0o666) -> None:
        self.path = path
        self.port = port
        self._sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        try:
            self._sock.bind(str(path))
            os.chmod(path, mode)  # connecting needs write permission on the socket file
            self._sock.listen(128)
        except OSError:
            self._sock.close()
            raise
        self._relay = Relay()
        self._relay.listen(self._sock, self._connect)
        self._thread = threading.Thread(target=self._relay.run, daemon=True)
        self._thread.start()

    def _connect(self) -> socket.socket:
        return socket.create_connection(("127.0.0.1", self.port), timeout=10)

    @property
    def refused(self) -> int:
        return self._relay.refused

    def close(self) -> None:
        """Stop accepting and cut every relayed connection (the agent is gone by now)."""
        self._relay.close()
        self._thread.join(timeout=2)
        with contextlib.suppress(OSError):
            self._sock.shutdown(socket.SHUT_RDWR)
        self._sock.close()
        with contextlib.suppress(OSError):
            self.path.unlink()
