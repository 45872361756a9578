"""Usage read from each API's replies: literal numbers, one convention; and every way a reply
can fail to say what it used (a stream cut early, a final event that does not parse, a count
that lies, two final events, another model) leaves the count unknown, with what was reported
on the way kept as a lower bound, never as the count."""

from __future__ import annotations

import json
from typing import Any

import pytest

from optarena.fakemodel import Reply, render
from optarena.proxy import ApiKind, CallTokens, ReplyUsage, SseUsage, reply_usage, sse_event

# private: the proxy's token arithmetic, on literal replies
from optarena.proxy._usage import tokens_from_reply

LONG = CallTokens(input=1000, output=7000, cache_read=200, cache_write=0, reasoning=0)


def stream(api: ApiKind, pieces: int = 40, usage: CallTokens = LONG) -> list[bytes]:
    """The events of a long streamed text reply, as the scripted model sends them."""
    body = {"stream_options": {"include_usage": True}}
    reply = Reply("long", usage, text="x" * 4000, pieces=pieces)
    return render(api, reply, "claude-sonnet-4-5", True, body)[1]


def read(api: ApiKind, events: list[bytes], cut: str | None = None) -> ReplyUsage:
    tracker = SseUsage(api)
    for ev in events:
        tracker.feed(ev)
    return tracker.result(cut)


def test_openai_cached_and_reasoning_are_split_once() -> None:
    responses = {
        "usage": {
            "input_tokens": 1000,
            "input_tokens_details": {"cached_tokens": 600},
            "output_tokens": 300,
            "output_tokens_details": {"reasoning_tokens": 120},
        }
    }
    assert tokens_from_reply("responses", responses) == CallTokens(400, 300, 600, None, 120)
    chat = {
        "usage": {
            "prompt_tokens": 50,
            "prompt_tokens_details": {"cached_tokens": 20},
            "completion_tokens": 7,
        }
    }
    assert tokens_from_reply("chat", chat) == CallTokens(30, 7, 20, None, None)


def test_anthropic_counts_are_already_split() -> None:
    reply = {
        "usage": {
            "input_tokens": 10,
            "output_tokens": 5,
            "cache_read_input_tokens": 100,
            "cache_creation_input_tokens": 40,
        }
    }
    t = tokens_from_reply("anthropic", reply)
    assert t == CallTokens(10, 5, 100, 40, None)
    assert t is not None and t.total() == 155


def test_no_usage_is_unknown_and_a_partial_one_has_no_total() -> None:
    assert tokens_from_reply("responses", {"id": "x"}) is None
    assert CallTokens().total() is None
    partial = reply_usage("responses", {"usage": {"input_tokens": 70}})
    assert partial.tokens == CallTokens(70, None, None, None, None)
    assert partial.tokens.total() is None and partial.tokens.known_sum() == 70
    assert partial.note == "the reply's usage has no input or output count"


def test_anthropic_stream_final_counts_from_message_delta_in_odd_pieces() -> None:
    start = {
        "type": "message_start",
        "message": {
            "id": "msg_1",
            "model": "m",
            "usage": {"input_tokens": 9, "cache_read_input_tokens": 3, "output_tokens": 1},
        },
    }
    delta = {"type": "message_delta", "delta": {}, "usage": {"output_tokens": 42}}
    raw = sse_event(start, "message_start") + sse_event(delta, "message_delta")
    raw += sse_event({"type": "message_stop"}, "message_stop")
    tracker = SseUsage("anthropic")
    for i in range(0, len(raw), 7):  # the network may cut anywhere
        tracker.feed(raw[i : i + 7])
    assert tracker.tokens == CallTokens(9, 42, 3, None, None)
    assert (tracker.reply_id, tracker.model) == ("msg_1", "m")


def test_responses_stream_usage_from_completed_and_crlf_framing() -> None:
    done = {
        "type": "response.completed",
        "response": {
            "id": "resp_1",
            "model": "gpt",
            "usage": {"input_tokens": 5, "output_tokens": 2},
        },
    }
    tracker = SseUsage("responses")
    tracker.feed(sse_event(done, "response.completed").replace(b"\n", b"\r\n"))
    assert tracker.tokens == CallTokens(5, 2, None, None, None)
    assert tracker.reply_id == "resp_1"


def test_chat_stream_usage_chunk_and_done() -> None:
    tracker = SseUsage("chat")
    tracker.feed(sse_event({"id": "c1", "model": "g", "choices": []}))
    tracker.feed(sse_event({"id": "c1", "choices": [], "usage": {"prompt_tokens": 4}}))
    tracker.feed(sse_event("[DONE]"))
    assert tracker.tokens == CallTokens(4, None, None, None, None)


