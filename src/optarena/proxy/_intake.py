"""What the proxy reads from an agent, bounded: a request must arrive by a deadline, and its
body is read in one of the two framings HTTP/1.1 has, strictly, up to a size.

The proxy runs in optarena's own process, outside every limit the agent's sandbox sets, so
whatever an agent sends is bounded here: the bytes of one body (`MAX_BODY`, framing included),
the bytes of all bodies held at once (`BodyBudget`), and the time a request may take to
arrive (`DeadlineReader`: a request trickled in a byte at a time ends at its deadline however
often bytes come). A framing the proxy does not read exactly as written (a chunk size with a
sign, `0x`, `_` or 17 digits, a Content-Length that is not plain digits, two that differ, a
Transfer-Encoding other than `chunked`, both headers at once) is refused, never guessed at.
"""

from __future__ import annotations

import io
import re
import socket
import threading
import time
from email.message import Message

MAX_BODY = 64 << 20  # the providers' own request limits are lower (Anthropic: 32 MB)
MAX_HELD = 4 * MAX_BODY  # request bodies held at once by one proxy
MAX_FRAMING = 1 << 20  # chunk-size lines, extensions and trailers of one body
MAX_LINE = 4096  # one chunk-size or trailer line
MAX_TRAILERS = 64

_CHUNK_SIZE = re.compile(rb"([0-9A-Fa-f]{1,16})[ \t]*(?:;[^\r\n]*)?\r?\n")
_LENGTH = re.compile(r"[0-9]{1,19}")


class BadBody(Exception):
    """A request body the proxy refuses to read on: `status` and why, for the agent."""

    def __init__(self, status: int, why: str) -> None:
        super().__init__(why)
        self.status, self.why = status, why


class BodyBudget:
    """How many bytes of request bodies one proxy holds at once (optarena's own memory)."""

    def __init__(self, limit: int = MAX_HELD) -> None:
        self.limit = limit
        self.held = 0
        self._lock = threading.Lock()

    def reserve(self, n: int) -> None:
        with self._lock:
            if self.held + n > self.limit:
                raise BadBody(
                    503, f"request bodies over {self.limit >> 20} MiB held at once; try again"
                )
            self.held += n

    def release(self, n: int) -> None:
        with self._lock:
            self.held -= n


def read_body(headers: Message, rfile: io.BufferedIOBase, budget: BodyBudget) -> bytes:
    """The request body, reserved in `budget` (the caller releases `len(body)` when done
    with it); `BadBody` for one malformed, too large, or not arriving in time."""
    te = headers.get_all("transfer-encoding") or []
    lengths = headers.get_all("content-length") or []
    if te and lengths:
        raise BadBody(400, "both Transfer-Encoding and Content-Length")
    if te:
        if [v.strip().lower() for v in te] != ["chunked"]:
            raise BadBody(501, "a Transfer-Encoding other than chunked")
        return _chunked(rfile, budget)
    if any(_LENGTH.fullmatch(v.strip()) is None for v in lengths) or len(set(lengths)) > 1:
        raise BadBody(400, "a malformed Content-Length")
    n = int(lengths[0]) if lengths else 0
    if n > MAX_BODY:
        raise BadBody(413, f"a request body of {n} bytes (at most {MAX_BODY >> 20} MiB)")
    budget.reserve(n)
    try:
        data = _read(rfile, n)
    except BaseException:
        budget.release(n)
        raise
    return data


def _read(rfile: io.BufferedIOBase, n: int) -> bytes:
    try:
        data = rfile.read(n)
    except TimeoutError:
        raise BadBody(408, "the request did not arrive in time") from None
    if len(data) != n:
        raise BadBody(400, "the request body ended early")
    return data


def _line(rfile: io.BufferedIOBase, what: str) -> bytes:
    try:
        line = rfile.readline(MAX_LINE + 1)
    except TimeoutError:
        raise BadBody(408, "the request did not arrive in time") from None
    if not line.endswith(b"\n"):
        raise BadBody(400, f"a malformed chunked body ({what} cut or over {MAX_LINE} bytes)")
    return line


def _chunked(rfile: io.BufferedIOBase, budget: BodyBudget) -> bytes:
    parts: list[bytes] = []
    total = framing = 0
    try:
        while True:
            line = _line(rfile, "a chunk-size line")
            framing += len(line) + 2
            match = _CHUNK_SIZE.fullmatch(line)
            if match is None:
                raise BadBody(400, "a malformed chunked body (a chunk size that is not hex)")
            size = int(match.group(1), 16)
            if size == 0:
                break
            if total + size > MAX_BODY:
                raise BadBody(413, f"a request body over {MAX_BODY >> 20} MiB")
            if framing > MAX_FRAMING:
                raise BadBody(413, f"chunk framing over {MAX_FRAMING >> 20} MiB")
            budget.reserve(size)
            total += size
            parts.append(_read(rfile, size))
            if _line(rfile, "a chunk's end") not in (b"\r\n", b"\n"):
                raise BadBody(400, "a malformed chunked body (a chunk longer than its size)")
        for _ in range(MAX_TRAILERS):
            line = _line(rfile, "a trailer")
            framing += len(line)
            if line in (b"\r\n", b"\n"):
                return b"".join(parts)
        raise BadBody(400, f"a chunked body with over {MAX_TRAILERS} trailer lines")
    except BaseException:
        budget.release(total)
        raise


class DeadlineReader(io.RawIOBase):
    """A socket's reads, bounded by a deadline while one is armed: `idle_s` for the first
    byte of a request, then `request_s` for all of it, however the bytes are spaced. Unarmed
    (while the proxy answers), each socket operation waits at most `io_s`."""

    def __init__(self, sock: socket.socket, io_s: float) -> None:
        super().__init__()
        self._sock = sock
        self._io_s = io_s
        self._deadline: float | None = None
        self._request_s = 0.0
        self._started = False

    def readable(self) -> bool:
        return True

    def arm(self, idle_s: float, request_s: float) -> None:
        self._deadline = time.monotonic() + idle_s
        self._request_s = request_s
        self._started = False

    def disarm(self) -> None:
        self._deadline = None
        self._sock.settimeout(self._io_s)

    def readinto(self, buffer: memoryview) -> int:  # type: ignore[override]
        if self._deadline is not None:
            left = self._deadline - time.monotonic()
            if left <= 0:
                raise TimeoutError("the request did not arrive in time")
            self._sock.settimeout(left)
        n = self._sock.recv_into(buffer)
        if n and self._deadline is not None and not self._started:
            self._started = True
            self._deadline = time.monotonic() + self._request_s
        return n
