"""The metering proxy over real HTTP, in front of the scripted model server: every API,
streamed and not; refusals; upstream failures; keys never stored."""

from __future__ import annotations

import http.client
import json
import socket
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from optarena.fakemodel import USAGE, Conversation, FakeModelServer, Reply, Script, make_script
from optarena.proxy import MeteredSession, ProxyLimits
from optarena.records import CallRecord

SECRET = "sk-test-very-secret-123"
PATHS = {"anthropic": "/v1/messages", "responses": "/v1/responses", "chat": "/v1/chat/completions"}


def body(api: str, stream: bool) -> dict[str, Any]:
    msgs = [{"role": "user", "content": "hello"}]
    if api == "responses":
        return {"model": "gpt-5", "input": "hello", "stream": stream}
    out: dict[str, Any] = {"model": "claude-sonnet-4-5", "messages": msgs, "stream": stream}
    if api == "chat":
        out |= {"model": "gpt-5", "stream_options": {"include_usage": True}}
    return out


def post(url: str, path: str, data: dict[str, Any]) -> tuple[int, bytes, dict[str, str]]:
    host, port = url.removeprefix("http://").split(":")
    conn = http.client.HTTPConnection(host, int(port), timeout=10)
    headers = {"content-type": "application/json", "x-api-key": SECRET}
    headers["authorization"] = f"Bearer {SECRET}"
    conn.request("POST", path, body=json.dumps(data), headers=headers)
    resp = conn.getresponse()
    raw = resp.read()
    conn.close()
    return resp.status, raw, dict(resp.getheaders())


@pytest.fixture
def fake() -> Iterator[FakeModelServer]:
    with FakeModelServer(make_script("hello")) as server:
        yield server


@pytest.mark.parametrize("stream", [False, True])
@pytest.mark.parametrize("api", ["anthropic", "responses", "chat"])
def test_every_api_is_forwarded_and_metered(
    fake: FakeModelServer, tmp_path: Path, api: str, stream: bool
) -> None:
    with MeteredSession(fake.url, ProxyLimits(), tmp_path / "calls.jsonl") as s:
        status, raw, headers = post(s.url, PATHS[api], body(api, stream))
    assert status == 200
    text = raw.decode()
    assert "Hello from the optarena scripted model." in text
    if stream:
        assert "data: " in text and headers.get("content-type") == "text/event-stream"
    [c] = s.meter.calls
    want = USAGE["chat"]
    assert (c.api, c.status, c.stream) == (api, 200, stream)
    assert (c.input_tokens, c.output_tokens) == (want.input, want.output)
    assert c.request_id and c.request_id.startswith("req_fake_")
    assert c.reply_id and c.latency_s is not None and c.ttfb_s is not None
    assert s.usage().calls == 1
    [served] = fake.served
    assert served.tokens is not None
    assert (served.tokens["input"], served.tokens["output"]) == (c.input_tokens, c.output_tokens)


def test_limits_refuse_with_an_api_error_the_agent_sees(
    fake: FakeModelServer, tmp_path: Path
) -> None:
    with MeteredSession(fake.url, ProxyLimits(max_calls=1), tmp_path / "c.jsonl") as s:
        assert post(s.url, PATHS["anthropic"], body("anthropic", True))[0] == 200
        status, raw, _ = post(s.url, PATHS["anthropic"], body("anthropic", True))
    assert status == 400
    err = json.loads(raw)["error"]
    assert err["type"] == "invalid_request_error"
    assert err["message"].startswith("optarena proxy: call budget exhausted (1 of 1 calls made)")
    assert len(fake.served) == 1  # the refused call never reached the upstream
    assert s.refusals and s.usage().calls == 1


def test_upstream_errors_pass_through_and_are_recorded(tmp_path: Path) -> None:
    with (
        FakeModelServer(make_script("upstream-error")) as bad,
        MeteredSession(bad.url, ProxyLimits(), tmp_path / "c.jsonl") as s,
    ):
        status, raw, _ = post(s.url, PATHS["responses"], body("responses", True))
    assert status == 500 and b"scripted upstream failure" in raw
    [c] = s.meter.calls
    assert c.status == 500 and c.error and "scripted upstream failure" in c.error
    assert c.input_tokens is None  # a failed call spent nothing we know of
    assert s.usage().cost_usd == 0


def test_unreachable_upstream_is_a_502_in_the_clients_dialect(tmp_path: Path) -> None:
    with MeteredSession("http://127.0.0.1:9", ProxyLimits(), tmp_path / "c.jsonl") as s:
        status, raw, _ = post(s.url, PATHS["anthropic"], body("anthropic", False))
    assert status == 502
    assert json.loads(raw)["type"] == "error"
    assert s.meter.calls[0].error and "unreachable" in s.meter.calls[0].error


