"""The scripted model server: a local HTTP server speaking Anthropic Messages, OpenAI Responses
and Chat Completions (streamed or not), replying as its script decides.

It keeps a log of what it served (rule, status, the token counts it put on the wire), which
is the ground truth the metering proxy and the agents' own reports are checked against.
"""

from __future__ import annotations

import json
import select
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict

from optarena.fakemodel._conversation import parse_request
from optarena.fakemodel._render import render, served_tokens
from optarena.fakemodel._script import Reply, Script, WireFault
from optarena.proxy import ApiKind, api_kind, error_body

DEFAULT_MODEL = "optarena-scripted"


class ServedCall(BaseModel):
    """One reply the fake server gave (a line of its JSONL log)."""

    model_config = ConfigDict(extra="forbid")

    api: str
    path: str
    model: str | None
    rule: str
    status: int
    stream: bool
    tokens: dict[str, int | None] | None


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    disable_nagle_algorithm = True  # headers and body go out in separate writes
    server: FakeModelHTTPServer

    def log_message(self, format: str, *args: Any) -> None:
        """Quiet: the served-call log is the record."""

    def do_HEAD(self) -> None:
        self.send_response(200)
        self.send_header("content-length", "0")
        self.end_headers()

    def do_GET(self) -> None:
        self._json(200, {"object": "list", "data": [{"id": DEFAULT_MODEL, "object": "model"}]})

    def do_POST(self) -> None:
        body = self.rfile.read(int(self.headers.get("content-length") or 0))
        kind = api_kind(self.path)
        try:
            req = json.loads(body or b"{}")
        except ValueError:
            req = None
        if "count_tokens" in self.path and isinstance(req, dict):
            self._json(200, {"input_tokens": 1000})
            return
        if kind is None or not isinstance(req, dict):
            self._json(404, error_body(kind, 404, f"fake model: no API at {self.path}"))
            return
        reply = self.server.script.decide(parse_request(kind, req))
        if reply.delay_s:
            time.sleep(reply.delay_s)
        self._reply(kind, req, reply)

    def _reply(self, kind: ApiKind, req: dict[str, Any], reply: Reply) -> None:
        model = req.get("model") or DEFAULT_MODEL
        stream = bool(req.get("stream"))
        if reply.error_status:
            self._json(reply.error_status, error_body(kind, reply.error_status, reply.text or ""))
            self.server.record(kind, self.path, model, reply, reply.error_status, stream, None)
            return
        data, events = render(kind, reply, model, stream, req)
        tokens = served_tokens(kind, reply.usage).as_dict()
        no_usage = (
            kind == "chat" and stream and not (req.get("stream_options") or {}).get("include_usage")
        )
        if data is not None:
            self._json(200, data)
        else:
            self._stream(events, reply.wire or WireFault())
        self.server.record(kind, self.path, model, reply, 200, stream, None if no_usage else tokens)

    def _json(self, status: int, data: dict[str, Any]) -> None:
        raw = json.dumps(data).encode()
        self.send_response(status)
        self.send_header("content-type", "application/json")
        self.send_header("content-length", str(len(raw)))
        self.send_header("request-id", f"req_fake_{self.server.next_seq()}")
        self.end_headers()
        self.wfile.write(raw)

    def _stream(self, events: list[bytes], fault: WireFault) -> None:
        """Chunked transfer, one event per chunk, flushed: a real stream, not one blob; or
        one that goes wrong as `fault` says."""
        self.send_response(200)
        self.send_header("content-type", "text/event-stream")
        self.send_header("cache-control", "no-cache")
        self.send_header("transfer-encoding", "chunked")
        self.send_header("request-id", f"req_fake_{self.server.next_seq()}")
        self.end_headers()
        if fault.events is not None:
            events = fault.events(list(events))
        for i, ev in enumerate(events):
            if i == fault.cut_after:
                self.close_connection = True
                return  # hangs up: the last chunk (size 0) never comes
            if i == fault.stall_after:
                self._hold_open()
                return
            if fault.event_delay_s:
                time.sleep(fault.event_delay_s)
            try:
                self.wfile.write(b"%x\r\n%s\r\n" % (len(ev), ev))
                self.wfile.flush()
            except OSError:
                self.close_connection = True
                return  # the client left
        self.wfile.write(b"0\r\n\r\n")
        self.wfile.flush()

    def _hold_open(self, most_s: float = 600.0) -> None:
        """Send nothing until the client closes the connection (or `most_s` passes)."""
        self.close_connection = True
        deadline = time.monotonic() + most_s
        while time.monotonic() < deadline:
            ready, _, _ = select.select([self.connection], [], [], 0.2)
            if ready and not self.connection.recv(4096):
                return


class FakeModelHTTPServer(ThreadingHTTPServer):
    daemon_threads = True

    def __init__(self, addr: tuple[str, int], script: Script, log_path: Path | None) -> None:
        super().__init__(addr, _Handler)
        self.script = script
        self.log_path = log_path
        self.served: list[ServedCall] = []
        self._lock = threading.Lock()
        self._seq = 0

    def next_seq(self) -> int:
        with self._lock:
            self._seq += 1
            return self._seq

    def record(
        self,
        api: ApiKind,
        path: str,
        model: str,
        reply: Reply,
        status: int,
        stream: bool,
        tokens: dict[str, int | None] | None,
    ) -> None:
        call = ServedCall(
            api=api,
            path=path,
            model=model,
            rule=reply.rule,
            status=status,
            stream=stream,
            tokens=tokens,
        )
        with self._lock:
            self.served.append(call)
            if self.log_path:
                with self.log_path.open("a") as f:
                    f.write(call.model_dump_json() + "\n")


class FakeModelServer:
    """Runs a FakeModelHTTPServer on 127.0.0.1 in a background thread (a context manager)."""

    def __init__(self, script: Script, port: int = 0, log_path: Path | None = None) -> None:
        self.httpd = FakeModelHTTPServer(("127.0.0.1", port), script, log_path)
        self._thread = threading.Thread(
            target=self.httpd.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True
        )

    @property
    def url(self) -> str:
        host, port = self.httpd.server_address[:2]
        return f"http://{host!s}:{port}"

    @property
    def served(self) -> list[ServedCall]:
        return list(self.httpd.served)

    def start(self) -> FakeModelServer:
        self._thread.start()
        return self

    def stop(self) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()

    def __enter__(self) -> FakeModelServer:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()
