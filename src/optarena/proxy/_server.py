"""The metering proxy: a local HTTP server, one thread per agent connection (at most
MAX_CONNECTIONS at once), forwarding model-API calls to an upstream and metering each
(`Handler`); stopped, it cuts what is still in flight and records it, never loses it.
"""

from __future__ import annotations

import contextlib
import json
import socket
import threading
from collections.abc import Mapping
from http.server import ThreadingHTTPServer
from typing import Any, Literal

from optarena.errors import OptarenaError
from optarena.proxy._handler import Handler, Upstream
from optarena.proxy._intake import BodyBudget
from optarena.proxy._meter import Meter

Provider = Literal["anthropic", "openai"]
Upstreams = str | Mapping[Provider, str]  # one base URL, or one per provider

MAX_CONNECTIONS = 32  # open at once; an agent needs a few (Claude Code's subagents: ~10)
STOP_GRACE_S = 5.0  # for calls cut at the proxy's stop to record themselves


class ProxyHTTPServer(ThreadingHTTPServer):
    """One thread per connection, at most MAX_CONNECTIONS at once: one more is answered 503
    and closed (the proxy runs in optarena's process, outside the agent's process limit,
    so an agent opening connections in a loop must not start a thread for each)."""

    daemon_threads = True
    block_on_close = False  # `MeteringProxy.stop` ends the connections itself

    def __init__(
        self, addr: tuple[str, int], routes: dict[Provider, Upstream], meter: Meter
    ) -> None:
        super().__init__(addr, Handler)
        self.routes = routes
        self.meter = meter
        self.bodies = BodyBudget()
        self._lock = threading.Lock()
        self._slots = 0  # connections accepted and not yet closed
        self._handlers: set[Handler] = set()

    def process_request(self, request: Any, client_address: Any) -> None:
        with self._lock:
            full = self._slots >= MAX_CONNECTIONS
            self._slots += 0 if full else 1
        if full:
            self.meter.refused_connection()
            _refuse(request)
            self.shutdown_request(request)
            return
        try:
            super().process_request(request, client_address)
        except RuntimeError:  # no thread could be started
            self._release()
            self.meter.refused_connection()
            self.shutdown_request(request)

    def process_request_thread(self, request: Any, client_address: Any) -> None:
        try:
            super().process_request_thread(request, client_address)
        finally:
            self._release()

    def _release(self) -> None:
        with self._lock:
            self._slots -= 1

    def opened(self, handler: Handler) -> None:
        with self._lock:
            self._handlers.add(handler)

    def closed(self, handler: Handler) -> None:
        with self._lock:
            self._handlers.discard(handler)

    def cut_all(self, why: str) -> None:
        with self._lock:
            handlers = list(self._handlers)
        for h in handlers:
            h.cut(why)


def _refuse(request: socket.socket) -> None:
    """Best effort, never blocking: a 503 the agent can read, before the close."""
    body = json.dumps(
        {"error": {"type": "overloaded", "message": (
            f"optarena proxy: over {MAX_CONNECTIONS} connections at once; connection refused"
        )}}
    ).encode()  # fmt: skip
    head = (
        f"HTTP/1.1 503 Service Unavailable\r\nContent-Type: application/json\r\n"
        f"Content-Length: {len(body)}\r\nConnection: close\r\n\r\n"
    ).encode()
    with contextlib.suppress(OSError):
        request.setblocking(False)
        request.send(head + body)


def routes_of(upstream: Upstreams) -> dict[Provider, Upstream]:
    """One base URL for every call, or one per provider (Anthropic's API; OpenAI's)."""
    if isinstance(upstream, str):
        one = Upstream(upstream)
        return {"anthropic": one, "openai": one}
    missing = {"anthropic", "openai"} - set(upstream)
    if missing:
        raise OptarenaError(f"upstreams {dict(upstream)}: no URL for {', '.join(sorted(missing))}")
    return {"anthropic": Upstream(upstream["anthropic"]), "openai": Upstream(upstream["openai"])}


class MeteringProxy:
    """A MeteringProxy on 127.0.0.1 (port 0: any free port) in a background thread.
    `upstream`: one base URL for every call, or one per provider (`routes_of`)."""

    def __init__(
        self, upstream: Upstreams, meter: Meter, host: str = "127.0.0.1", port: int = 0
    ) -> None:
        self.meter = meter
        self.httpd = ProxyHTTPServer((host, port), routes_of(upstream), meter)
        self._thread = threading.Thread(
            target=self.httpd.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True
        )

    @property
    def url(self) -> str:
        host, port = self.httpd.server_address[:2]
        return f"http://{host!s}:{port}"

    def start(self) -> MeteringProxy:
        self._thread.start()
        return self

    def stop(self, drain_s: float = 10.0) -> None:
        """Stop accepting, wait (at most `drain_s`) for calls in flight to be recorded, then
        cut every connection: a call still in flight (a stream that never ends, an upstream
        that never answers) records itself as cut off, its spending unknown; one that cannot
        within STOP_GRACE_S is recorded so by the meter. Nothing in flight is lost."""
        self.httpd.shutdown()
        why = "cut off: the proxy stopped (the agent's run ended) with the call in flight"
        self.meter.drain(drain_s)
        self.meter.close()
        self.httpd.cut_all(why)
        if self.meter.drain(STOP_GRACE_S):
            self.meter.give_up(why)
        self.httpd.server_close()

    def __enter__(self) -> MeteringProxy:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()
