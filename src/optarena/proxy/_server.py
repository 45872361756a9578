"""The metering proxy: a local HTTP server that forwards model-API calls to an upstream,
streams the replies through unchanged, and meters every call on the way.

Forwarding is byte-for-byte except for hop-by-hop headers and `Accept-Encoding` (the proxy
asks the upstream for an uncompressed reply so it can read the usage in it). Streamed replies
(server-sent events) are passed on chunk by chunk as they arrive, read for usage in passing.
Request headers, API keys included, are forwarded and never stored.
"""

from __future__ import annotations

import http.client
import json
import ssl
import threading
import time
from collections.abc import Mapping
from datetime import UTC, datetime
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, Literal
from urllib.parse import urlsplit

from optarena.errors import OptarenaError
from optarena.proxy._meter import Meter, set_tokens
from optarena.proxy._wire import (
    ApiKind,
    SseUsage,
    api_kind,
    error_body,
    reply_id,
    request_fields,
    spends_nothing,
    tokens_from_reply,
)
from optarena.records import CallRecord

Provider = Literal["anthropic", "openai"]
Upstreams = str | Mapping[Provider, str]  # one base URL, or one per provider

HOP_BY_HOP = {
    "connection",
    "keep-alive",
    "proxy-authenticate",
    "proxy-authorization",
    "te",
    "trailer",
    "transfer-encoding",
    "upgrade",
    "host",
    "content-length",
    "accept-encoding",
}
REQUEST_ID_HEADERS = ("request-id", "x-request-id", "openai-request-id")


class Upstream:
    """Where calls go: scheme, host, port and a path prefix, from a base URL."""

    def __init__(self, base_url: str, timeout_s: float = 600.0) -> None:
        parts = urlsplit(base_url)
        if parts.scheme not in ("http", "https") or not parts.hostname:
            raise OptarenaError(f"upstream '{base_url}': expected an http(s)://host[:port] URL")
        self.base_url = base_url
        self.https = parts.scheme == "https"
        self.host = parts.hostname
        self.port = parts.port or (443 if self.https else 80)
        self.prefix = parts.path.rstrip("/")
        self.timeout_s = timeout_s

    def connect(self) -> http.client.HTTPConnection:
        if self.https:
            ctx = ssl.create_default_context()
            return http.client.HTTPSConnection(
                self.host, self.port, timeout=self.timeout_s, context=ctx
            )
        return http.client.HTTPConnection(self.host, self.port, timeout=self.timeout_s)


MAX_BODY = 64 << 20  # the providers' own request limits are lower (Anthropic: 32 MB)


