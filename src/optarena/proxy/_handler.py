"""One agent connection to the metering proxy: each request read within its deadline,
forwarded to its upstream, its reply relayed back unchanged and metered on the way.

Forwarding is byte-for-byte except for hop-by-hop headers and `Accept-Encoding` (the proxy
asks the upstream for an uncompressed reply so it can read the usage in it). Streamed replies
(server-sent events) are passed on chunk by chunk as they arrive, read for usage in passing;
when the agent hangs up mid-stream the rest is still read (up to DRAIN_S) for the usage the
upstream reports at its end. Request headers, API keys included, are forwarded and never
stored.
"""

from __future__ import annotations

import contextlib
import http.client
import io
import json
import socket
import ssl
import time
from datetime import UTC, datetime
from http.server import BaseHTTPRequestHandler
from typing import TYPE_CHECKING, Any
from urllib.parse import urlsplit

from optarena.errors import OptarenaError
from optarena.proxy._intake import BadBody, DeadlineReader, read_body
from optarena.proxy._usage import ReplyUsage, SseUsage, reply_id, reply_usage
from optarena.proxy._wire import ApiKind, api_kind, error_body, request_fields, spends_nothing
from optarena.records import CallRecord

if TYPE_CHECKING:
    from optarena.proxy._server import ProxyHTTPServer

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


MAX_REPLY = 64 << 20  # a non-streamed reply read whole to find its usage
IDLE_S = 300.0  # a kept-alive connection may wait this long for its next request
REQUEST_S = 120.0  # and a request, once its first byte came, must be in by then
IO_S = 600.0  # one socket operation while answering (an agent that stops reading)
DRAIN_S = 120.0  # a stream the agent hung up on is read on for its usage this long
ADMIT_WAIT_S = 600.0  # under a token or cost budget, for earlier calls to be counted