@pytest.mark.parametrize("api", ["anthropic", "responses", "chat"])
def test_a_whole_long_stream_is_counted(api: ApiKind) -> None:
    events = stream(api)
    assert len(events) > 40
    got = read(api, events)
    assert got.note is None and got.tokens is not None
    assert (got.tokens.input, got.tokens.output) == (1000, 7000)


@pytest.mark.parametrize("api", ["anthropic", "responses", "chat"])
@pytest.mark.parametrize("kept", [0, 1, 30, 40])
def test_a_stream_cut_before_its_end_is_unknown_never_small(api: ApiKind, kept: int) -> None:
    """The reported attack: the agent reads 30 of 40 chunks and hangs up. Whatever the cut,
    no count of the cut stream is taken for the call's count; Anthropic's message_start (4
    or so output tokens) is at most a lower bound."""
    events = stream(api)
    got = read(api, events[:kept], cut="the agent hung up")
    assert got.tokens is None
    assert got.note == "the agent hung up before its final usage event"
    assert got.seen.output is None or got.seen.output < 7000
    if api == "anthropic" and kept:
        assert (got.seen.input, got.seen.output) == (1000, 1)  # message_start's counts only


def test_anthropic_cut_between_its_final_usage_and_message_stop_keeps_a_bound() -> None:
    """message_delta's usage is cumulative and may be followed by more: only message_stop
    makes it final. Cut between the two, the delta's counts are a lower bound."""
    events = stream("anthropic")
    assert b"message_stop" in events[-1] and b"message_delta" in events[-2]
    got = read("anthropic", events[:-1])
    assert got.tokens is None and got.note == "the stream stopped before its final usage event"
    assert (got.seen.input, got.seen.output, got.seen.cache_read) == (1000, 7000, 200)


def _edit(events: list[bytes], marker: bytes, edit: Any) -> list[bytes]:
    """`events` with the (last) event containing `marker` replaced by `edit(its data)`."""
    i = max(n for n, ev in enumerate(events) if marker in ev)
    head, _, data = events[i].partition(b"data: ")
    obj = json.loads(data)
    new = edit(obj)
    out = list(events)
    out[i] = head + b"data: " + (new if isinstance(new, bytes) else json.dumps(new).encode())
    if not out[i].endswith(b"\n\n"):
        out[i] += b"\n\n"
    return out


FINAL = {"anthropic": b"message_delta", "responses": b"response.completed", "chat": b'"usage"'}


def _usage_of(api: ApiKind, obj: dict[str, Any]) -> dict[str, Any]:
    return obj["response"]["usage"] if api == "responses" else obj["usage"]


@pytest.mark.parametrize("api", ["anthropic", "responses", "chat"])
def test_a_final_event_that_does_not_parse_leaves_the_count_unknown(api: ApiKind) -> None:
    events = _edit(stream(api), FINAL[api], lambda obj: json.dumps(obj).encode()[:-7])
    got = read(api, events)
    assert got.tokens is None and got.note is not None
    assert got.seen.output is None or got.seen.output < 7000


OUTPUT_KEY = {
    "anthropic": "output_tokens",
    "responses": "output_tokens",
    "chat": "completion_tokens",
}


@pytest.mark.parametrize("api", ["anthropic", "responses", "chat"])
@pytest.mark.parametrize(
    ("lie", "said"),
    [
        (-7000, "negative"),
        (10**12, "over 1e+09"),
        (7000.5, "a fraction"),
        ("7000", "a str"),
        (True, "true"),
        ([7000], "a list"),
    ],
)
def test_a_count_that_is_not_a_count_is_unknown(api: ApiKind, lie: Any, said: str) -> None:
    def lying(obj: dict[str, Any]) -> dict[str, Any]:
        _usage_of(api, obj)[OUTPUT_KEY[api]] = lie
        return obj

    got = read(api, _edit(stream(api), FINAL[api], lying))
    assert got.tokens is None
    assert got.note == f"{OUTPUT_KEY[api]} is {said}, not a token count"
    assert got.seen.input == 1000  # the counts that were believable bound it from below