class _BadBody(Exception):
    def __init__(self, status: int, why: str) -> None:
        super().__init__(why)
        self.status, self.why = status, why


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    disable_nagle_algorithm = True  # headers and body go out in separate writes
    server: _ProxyHTTPServer
    _conn: http.client.HTTPConnection | None = None
    _conn_to: Upstream | None = None  # the upstream `_conn` is connected to

    def log_message(self, format: str, *args: Any) -> None:
        """Quiet: the call records are the log."""

    def do_POST(self) -> None:
        self._handle()

    do_GET = do_PUT = do_DELETE = do_PATCH = do_HEAD = do_POST

    def _body(self) -> bytes:
        """The request body, at most MAX_BODY bytes (read into optarena's own memory, which
        no agent limit bounds); `_BadBody` for one too large or malformed."""
        if "chunked" in (self.headers.get("transfer-encoding") or "").lower():
            parts: list[bytes] = []
            total = 0
            while True:
                try:
                    size = int(self.rfile.readline(1024).split(b";")[0].strip() or b"0", 16)
                except ValueError:
                    raise _BadBody(400, "a malformed chunked request body") from None
                if size == 0:
                    self.rfile.readline(1024)
                    return b"".join(parts)
                total += size
                if total > MAX_BODY:
                    raise _BadBody(413, f"a request body over {MAX_BODY >> 20} MiB")
                parts.append(self.rfile.read(size))
                self.rfile.readline(1024)
        try:
            n = int(self.headers.get("content-length") or 0)
        except ValueError:
            raise _BadBody(400, "a malformed Content-Length") from None
        if n < 0 or n > MAX_BODY:
            raise _BadBody(413 if n > 0 else 400, f"a request body of {n} bytes")
        return self.rfile.read(n)

    def _handle(self) -> None:
        t0 = time.monotonic()
        kind = api_kind(self.path)
        try:
            body = self._body()
        except _BadBody as e:
            self.close_connection = True  # the rest of what it sent is not read
            self._send_json(e.status, error_body(kind, e.status, f"optarena proxy: {e.why}"))
            return
        model, stream = request_fields(body) if kind else (None, False)
        meter = self.server.meter
        call = CallRecord(
            seq=meter.next_seq(),
            started_at=datetime.now(UTC).isoformat(timespec="milliseconds"),
            api=kind or "other",
            method=self.command,
            path=self.path.split("?", 1)[0],
            model=model,
            stream=stream,
        )
        try:
            if kind:
                refusal = meter.admit(model)
            elif not spends_nothing(self.command, call.path):
                refusal = (
                    f"{self.command} {call.path} is not an API the proxy meters (Messages, "
                    "Responses, Chat Completions; reads and token counting pass); not forwarded"
                )  # recorded as a refused call; not a budget, so the run's status stays
            else:
                refusal = None
            if refusal:
                call.refused = refusal
                call.status = 400
                msg = f"optarena proxy: {refusal}; call refused"
                self._send_json(400, error_body(kind, 400, msg))
            else:
                self._forward(kind, body, call, t0)
        except OSError as e:  # the agent hung up mid-reply: the call still happened
            call.error = call.error or f"client disconnected: {type(e).__name__}: {e}"[:300]
            self.close_connection = True
        finally:
            call.latency_s = round(time.monotonic() - t0, 6)
            meter.price(call)
            meter.record(call)

    def _upstream(self, kind: ApiKind | None) -> Upstream:
        """Where this request goes: by its API, else (model listing, token counting) by
        whether it carries Anthropic's headers."""
        if kind is None:
            anthropic = any(h in self.headers for h in ("anthropic-version", "x-api-key"))
            return self.server.routes["anthropic" if anthropic else "openai"]
        return self.server.routes["anthropic" if kind == "anthropic" else "openai"]

    def _upstream_response(self, kind: ApiKind | None, body: bytes) -> http.client.HTTPResponse:
        """Send the request upstream on this client connection's upstream connection; one
        retry on a fresh connection when a kept-alive one turns out to be closed."""
        headers = {k: v for k, v in self.headers.items() if k.lower() not in HOP_BY_HOP}
        headers["Accept-Encoding"] = "identity"
        up = self._upstream(kind)
        if self._conn is not None and self._conn_to is not up:
            self._conn.close()
            self._conn = None
        self._conn_to = up
        path = up.prefix + self.path
        for attempt in (0, 1):
            reused = self._conn is not None
            if self._conn is None:
                self._conn = up.connect()
            try:
                self._conn.request(self.command, path, body=body, headers=headers)
                return self._conn.getresponse()
            except (http.client.RemoteDisconnected, BrokenPipeError, ConnectionResetError):
                self._conn.close()
                self._conn = None
                if not reused or attempt:
                    raise
        raise AssertionError("unreachable")

    def _forward(self, kind: ApiKind | None, body: bytes, call: CallRecord, t0: float) -> None:
        try:
            resp = self._upstream_response(kind, body)
        except (OSError, http.client.HTTPException) as e:
            call.status, call.error = 502, f"upstream unreachable: {type(e).__name__}: {e}"[:300]
            msg = f"optarena proxy: upstream {self._upstream(kind).base_url} unreachable ({e})"
            self._send_json(502, error_body(kind, 502, msg))
            return
        call.status = resp.status
        call.request_id = next(
            (resp.getheader(h) for h in REQUEST_ID_HEADERS if resp.getheader(h)), None
        )
        ctype = (resp.getheader("content-type") or "").lower()
        if kind and "text/event-stream" in ctype:
            self._relay_stream(kind, resp, call, t0)
        else:
            self._relay_body(kind, resp, call, t0)

    def _start_reply(self, resp: http.client.HTTPResponse, chunked: bool, length: int = 0) -> None:
        self.send_response_only(resp.status, resp.reason)
        for k, v in resp.getheaders():
            if k.lower() not in HOP_BY_HOP:
                self.send_header(k, v)
        if chunked:
            self.send_header("Transfer-Encoding", "chunked")
        else:
            self.send_header("Content-Length", str(length))
        self.end_headers()

    def _relay_body(
        self, kind: ApiKind | None, resp: http.client.HTTPResponse, call: CallRecord, t0: float
    ) -> None:
        data = resp.read()
        call.ttfb_s = round(time.monotonic() - t0, 6)
        if self.command == "HEAD":
            data = b""
        self._start_reply(resp, chunked=False, length=len(data))
        self.wfile.write(data)
        if not kind:
            return
        try:
            obj = json.loads(data)
        except ValueError:
            obj = None
        if isinstance(obj, dict):
            if resp.status == 200:
                set_tokens(call, tokens_from_reply(kind, obj))
                call.reply_id = reply_id(obj)
                call.model = call.model or obj.get("model")
            else:
                call.error = json.dumps(obj.get("error", obj))[:300]

    def _relay_stream(
        self, kind: ApiKind, resp: http.client.HTTPResponse, call: CallRecord, t0: float
    ) -> None:
        tracker = SseUsage(kind)
        self._start_reply(resp, chunked=True)
        try:
            while True:
                chunk = resp.read1(65536)
                if not chunk:
                    break
                if call.ttfb_s is None:
                    call.ttfb_s = round(time.monotonic() - t0, 6)
                tracker.feed(chunk)
                self.wfile.write(b"%x\r\n%s\r\n" % (len(chunk), chunk))
                self.wfile.flush()
            self.wfile.write(b"0\r\n\r\n")
            self.wfile.flush()
        except (OSError, http.client.HTTPException) as e:
            call.error = f"stream interrupted: {type(e).__name__}: {e}"[:300]
            self.close_connection = True
            if self._conn is not None:
                self._conn.close()
                self._conn = None
        set_tokens(call, tracker.tokens)
        call.reply_id = tracker.reply_id
        call.model = call.model or tracker.model
        call.error = call.error or tracker.error

    def _send_json(self, status: int, data: dict[str, Any]) -> None:
        raw = json.dumps(data).encode()
        self.send_response_only(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(raw)))
        self.end_headers()
        self.wfile.write(raw)

    def finish(self) -> None:
        super().finish()
        if self._conn is not None:
            self._conn.close()
            self._conn = None


class _ProxyHTTPServer(ThreadingHTTPServer):
    daemon_threads = True

    def __init__(
        self, addr: tuple[str, int], routes: dict[Provider, Upstream], meter: Meter
    ) -> None:
        super().__init__(addr, _Handler)
        self.routes = routes
        self.meter = meter


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
        self.httpd = _ProxyHTTPServer((host, port), routes_of(upstream), meter)
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
        """Stop accepting, then wait (at most `drain_s`) for calls in flight to be recorded."""
        self.httpd.shutdown()
        self.meter.drain(drain_s)
        self.httpd.server_close()

    def __enter__(self) -> MeteringProxy:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()