class Handler(BaseHTTPRequestHandler):
    """One agent connection: its requests read within their deadlines, forwarded, their
    replies relayed and metered."""

    protocol_version = "HTTP/1.1"
    disable_nagle_algorithm = True  # headers and body go out in separate writes
    server: ProxyHTTPServer
    _conn: http.client.HTTPConnection | None = None
    _conn_to: Upstream | None = None  # the upstream `_conn` is connected to
    _cut: str | None = None  # why the proxy cut this connection (its stop)

    def log_message(self, format: str, *args: Any) -> None:
        """Quiet: the call records are the log."""

    def setup(self) -> None:
        super().setup()
        plain = self.rfile
        self._reader = DeadlineReader(self.connection, IO_S)
        self.rfile = io.BufferedReader(self._reader, 65536)
        plain.close()  # else the socket stays open until the garbage collector closes it
        self.server.opened(self)

    def handle_one_request(self) -> None:
        self._reader.arm(IDLE_S, REQUEST_S)
        super().handle_one_request()

    def do_POST(self) -> None:
        self._handle()

    do_GET = do_PUT = do_DELETE = do_PATCH = do_HEAD = do_POST

    def _handle(self) -> None:
        t0 = time.monotonic()
        kind = api_kind(self.path)
        try:
            body = read_body(self.headers, self.rfile, self.server.bodies)
        except BadBody as e:
            self.close_connection = True  # the rest of what it sent is not read
            self._send_json(e.status, error_body(kind, e.status, f"optarena proxy: {e.why}"))
            return
        finally:
            self._reader.disarm()
        try:
            self._call(kind, body, t0)
        finally:
            self.server.bodies.release(len(body))

    def _call(self, kind: ApiKind | None, body: bytes, t0: float) -> None:
        model, stream = request_fields(body) if kind else (None, False)
        meter = self.server.meter
        call = meter.start(
            started_at=datetime.now(UTC).isoformat(timespec="milliseconds"),
            api=kind or "other",
            method=self.command,
            path=self.path.split("?", 1)[0],
            model=model,
            stream=stream,
        )
        usage: ReplyUsage | None = None
        try:
            if kind:
                refusal = meter.admit(model, seq=call.seq, wait_s=ADMIT_WAIT_S)
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
                usage = self._forward(kind, body, call, t0)
        except OSError as e:  # the agent hung up mid-reply: the call still happened
            call.error = call.error or f"client disconnected: {type(e).__name__}: {e}"[:300]
            self.close_connection = True
        finally:
            call.latency_s = round(time.monotonic() - t0, 6)
            meter.account(call, usage)
            meter.record(call)

    def _upstream(self, kind: ApiKind | None) -> Upstream:
        """Where this request goes: by its API, else (model listing, token counting) by
        whether it carries Anthropic's headers."""
        if kind is None:
            anthropic = any(h in self.headers for h in ("anthropic-version", "x-api-key"))
            return self.server.routes["anthropic" if anthropic else "openai"]
        return self.server.routes["anthropic" if kind == "anthropic" else "openai"]

    def _upstream_response(
        self, kind: ApiKind | None, body: bytes, call: CallRecord
    ) -> http.client.HTTPResponse:
        """Send the request upstream on this client connection's upstream connection; one
        retry on a fresh connection when a kept-alive one turns out to be closed. Once the
        request has gone out, a failure leaves what it spent unknown (`call.usage_note`)."""
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
            sent = False
            try:
                self._conn.request(self.command, path, body=body, headers=headers)
                sent = True
                return self._conn.getresponse()
            except (OSError, http.client.HTTPException) as e:
                self._drop_upstream()
                stale = (http.client.RemoteDisconnected, BrokenPipeError, ConnectionResetError)
                if isinstance(e, stale) and reused and not attempt:
                    continue
                if sent and kind:
                    call.usage_note = "the upstream sent no reply to the request it was sent"
                raise
        raise AssertionError("unreachable")

    def _drop_upstream(self) -> None:
        if self._conn is not None:
            self._conn.close()
            self._conn = None

    def _forward(
        self, kind: ApiKind | None, body: bytes, call: CallRecord, t0: float
    ) -> ReplyUsage | None:
        """Forward the call and relay its reply; what the reply says it used."""
        try:
            resp = self._upstream_response(kind, body, call)
        except (OSError, http.client.HTTPException) as e:
            self._drop_upstream()
            call.error = f"upstream unreachable: {type(e).__name__}: {e}"[:300]
            msg = f"optarena proxy: upstream {self._upstream(kind).base_url} unreachable ({e})"
            self._send_json(502, error_body(kind, 502, msg))
            return None
        call.status = resp.status
        call.request_id = next(
            (resp.getheader(h) for h in REQUEST_ID_HEADERS if resp.getheader(h)), None
        )
        ctype = (resp.getheader("content-type") or "").lower()
        if kind and "text/event-stream" in ctype:
            return self._relay_stream(kind, resp, call, t0)
        return self._relay_body(kind, resp, call, t0)

    def _start_reply(
        self, resp: http.client.HTTPResponse, chunked: bool, length: int = 0
    ) -> str | None:
        """Send the reply's status and headers; why not, if the agent has hung up."""
        self.send_response_only(resp.status, resp.reason)
        for k, v in resp.getheaders():
            if k.lower() not in HOP_BY_HOP:
                self.send_header(k, v)
        if chunked:
            self.send_header("Transfer-Encoding", "chunked")
        else:
            self.send_header("Content-Length", str(length))
        try:
            self.end_headers()
        except OSError as e:
            return f"{type(e).__name__}: {e}"
        return None

    def _agent_gone(self, call: CallRecord, why: str) -> float:
        """The agent hung up mid-reply: noted; the reply is read on until the deadline
        returned, for the usage at its end."""
        call.error = call.error or f"client disconnected: {why}"[:300]
        self.close_connection = True
        self._upstream_timeout(DRAIN_S)
        return time.monotonic() + DRAIN_S

    def _fail(self, kind: ApiKind | None, status: int, message: str) -> None:
        """An error reply from the proxy itself, mid-call: best effort (the agent may be
        gone), never losing the call's record."""
        self.close_connection = True
        with contextlib.suppress(OSError):
            self._send_json(status, error_body(kind, status, f"optarena proxy: {message}"[:300]))

    def _relay_body(
        self, kind: ApiKind | None, resp: http.client.HTTPResponse, call: CallRecord, t0: float
    ) -> ReplyUsage | None:
        """A whole reply: read (at most MAX_REPLY), its usage taken, then passed on."""
        try:
            data = resp.read(MAX_REPLY + 1)
            if resp.length:  # announced, never sent: read(n) returns short at a close
                raise http.client.IncompleteRead(data, resp.length)
        except (OSError, http.client.HTTPException) as e:
            self._drop_upstream()
            why = self._cut or f"the upstream failed mid-reply: {type(e).__name__}: {e}"
            call.error = why[:300]
            self._fail(kind, 502, why)
            return ReplyUsage(None, note=f"{why}"[:300]) if kind else None
        call.ttfb_s = round(time.monotonic() - t0, 6)
        if len(data) > MAX_REPLY:
            self._drop_upstream()
            call.error = f"a reply over {MAX_REPLY >> 20} MiB, not passed on"
            self._fail(kind, 502, call.error)
            return ReplyUsage(None, note="the reply was too large to read") if kind else None
        usage = None
        obj = _json_object(data) if kind else None
        if kind and resp.status == 200:
            if obj is None:
                usage = ReplyUsage(None, note="the reply is not a JSON object")
            else:
                usage = reply_usage(kind, obj)
                call.reply_id = reply_id(obj)
        elif kind and obj is not None:
            call.error = _short(obj.get("error", obj))
        gone = self._start_reply(resp, False, 0 if self.command == "HEAD" else len(data))
        if gone is None and self.command != "HEAD":
            gone = self._pass_on(data)
        if gone is not None:
            self._agent_gone(call, gone)
        return usage

    def _relay_stream(
        self, kind: ApiKind, resp: http.client.HTTPResponse, call: CallRecord, t0: float
    ) -> ReplyUsage:
        """Pass a stream on chunk by chunk, reading its usage in passing. When the agent
        hangs up, the rest is read on (up to DRAIN_S) for the usage the upstream reports at
        the end: an agent must not make a call's count unknown by leaving early."""
        tracker = SseUsage(kind)
        gone = self._start_reply(resp, chunked=True)  # why the agent stopped reading
        deadline = self._agent_gone(call, gone) if gone is not None else 0.0
        cut: str | None = None  # why the stream stopped before its end
        too_late = f"the agent hung up and the rest did not come within {DRAIN_S:g} s"
        while True:
            try:
                chunk = resp.read1(65536)
            except (OSError, http.client.HTTPException) as e:
                late = gone is not None and time.monotonic() >= deadline
                broke = f"the upstream broke off the stream ({type(e).__name__})"
                cut = self._cut or (too_late if late else broke)
                call.error = call.error or cut[:300]
                self._drop_upstream()
                break
            if not chunk:
                break
            if call.ttfb_s is None:
                call.ttfb_s = round(time.monotonic() - t0, 6)
            tracker.feed(chunk)
            if gone is None:
                gone = self._pass_on(b"%x\r\n%s\r\n" % (len(chunk), chunk))
                if gone is not None:
                    deadline = self._agent_gone(call, gone)
            elif time.monotonic() >= deadline:
                cut = too_late
                self._drop_upstream()
                break
        if gone is None and cut is None:
            gone = self._pass_on(b"0\r\n\r\n")
        if gone is not None or cut is not None:
            self.close_connection = True  # a cut stream ends cut for the agent too
        call.reply_id = tracker.reply_id
        call.error = call.error or tracker.error
        return tracker.result(cut)

    def _pass_on(self, data: bytes) -> str | None:
        """Write to the agent; why not, if it has hung up."""
        try:
            self.wfile.write(data)
            self.wfile.flush()
        except OSError as e:
            return f"{type(e).__name__}: {e}"
        return None

    def _upstream_timeout(self, seconds: float) -> None:
        sock = self._conn.sock if self._conn is not None else None
        if sock is not None:
            with contextlib.suppress(OSError):
                sock.settimeout(seconds)

    def _send_json(self, status: int, data: dict[str, Any]) -> None:
        raw = json.dumps(data).encode()
        self.send_response_only(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(raw)))
        self.end_headers()
        self.wfile.write(raw)

    def cut(self, why: str) -> None:
        """End this connection from another thread (the proxy's stop): its reads fail, so
        a call in flight records itself as cut off, with why."""
        self._cut = why
        for sock in (self.connection, self._conn.sock if self._conn is not None else None):
            if sock is not None:
                with contextlib.suppress(OSError):
                    sock.shutdown(socket.SHUT_RDWR)

    def finish(self) -> None:
        try:
            with contextlib.suppress(OSError):
                super().finish()
            self._drop_upstream()
        finally:
            self.server.closed(self)


def _json_object(data: bytes) -> dict[str, Any] | None:
    try:
        obj = json.loads(data)
    except (ValueError, RecursionError):
        return None
    return obj if isinstance(obj, dict) else None


def _short(value: Any) -> str:
    return json.dumps(value)[:300]