def test_calls_come_back_as_records_and_keys_are_never_stored(
    fake: FakeModelServer, tmp_path: Path
) -> None:
    log = tmp_path / "calls.jsonl"
    with MeteredSession(fake.url, ProxyLimits(), log) as s:
        for api in PATHS:
            post(s.url, PATHS[api], body(api, True))
    rows = s.calls  # the trial records them (tests/ledger/test_ledger_calls.py)
    assert [r.api for r in rows] == ["anthropic", "responses", "chat"]
    assert all(isinstance(r, CallRecord) and r.input_tokens == 12 for r in rows)
    assert SECRET not in repr(rows) and SECRET not in log.read_text()
    logged = [CallRecord.model_validate_json(line) for line in log.read_text().splitlines()]
    assert sorted(logged, key=lambda c: c.seq) == rows  # the log is in the order of recording


def test_calls_come_back_in_arrival_order_whatever_order_they_were_recorded_in(
    fake: FakeModelServer, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A reply reaches the client before its record is written, so the client's next call
    can be recorded first (the order assertion of the test above once failed on it in CI).
    Here the first call's record is held back until the last one's is written."""
    with MeteredSession(fake.url, ProxyLimits(), tmp_path / "calls.jsonl") as s:
        record, last_written = s.meter.record, threading.Event()

        def late_first(call: CallRecord) -> None:
            if call.seq != 1:
                record(call)
                if call.seq == len(PATHS):
                    last_written.set()
                return

            def later() -> None:
                last_written.wait(10)
                record(call)

            threading.Thread(target=later).start()

        monkeypatch.setattr(s.meter, "record", late_first)
        for api in PATHS:
            post(s.url, PATHS[api], body(api, True))
    assert [c.seq for c in s.meter.calls] == [2, 3, 1]  # the order they were recorded in
    assert [(c.seq, c.api) for c in s.calls] == [(1, "anthropic"), (2, "responses"), (3, "chat")]


def test_calls_route_to_their_providers_upstream(tmp_path: Path) -> None:
    with (
        FakeModelServer(make_script("hello")) as anthropic,
        FakeModelServer(make_script("hello")) as openai,
        MeteredSession(
            {"anthropic": anthropic.url, "openai": openai.url}, ProxyLimits(), tmp_path / "c.jsonl"
        ) as s,
    ):
        for api in PATHS:
            status, _, _ = post(s.url, PATHS[api], body(api, False))
            assert status == 200
    assert len(anthropic.served) == 1 and len(openai.served) == 2
    # one call after the other, yet CI once recorded the third before the second (the
    # client has its answer before the record is appended): which calls, not their order
    assert sorted(c.api for c in s.calls) == ["anthropic", "chat", "responses"]


class _SlowHello(Script):
    """Answers after a pause, so a call is still in flight when the session stops."""

    name = "slow-hello"

    def __init__(self) -> None:
        self.asked = threading.Semaphore(0)  # released once per request that reached it

    def decide(self, conv: Conversation) -> Reply:
        self.asked.release()
        return Reply("chat", USAGE["chat"], text="late", delay_s=0.5)


def test_stopping_waits_for_calls_in_flight_and_a_hung_up_call_is_recorded(
    tmp_path: Path,
) -> None:
    """The reply reaches the agent before its record is written, and an agent may hang up
    (or exit) at once: neither may lose the call from the trial's records."""
    script = _SlowHello()
    with FakeModelServer(script) as slow:
        s = MeteredSession(slow.url, ProxyLimits(), tmp_path / "c.jsonl").__enter__()
        host, port = s.url.removeprefix("http://").split(":")
        raw = json.dumps(body("anthropic", True)).encode()
        head = f"POST /v1/messages HTTP/1.1\r\nHost: x\r\nContent-Length: {len(raw)}\r\n"
        hang_up = socket.create_connection((host, int(port)))
        hang_up.sendall(head.encode() + b"content-type: application/json\r\n\r\n" + raw)
        hang_up.close()  # gone before the upstream answers
        ask = (s.url, PATHS["anthropic"], body("anthropic", False))
        waiting = threading.Thread(target=post, args=ask)
        waiting.start()
        for _ in range(2):  # both calls reached the upstream; their replies are 0.5 s away
            assert script.asked.acquire(timeout=30)
        assert not slow.served
        s.__exit__(None, None, None)
        calls = s.calls  # what the trial records, read as soon as the session stops
        waiting.join()
    assert sorted(c.stream for c in calls) == [False, True]
    assert all(c.status == 200 for c in calls)
    assert len((tmp_path / "c.jsonl").read_text().splitlines()) == 2


def test_an_endpoint_the_proxy_cannot_meter_is_refused_not_forwarded(
    fake: FakeModelServer, tmp_path: Path
) -> None:
    """Legacy completions, embeddings, batches: forwarded unmetered, an agent could spend
    through them outside every budget. Model listing and token counting spend nothing."""
    with MeteredSession(fake.url, ProxyLimits(max_calls=5), tmp_path / "c.jsonl") as s:
        ambiguous = (
            "/v1/completions#/messages",
            "/v1/completions%3F/messages",
            "/v1/x/../messages",
        )
        for path in ambiguous:  # an upstream might route these elsewhere than their text says
            assert post(s.url, path, body("anthropic", False))[0] == 400
        for path in ("/v1/completions", "/v1/messages/batches", "/v1/embeddings"):
            status, raw, _ = post(s.url, path, {"model": "gpt-5", "prompt": "hi"})
            assert status == 400 and b"not an API the proxy meters" in raw
        post(s.url, "/v1/messages/count_tokens", body("anthropic", False))
        host, port = s.url.removeprefix("http://").split(":")
        conn = http.client.HTTPConnection(host, int(port), timeout=10)
        conn.request("HEAD", "/")  # Claude Code's connectivity check: a read, forwarded
        conn.getresponse().read()
        conn.close()
    assert fake.served == []  # no reply was generated (the scripted server counts tokens)
    counted = [c for c in s.meter.calls if c.path == "/v1/messages/count_tokens"]
    assert [(c.api, c.refused, c.status) for c in counted] == [("other", None, 200)]
    refused = [c for c in s.meter.calls if c.refused]
    # Each refused once, in any order: a call is recorded once its reply is out, so under load
    # the next request's record can come first.
    unmetered = ["/v1/completions", "/v1/messages/batches", "/v1/embeddings"]
    assert len(refused) == len(ambiguous) + len(unmetered)
    assert sorted(c.path for c in refused if c.path in unmetered) == sorted(unmetered)
    assert s.meter.refusals == 0 and s.refusals == []  # not a budget: no budget_exceeded
    assert sorted(p for p in s.unmetered_refused if p in unmetered) == sorted(unmetered)
    assert len(s.unmetered_refused) == len(ambiguous) + len(unmetered)


def test_a_budget_that_an_unknown_count_would_break_is_kept_by_refusing(
    fake: FakeModelServer, tmp_path: Path
) -> None:
    """Unknown is not zero: a Chat Completions stream without include_usage reports no tokens,
    so under a token budget the next call is refused; under a cost budget a model without a
    price is refused before anything is spent."""
    bare_stream = body("chat", True)
    del bare_stream["stream_options"]
    with MeteredSession(fake.url, ProxyLimits(max_tokens=10**9), tmp_path / "t.jsonl") as s:
        assert post(s.url, PATHS["chat"], bare_stream)[0] == 200
        status, raw, _ = post(s.url, PATHS["chat"], bare_stream)
    assert status == 400 and b"call 1's token count is unknown (the stream carried no usage" in raw
    assert s.meter.calls[0].input_tokens is None and len(fake.served) == 1
    unpriced = {**body("anthropic", False), "model": "model-nobody-prices"}
    with MeteredSession(fake.url, ProxyLimits(max_cost_usd=5.0), tmp_path / "u.jsonl") as s:
        status, raw, _ = post(s.url, PATHS["anthropic"], unpriced)
        assert post(s.url, PATHS["anthropic"], body("anthropic", False))[0] == 200  # priced
    assert status == 400 and b"no price for model 'model-nobody-prices'" in raw
    assert len(fake.served) == 2  # the unpriced call never reached the upstream


def test_an_oversized_or_malformed_request_is_refused_unread(
    fake: FakeModelServer, tmp_path: Path
) -> None:
    """The proxy reads a request into optarena's own memory, which no agent limit bounds: a
    body announced past the cap is refused before any of it is read, a malformed one is a 400,
    and the proxy keeps serving."""
    with MeteredSession(fake.url, ProxyLimits(), tmp_path / "c.jsonl") as s:
        host, port = s.url.removeprefix("http://").split(":")
        for head in (
            b"Content-Length: 100000000000\r\n\r\n{",
            b"Transfer-Encoding: chunked\r\n\r\nzz\r\n",
        ):
            with socket.create_connection((host, int(port)), timeout=10) as raw:
                raw.sendall(b"POST /v1/messages HTTP/1.1\r\nHost: x\r\n" + head)
                reply = raw.recv(4096)
            assert reply.split()[1] in (b"413", b"400"), reply
        assert post(s.url, PATHS["anthropic"], body("anthropic", False))[0] == 200
    assert [c.api for c in s.meter.calls] == ["anthropic"]
