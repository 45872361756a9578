"""Streams that end early, through the real proxy: the agent hangs up, the upstream hangs up
or stalls, the final usage event does not parse or lies, the proxy stops with a stream in
flight. A stream whose final usage did not arrive is unknown (its partial counts a lower
bound, never the count), and a token or cost budget refuses the next call instead of
counting it small."""

from __future__ import annotations

import contextlib
import http.client
import json
import socket
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from optarena.fakemodel import FakeModelServer, LongStreamScript, WireFault
from optarena.proxy import MeteredSession, ProxyLimits, total_tokens

# private: monkeypatched (a shorter drain)
from optarena.proxy import _handler as proxy_handler
from optarena.records import CallRecord

PATHS = {"anthropic": "/v1/messages", "responses": "/v1/responses", "chat": "/v1/chat/completions"}
APIS = list(PATHS)
# priced in the shipped table, so a call's cost is known when its counts are
MODEL = {"anthropic": "claude-sonnet-4-5", "responses": "gpt-5-mini", "chat": "gpt-5-mini"}
DEARER = {"anthropic": "claude-opus-4-1", "responses": "gpt-5", "chat": "gpt-5"}


def long_stream(wire: WireFault | None = None, delay_s: float = 0.0) -> LongStreamScript:
    """A 40-piece reply of 7,000 output tokens, going wrong on the wire as told."""
    return LongStreamScript(wire or WireFault(event_delay_s=delay_s))


def request(api: str, stream: bool = True) -> bytes:
    body: dict[str, Any] = {"model": MODEL[api], "stream": stream}
    if api == "responses":
        body["input"] = "write a lot"
    else:
        body["messages"] = [{"role": "user", "content": "write a lot"}]
    if api == "chat":
        body["stream_options"] = {"include_usage": True}
    raw = json.dumps(body).encode()
    head = (
        f"POST {PATHS[api]} HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
        f"Content-Length: {len(raw)}\r\n\r\n"
    )
    return head.encode() + raw


def address(url: str) -> tuple[str, int]:
    host, port = url.removeprefix("http://").split(":")
    return host, int(port)


def read_then_hang_up(url: str, api: str, deltas: int) -> int:
    """Send a streamed call, read until `deltas` text deltas have come, hang up. Returns how
    many bytes it read."""
    marker = {"anthropic": b"content_block_delta", "responses": b"output_text.delta"}
    want = marker.get(api, b'"finish_reason":null')
    with socket.create_connection(address(url), timeout=30) as sock:
        sock.sendall(request(api))
        got = b""
        while got.count(want) < deltas:
            piece = sock.recv(4096)
            assert piece, "the stream ended before the agent hung up"
            got += piece
    return len(got)


def call_whole(url: str, api: str) -> tuple[int, bytes]:
    """A streamed call read to its end, as an honest agent does."""
    conn = http.client.HTTPConnection(*address(url), timeout=30)
    body = request(api).partition(b"\r\n\r\n")[2]
    conn.request("POST", PATHS[api], body=body, headers={"content-type": "application/json"})
    resp = conn.getresponse()
    data = resp.read()
    conn.close()
    return resp.status, data


def settled(s: MeteredSession) -> None:
    """Wait until the proxy has recorded every call (a reply reaches the agent just before
    its record is written; a budget counts recorded calls)."""
    assert s.meter.drain(30) == 0


def only_call(s: MeteredSession) -> CallRecord:
    [c] = s.meter.calls
    return c


@pytest.mark.parametrize("api", APIS)
def test_an_agent_hanging_up_mid_stream_does_not_make_the_call_small(
    tmp_path: Path, api: str
) -> None:
    """The reported attack: 30 of 40 chunks read, then the agent hangs up. The proxy reads the
    rest of the stream for its final usage: the call counts its 7,000 output tokens, and a
    1,000-token budget refuses the next call."""
    with (
        FakeModelServer(long_stream(delay_s=0.005)) as fake,
        MeteredSession(fake.url, ProxyLimits(max_tokens=1000), tmp_path / "c.jsonl") as s,
    ):
        read_then_hang_up(s.url, api, 30)
        status, raw = call_whole(s.url, api)  # at once: admitted only once call 1 is counted
    first = s.meter.calls[0]
    assert first.error and first.error.startswith("client disconnected")
    assert (first.input_tokens, first.output_tokens) == (1000, 7000)
    assert first.cost_usd is not None and first.cost_usd > 0.01  # 7,000 output tokens
    assert status == 400 and b"token budget exhausted (8200 of 1000 tokens used)" in raw
    assert len(fake.served) == 1


