"""Fixtures for sandbox tests: listeners on the host that a sandbox must (not) reach."""

from __future__ import annotations

import contextlib
import os
import socket
import threading
from collections.abc import Callable, Iterator

import pytest


class Listener:
    """A listener on the host that counts the connections it accepts and greets each with
    `hello`: TCP on 127.0.0.1 (any port) by default, or a Unix socket at a path or an
    abstract name (`\\0...`)."""

    def __init__(self, family: int = socket.AF_INET, address: str | None = None) -> None:
        self.sock = socket.socket(family, socket.SOCK_STREAM)
        self.address = address
        self.sock.bind(address if address is not None else ("127.0.0.1", 0))
        self.sock.listen(8)
        self.port = self.sock.getsockname()[1] if family == socket.AF_INET else None
        self.accepted = 0
        threading.Thread(target=self._serve, daemon=True).start()

    def _serve(self) -> None:
        while True:
            try:
                conn, _ = self.sock.accept()
            except OSError:
                return
            self.accepted += 1
            with contextlib.suppress(OSError):
                conn.sendall(b"hello")
            conn.close()

    def close(self) -> None:
        self.sock.close()
        if self.address is not None and not self.address.startswith("\0"):
            with contextlib.suppress(FileNotFoundError):
                os.unlink(self.address)


@pytest.fixture
def listen() -> Iterator[Callable[..., Listener]]:
    """Start listeners (`Listener`'s arguments); all are closed after the test."""
    made: list[Listener] = []

    def start(family: int = socket.AF_INET, address: str | None = None) -> Listener:
        made.append(Listener(family, address))
        return made[-1]

    yield start
    for listener in made:
        listener.close()
