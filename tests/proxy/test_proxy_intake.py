"""Request bodies in every framing, read strictly and bounded: a chunk size that is not plain
hex, a Content-Length that is not plain digits, framing past its limits, a body that never
arrives. `read_body` on literal bytes first, then through the running proxy: what an agent
sends cannot make optarena's own process read, hold or wait without bound."""

from __future__ import annotations

import http.client
import io
import json
import socket
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from optarena.fakemodel import FakeModelServer, make_script

# private: monkeypatched limits, and the body reader attacked directly
from optarena.proxy import MeteredSession, ProxyLimits, _server
from optarena.proxy import _handler as proxy_handler
from optarena.proxy._intake import BadBody, BodyBudget, read_body


def headers(*lines: str) -> http.client.HTTPMessage:
    raw = "".join(f"{line}\r\n" for line in lines) + "\r\n"
    return http.client.parse_headers(io.BytesIO(raw.encode()))


def read(head: list[str], body: bytes, budget: BodyBudget | None = None) -> bytes:
    return read_body(headers(*head), io.BytesIO(body), budget or BodyBudget())


CHUNKED = ["Transfer-Encoding: chunked"]


def test_both_framings_read_exactly_what_was_sent() -> None:
    assert read(["Content-Length: 5"], b"hello, and the next request") == b"hello"
    assert read([], b"ignored") == b""
    body = b"5;ext=1\r\nhello\r\n1\r\n!\r\n0\r\nX-Trailer: y\r\n\r\nnext"
    budget = BodyBudget()
    assert read(CHUNKED, body, budget) == b"hello!"
    assert budget.held == 6  # the caller releases it when done with the body


@pytest.mark.parametrize(
    "size",
    [b"-1", b"-0", b"+5", b"0x5", b"5_0", b" 5", b"", b"g", b"1" * 17, b"5 5", b"\xff"],
)
def test_a_chunk_size_that_is_not_plain_hex_is_refused(size: bytes) -> None:
    """`-1` made the proxy read until the agent hung up (80 MiB past the limit): int() took
    a sign, `0x`, `_` and spaces; only hex digits are a chunk size."""
    with pytest.raises(BadBody) as e:
        read(CHUNKED, size + b"\r\n" + b"x" * 100 + b"\r\n0\r\n\r\n")
    assert e.value.status == 400


@pytest.mark.parametrize(
    ("head", "body", "status"),
    [
        (CHUNKED, b"FFFFFFFFFFFFFFFF\r\n", 413),  # 16 EiB announced: refused unread
        (CHUNKED, b"4000001\r\n", 413),  # 64 MiB + 1
        (CHUNKED, b"5;" + b"e" * 5000 + b"\r\nhello\r\n0\r\n\r\n", 400),  # extension too long
        (CHUNKED, b"5\r\nhello world\r\n0\r\n\r\n", 400),  # a chunk longer than its size
        (CHUNKED, b"5\r\nhel", 400),  # ended early
        (CHUNKED, b"0\r\n" + b"X: y\r\n" * 65 + b"\r\n", 400),  # trailers without end
        (CHUNKED, b"0\r\nX: y", 400),  # a trailer cut off
        (["Transfer-Encoding: gzip, chunked"], b"0\r\n\r\n", 501),
        (["Transfer-Encoding: chunked", "Transfer-Encoding: chunked"], b"0\r\n\r\n", 501),
        (["Transfer-Encoding: chunked", "Content-Length: 5"], b"0\r\n\r\n", 400),
        (["Content-Length: 5", "Content-Length: 6"], b"hello!", 400),
        (["Content-Length: +5"], b"hello", 400),
        (["Content-Length: 5_0"], b"hello", 400),
        (["Content-Length: -1"], b"hello", 400),
        (["Content-Length: 1e3"], b"hello", 400),
        (["Content-Length: 100000000000"], b"{", 413),
        (["Content-Length: 10"], b"short", 400),
    ],
)
def test_every_other_framing_is_refused_with_a_status(
    head: list[str], body: bytes, status: int
) -> None:
    budget = BodyBudget()
    with pytest.raises(BadBody) as e:
        read(head, body, budget)
    assert e.value.status == status
    assert budget.held == 0  # nothing stays reserved for a refused body


def test_framing_is_bounded_apart_from_the_data() -> None:
    """A body of a million one-byte chunks is 1 MiB of data and 6 MiB on the wire."""
    many = b"1\r\nx\r\n" * 300_000 + b"0\r\n\r\n"
    with pytest.raises(BadBody) as e:
        read(CHUNKED, many)
    assert e.value.status == 413 and "framing" in e.value.why


def test_bodies_held_at_once_are_bounded() -> None:
    budget = BodyBudget(limit=10)
    assert read(["Content-Length: 6"], b"123456", budget) == b"123456"
    with pytest.raises(BadBody) as e:
        read(["Content-Length: 6"], b"123456", budget)
    assert e.value.status == 503
    budget.release(6)
    assert read(CHUNKED, b"6\r\n123456\r\n0\r\n\r\n", budget) == b"123456"


@pytest.fixture
def session(tmp_path: Path) -> Iterator[MeteredSession]:
    with (
        FakeModelServer(make_script("hello")) as fake,
        MeteredSession(fake.url, ProxyLimits(), tmp_path / "c.jsonl") as s,
    ):
        yield s


def address(s: MeteredSession) -> tuple[str, int]:
    host, port = s.url.removeprefix("http://").split(":")
    return host, int(port)