def test_a_number_too_long_to_read_and_deep_nesting_are_not_read() -> None:
    """A 5,000-digit count, nesting deeper than the parser goes: the event is not read (never
    a crash), so the stream has no final usage."""
    for data in (b'{"usage": {"completion_tokens": 1' + b"0" * 5000 + b"}}", b"[" * 100_000):
        events = [*stream("chat")[:-2], b"data: " + data + b"\n\n", sse_event("[DONE]")]
        got = read("chat", events)
        assert got.tokens is None and got.note == "the stream carried no usage; ask for " \
            "stream_options.include_usage"  # fmt: skip


@pytest.mark.parametrize(
    ("api", "usage", "note"),
    [
        ("responses", {"input_tokens": 10, "input_tokens_details": {"cached_tokens": 11},
                       "output_tokens": 5}, "cached_tokens exceeds input_tokens"),
        ("chat", {"prompt_tokens": 10, "completion_tokens": 5,
                  "completion_tokens_details": {"reasoning_tokens": 6}},
         "reasoning_tokens exceeds completion_tokens"),
        ("responses", {"input_tokens": 10, "input_tokens_details": [1], "output_tokens": 5},
         None),
    ],
)  # fmt: skip
def test_parts_larger_than_their_whole_are_lies(
    api: ApiKind, usage: dict[str, Any], note: str | None
) -> None:
    got = reply_usage(api, {"usage": usage})
    if note is None:  # details of the wrong shape: no cached count, input taken whole
        assert got.tokens == CallTokens(10, 5, None, None, None)
    else:
        assert got.tokens is None and got.note == note


@pytest.mark.parametrize("api", ["anthropic", "responses", "chat"])
def test_two_final_events_or_usage_after_the_end_are_unknown(api: ApiKind) -> None:
    events = stream(api)
    final = max(n for n, ev in enumerate(events) if FINAL[api] in ev)
    twice = [*events, events[final], events[-1]]
    got = read(api, twice)
    assert got.tokens is None
    assert got.note is not None and ("second final event" in got.note or "after" in got.note)


@pytest.mark.parametrize("api", ["anthropic", "chat"])
def test_a_running_count_that_goes_down_is_unknown(api: ApiKind) -> None:
    """Anthropic's message_delta and Chat's usage chunks are running totals: a later one
    lower than an earlier one (a first that overstates, a second that understates)."""
    events = stream(api)
    final = max(n for n, ev in enumerate(events) if FINAL[api] in ev)

    def smaller(obj: dict[str, Any]) -> dict[str, Any]:
        _usage_of(api, obj)[OUTPUT_KEY[api]] = 4
        return obj

    low = _edit([events[final]], FINAL[api], smaller)
    got = read(api, [*events[:final], events[final], *low, *events[final + 1 :]])
    assert got.tokens is None and got.note == "a usage count went down"
    assert got.seen.output == 7000


@pytest.mark.parametrize("api", ["anthropic", "responses", "chat"])
def test_a_reply_naming_two_models_is_unknown(api: ApiKind) -> None:
    events = stream(api)
    key = b'"model":"claude-sonnet-4-5"'
    last = max(n for n, ev in enumerate(events) if key in ev)
    events[last] = events[last].replace(key, b'"model":"claude-haiku-4-5"')
    got = read(api, events)
    if api == "anthropic":  # one message_start: the only model named
        assert got.model == "claude-haiku-4-5" and got.tokens is not None
    else:
        assert got.tokens is None and got.note == "the reply names two models"


def test_an_event_too_large_to_read_is_skipped_and_the_count_unknown() -> None:
    events = stream("responses")
    tracker = SseUsage("responses", max_event=8192)
    final = events[-1]
    assert len(final) < 8192
    huge = b"data: {" + b" " * 20_000 + b"}\n\n"
    for ev in [*events[:-1], huge[:9000], huge[9000:], final]:
        tracker.feed(ev)
    got = tracker.result()
    assert got.tokens is None and got.note == "an event over 8192 bytes was not read"
    assert len(tracker._buf) < 8192  # nothing of the large event kept


def test_an_unending_line_is_not_kept_in_memory() -> None:
    tracker = SseUsage("chat", max_event=1 << 16)
    for _ in range(200):
        tracker.feed(b"x" * 8192)
    assert len(tracker._buf) <= (1 << 16) + 8192
    assert tracker.result().tokens is None


def test_chat_without_include_usage_says_how_to_get_counts() -> None:
    _, events = render("chat", Reply("hi", LONG, text="hello"), "gpt-5", True, {})
    got = read("chat", events)
    assert got.tokens is None
    assert got.note == "the stream carried no usage; ask for stream_options.include_usage"
