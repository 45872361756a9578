"""Usage extraction from each API's replies: literal numbers, one convention."""

from __future__ import annotations

from optarena.proxy._wire import (
    CallTokens,
    SseUsage,
    api_kind,
    error_body,
    request_fields,
    sse_event,
    tokens_from_reply,
)


def test_api_kind_from_paths() -> None:
    assert api_kind("/v1/messages?beta=true") == "anthropic"
    assert api_kind("/v1/responses") == "responses"
    assert api_kind("/openai/v1/chat/completions/") == "chat"
    assert api_kind("/v1/messages/count_tokens") is None
    assert api_kind("/") is None


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


def test_no_usage_is_unknown() -> None:
    assert tokens_from_reply("responses", {"id": "x"}) is None
    assert CallTokens().total() is None


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


def test_request_fields_and_error_dialects() -> None:
    assert request_fields(b'{"model": "m", "stream": true}') == ("m", True)
    assert request_fields(b"\x00garbage") == (None, False)
    assert error_body("anthropic", 400, "no")["error"]["type"] == "invalid_request_error"
    assert error_body("responses", 400, "no")["error"]["message"] == "no"