def answered(s: MeteredSession) -> int:
    """A call an honest agent makes: the proxy still serves."""
    conn = http.client.HTTPConnection(*address(s), timeout=30)
    body = {"model": "claude-sonnet-4-5", "messages": [{"role": "user", "content": "hi"}]}
    conn.request("POST", "/v1/messages", body=json.dumps(body))
    status = conn.getresponse().status
    conn.close()
    return status


def refused_unread(s: MeteredSession, head: bytes) -> bytes:
    """Send `head`; what the proxy answers before anything more is sent. Then the agent
    goes on sending (80 MiB): the connection is closed on it long before."""
    with socket.create_connection(address(s), timeout=30) as sock:
        sock.sendall(b"POST /v1/messages HTTP/1.1\r\nHost: x\r\n" + head)
        reply = sock.recv(4096)
        sent = 0
        with pytest.raises(OSError):
            while sent < 80 << 20:
                sock.sendall(b"x" * 65536)
                sent += 65536
        return reply


@pytest.mark.parametrize(
    "head",
    [
        b"Transfer-Encoding: chunked\r\n\r\n-1\r\n",
        b"Transfer-Encoding: chunked\r\n\r\n-0\r\n",
        b"Transfer-Encoding: chunked\r\n\r\n" + b"F" * 16 + b"\r\n",
        b"Transfer-Encoding: chunked\r\n\r\n10;" + b"e" * 8000 + b"\r\n",
        b"Content-Length: 100000000000\r\n\r\n",
        b"Transfer-Encoding: identity\r\n\r\n",
    ],
)
def test_the_proxy_refuses_a_bad_framing_before_reading_on(
    session: MeteredSession, head: bytes
) -> None:
    """The proxy answers and closes at once; what the agent goes on sending is never read (the
    reported `-1` chunk size had it read 80 MiB past its 64 MiB limit)."""
    reply = refused_unread(session, head)
    assert reply.split()[1] in (b"400", b"413", b"501"), reply
    assert answered(session) == 200
    assert session.meter.drain(30) == 0
    assert [c.api for c in session.meter.calls] == ["anthropic"]


def test_connections_over_the_limit_are_refused_and_noted(
    session: MeteredSession, monkeypatch: pytest.MonkeyPatch
) -> None:
    """600 connections to the proxy gave optarena's process a thread each. At most
    MAX_CONNECTIONS are served at once; the rest are answered 503 and closed, and the trial's
    outcome says how many."""
    monkeypatch.setattr(_server, "MAX_CONNECTIONS", 8)
    before = threading.active_count()
    idle = [socket.create_connection(address(session), timeout=30) for _ in range(60)]
    try:
        refused = 0
        for sock in idle:
            sock.settimeout(0.5)
            try:
                got = sock.recv(4096)
            except TimeoutError:
                continue  # served: waiting for its request
            refused += 1
            assert got == b"" or got.startswith(b"HTTP/1.1 503")
        assert refused == 52
        assert threading.active_count() <= before + 8
        assert session.meter.refused_connections == 52
    finally:
        for sock in idle:
            sock.close()
    deadline = time.monotonic() + 30
    while answered_or_none(session) != 200:
        assert time.monotonic() < deadline  # the slots free as the connections close
    # A probe made before the closed connections' slots were freed is itself refused (and
    # counted): the note says the count as it stands, which is at least the 52.
    refused_in_all = session.meter.refused_connections
    assert refused_in_all >= 52
    note = f"refused {refused_in_all} connection(s) over its limit of 8"
    assert any(note in n for n in session.notes()), session.notes()


def answered_or_none(s: MeteredSession) -> int | None:
    try:
        return answered(s)
    except (OSError, http.client.HTTPException):
        time.sleep(0.05)
        return None


@pytest.mark.parametrize("trickle", [b"POST /v1/messages HTTP/1.1\r\nHost: x\r\n", b""])
def test_a_request_trickled_in_or_never_sent_is_closed_at_its_deadline(
    session: MeteredSession, monkeypatch: pytest.MonkeyPatch, trickle: bytes
) -> None:
    """Slowloris: a header byte every 0.1 s keeps each read alive but not the request; an
    idle kept-alive connection ends too. Either frees its slot."""
    monkeypatch.setattr(proxy_handler, "REQUEST_S", 1.0)
    monkeypatch.setattr(proxy_handler, "IDLE_S", 1.0)
    with socket.create_connection(address(session), timeout=30) as sock:
        t0 = time.monotonic()
        closed = False
        for byte in [trickle[i : i + 1] for i in range(len(trickle))] + [b"X-"] * 600:
            try:
                sock.sendall(byte)
                time.sleep(0.1)
                sock.setblocking(False)
                closed = sock.recv(4096) == b""
            except BlockingIOError:
                pass
            except OSError:
                closed = True
            finally:
                sock.setblocking(True)
            if closed:
                break
        assert closed
        assert time.monotonic() - t0 < 60
    assert answered(session) == 200


@pytest.mark.parametrize(
    "head",
    [b"".join(b"X-%d: y\r\n" % i for i in range(101)), b"X-Long: " + b"y" * 70_000 + b"\r\n"],
)
def test_too_many_or_too_long_headers_are_refused(session: MeteredSession, head: bytes) -> None:
    with socket.create_connection(address(session), timeout=30) as sock:
        sock.sendall(b"POST /v1/messages HTTP/1.1\r\nHost: x\r\n" + head + b"\r\n")
        assert sock.recv(4096).split()[1] == b"431"
    assert answered(session) == 200