@pytest.mark.parametrize("api", APIS)
def test_a_hung_up_stream_whose_rest_never_comes_is_unknown_and_stops_a_budget(
    tmp_path: Path, api: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The agent hangs up and the upstream then stalls: after DRAIN_S the proxy gives up on
    the final usage. The count is unknown, what the stream reported is a lower bound, and a
    token budget refuses the next call, saying why."""
    monkeypatch.setattr(proxy_handler, "DRAIN_S", 0.5)
    stall = long_stream(WireFault(stall_after=35, event_delay_s=0.02))  # paced: the proxy
    # is still writing when the agent hangs up, so it learns the agent is gone
    with (
        FakeModelServer(stall) as fake,
        MeteredSession(fake.url, ProxyLimits(max_tokens=10**9), tmp_path / "c.jsonl") as s,
    ):
        read_then_hang_up(s.url, api, 20)
        settled(s)
        status, raw = call_whole(s.url, api)
    first = s.meter.calls[0]
    assert total_tokens(first) is None and first.output_tokens is None
    assert first.usage_note == (
        "the agent hung up and the rest did not come within 0.5 s before its final usage event"
    )
    if api == "anthropic":  # message_start gave the input counts and 1 output token
        assert first.tokens_at_least == 1000 + 200 + 1
    else:
        assert first.tokens_at_least == 0
    assert first.cost_usd is None and first.cost_usd_at_least is not None
    assert status == 400 and b"call 1's token count is unknown" in raw
    usage = s.usage()
    assert usage.output_tokens is None and usage.cost_usd is None
    assert usage.tokens_at_least == first.tokens_at_least
    assert any("token counts unknown for call(s) 1" in n for n in s.notes())


@pytest.mark.parametrize("api", APIS)
@pytest.mark.parametrize("cut_after", [3, 30, -1])
def test_an_upstream_hanging_up_mid_stream_leaves_the_count_unknown(
    tmp_path: Path, api: str, cut_after: int
) -> None:
    cut = long_stream(WireFault(cut_after=cut_after if cut_after > 0 else 10**6 - 1))
    if cut_after < 0:  # every event sent, the stream's end (a zero chunk) never
        cut = long_stream(WireFault(events=lambda evs: [*evs[:-1]], cut_after=None))
    with (
        FakeModelServer(cut) as fake,
        MeteredSession(fake.url, ProxyLimits(max_cost_usd=100.0), tmp_path / "c.jsonl") as s,
    ):
        _tolerant(call_whole, s.url, api)
        settled(s)
        status, raw = call_whole(s.url, api)
    first = s.meter.calls[0]
    assert total_tokens(first) is None and first.cost_usd is None
    assert first.usage_note is not None and "before its final usage event" in first.usage_note
    assert status == 400 and b"call 1 has no known cost" in raw
    assert len(fake.served) == 1


def _tolerant(fn: Callable[..., Any], *args: Any) -> None:
    """Call `fn`; a stream the upstream broke off may end in an error on the agent's side."""
    with contextlib.suppress(http.client.HTTPException, OSError):
        fn(*args)


def _lie(api: str, edit: Callable[[dict[str, Any]], None]) -> Callable[[list[bytes]], list[bytes]]:
    """Rewrite the final usage event of `api`'s stream with `edit`."""
    marker = {"anthropic": b"message_delta", "responses": b"response.completed"}.get(
        api, b'"usage"'
    )

    def events(evs: list[bytes]) -> list[bytes]:
        i = max(n for n, ev in enumerate(evs) if marker in ev)
        head, _, data = evs[i].partition(b"data: ")
        obj = json.loads(data)
        usage = obj["response"]["usage"] if api == "responses" else obj["usage"]
        edit(usage)
        evs[i] = head + b"data: " + json.dumps(obj).encode() + b"\n\n"
        return evs

    return events


OUT = {"anthropic": "output_tokens", "responses": "output_tokens", "chat": "completion_tokens"}


@pytest.mark.parametrize("api", APIS)
@pytest.mark.parametrize("lie", [-7000, 7000.0, "7000", 10**15, None])
def test_a_final_usage_that_lies_or_lacks_output_is_unknown(
    tmp_path: Path, api: str, lie: Any
) -> None:
    def edit(usage: dict[str, Any]) -> None:
        if lie is None:
            del usage[OUT[api]]
        else:
            usage[OUT[api]] = lie

    wire = WireFault(events=_lie(api, edit))
    with (
        FakeModelServer(long_stream(wire)) as fake,
        MeteredSession(fake.url, ProxyLimits(max_tokens=10**9), tmp_path / "c.jsonl") as s,
    ):
        assert call_whole(s.url, api)[0] == 200
        settled(s)
        status, raw = call_whole(s.url, api)
    first = s.meter.calls[0]
    assert first.output_tokens is None and total_tokens(first) is None
    assert first.tokens_at_least is not None and first.tokens_at_least >= 1000
    assert first.usage_note is not None
    assert status == 400 and b"call 1's token count is unknown" in raw
    assert len(fake.served) == 1


@pytest.mark.parametrize("api", APIS)
def test_a_reply_from_a_dearer_model_is_priced_as_the_dearer(tmp_path: Path, api: str) -> None:
    """The asked model is cheap, the reply says another: the call costs the dearer price,
    with a note; a model without a price makes the cost unknown."""

    def other(model: str) -> Callable[[list[bytes]], list[bytes]]:
        old = f'"model":"{MODEL[api]}"'.encode()
        return lambda evs: [ev.replace(old, f'"model":"{model}"'.encode()) for ev in evs]

    costs = {}
    for reply_model in (MODEL[api], DEARER[api], "model-nobody-prices"):
        wire = WireFault(events=other(reply_model))
        with (
            FakeModelServer(long_stream(wire)) as fake,
            MeteredSession(fake.url, ProxyLimits(), tmp_path / "c.jsonl") as s,
        ):
            assert call_whole(s.url, api)[0] == 200
        costs[reply_model] = only_call(s)
    same, dearer, unpriced = costs.values()
    assert same.cost_usd is not None and same.usage_note is None
    assert dearer.cost_usd is not None and dearer.cost_usd > same.cost_usd
    assert dearer.usage_note == f"the reply is from model {DEARER[api]!r}: priced as the dearer"
    assert unpriced.cost_usd is None and unpriced.output_tokens == 7000


@pytest.mark.parametrize("api", APIS)
def test_a_stream_that_never_ends_is_cut_at_the_stop_and_recorded(tmp_path: Path, api: str) -> None:
    """An agent still reading a stream that never ends when its run ends: stopping the proxy
    cuts it, and the call is recorded as cut off, its count unknown. Nothing is lost."""
    with FakeModelServer(long_stream(WireFault(stall_after=20))) as fake:
        s = MeteredSession(fake.url, ProxyLimits(), tmp_path / "c.jsonl").__enter__()
        reader = threading.Thread(target=_tolerant, args=(call_whole, s.url, api))
        reader.start()
        while not fake.served and not s.meter._in_flight:
            threading.Event().wait(0.02)
        s.proxy.stop(drain_s=0.2)
        reader.join(30)
        assert not reader.is_alive()
    c = only_call(s)
    assert c.error and c.error.startswith("cut off: the proxy stopped")
    assert total_tokens(c) is None and c.usage_note is not None
    assert len((tmp_path / "c.jsonl").read_text().splitlines()) == 1


def test_an_upstream_that_never_answers_is_cut_at_the_stop_and_its_spending_unknown(
    tmp_path: Path,
) -> None:
    """The request went out and no reply came: the upstream may have spent on it, so the
    call is not a measured zero."""
    with socket.socket() as silent:
        silent.bind(("127.0.0.1", 0))
        silent.listen(8)
        url = f"http://127.0.0.1:{silent.getsockname()[1]}"
        s = MeteredSession(url, ProxyLimits(max_tokens=10**6), tmp_path / "c.jsonl").__enter__()
        reader = threading.Thread(target=_tolerant, args=(call_whole, s.url, "anthropic"))
        reader.start()
        conn, _ = silent.accept()
        s.proxy.stop(drain_s=0.2)
        reader.join(30)
        conn.close()
    c = only_call(s)
    assert c.status is None and c.usage_note is not None
    assert "what it spent is unknown" in c.usage_note or "no reply" in c.usage_note
    assert s.usage().input_tokens is None and s.usage().tokens_at_least == 0


def test_a_whole_reply_the_upstream_breaks_off_is_a_502_and_unknown(tmp_path: Path) -> None:
    """A non-streamed reply cut mid-body by the upstream: the agent gets a 502 (never a
    traceback on the handler thread), the call's count is unknown."""
    with socket.socket() as up:
        up.bind(("127.0.0.1", 0))
        up.listen(8)
        url = f"http://127.0.0.1:{up.getsockname()[1]}"

        def serve() -> None:
            conn, _ = up.accept()
            conn.recv(65536)
            conn.sendall(
                b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\n"
                b'Content-Length: 1000\r\n\r\n{"usage": {"input_tokens": 5'
            )
            conn.close()

        server = threading.Thread(target=serve)
        server.start()
        with MeteredSession(url, ProxyLimits(), tmp_path / "c.jsonl") as s:
            conn = http.client.HTTPConnection(*address(s.url), timeout=30)
            conn.request("POST", "/v1/messages", body=b'{"model": "m"}')
            resp = conn.getresponse()
            assert resp.status == 502 and b"mid-reply" in resp.read()
            conn.close()
        server.join()
    c = only_call(s)
    assert c.status == 200 and total_tokens(c) is None and c.tokens_at_least == 0
    assert c.usage_note and c.usage_note.startswith("the upstream failed mid-reply")


def test_calls_side_by_side_under_a_budget_are_counted_one_after_the_other(
    tmp_path: Path,
) -> None:
    """Under a token budget a call waits until the calls before it are counted, so the budget
    is checked against known counts: parallel honest calls all succeed, in turn."""
    results: list[int] = []
    with (
        FakeModelServer(long_stream(delay_s=0.002)) as fake,
        MeteredSession(fake.url, ProxyLimits(max_tokens=10**6), tmp_path / "c.jsonl") as s,
    ):
        threads = [
            threading.Thread(target=lambda: results.append(call_whole(s.url, "chat")[0]))
            for _ in range(3)
        ]
        for t in threads:
            t.start()
        for t in threads:
            t.join(60)
    assert results == [200, 200, 200]
    assert s.usage().output_tokens == 3 * 7000 and s.meter.refusals == 0


def test_a_call_waiting_for_admission_when_the_run_ends_is_refused_not_forwarded(
    tmp_path: Path,
) -> None:
    with FakeModelServer(long_stream(WireFault(stall_after=5))) as fake:
        s = MeteredSession(fake.url, ProxyLimits(max_tokens=10**6), tmp_path / "c.jsonl")
        s.__enter__()
        first = threading.Thread(target=_tolerant, args=(call_whole, s.url, "anthropic"))
        first.start()
        while not fake.served and not s.meter._in_flight:
            threading.Event().wait(0.02)
        second = threading.Thread(target=_tolerant, args=(call_whole, s.url, "anthropic"))
        second.start()
        while len(s.meter._in_flight) < 2:
            threading.Event().wait(0.02)
        s.proxy.stop(drain_s=0.2)
        first.join(30)
        second.join(30)
    one, two = sorted(s.meter.calls, key=lambda c: c.seq)
    assert one.error and one.error.startswith("cut off: the proxy stopped")
    assert two.refused == "the run has ended" and two.status == 400
    assert len(fake.served) <= 1  # the second never reached the upstream


@pytest.mark.parametrize("stream", [True, False])
def test_an_agent_gone_before_the_reply_starts_still_has_its_call_counted(
    tmp_path: Path, stream: bool
) -> None:
    """Hung up before the upstream answered: writing the reply's head fails, and the proxy
    still reads the whole reply for its usage."""
    with (
        FakeModelServer(LongStreamScript(delay_s=0.3)) as fake,
        MeteredSession(fake.url, ProxyLimits(), tmp_path / "c.jsonl") as s,
    ):
        with socket.create_connection(address(s.url), timeout=30) as sock:
            sock.sendall(request("anthropic", stream))
        deadline = time.monotonic() + 30
        while not fake.served:  # the upstream has sent the whole reply
            assert time.monotonic() < deadline
            time.sleep(0.02)
        settled(s)
    c = only_call(s)
    assert (c.input_tokens, c.output_tokens) == (1000, 7000) and c.cost_usd is not None
    assert c.error and c.error.startswith("client disconnected")
