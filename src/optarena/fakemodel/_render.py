"""Turn a scripted reply into the exact wire form of each API: a JSON body, or the sequence
of server-sent events a streaming client expects (the shapes real CLIs parse)."""

from __future__ import annotations

import json
import time
import uuid
from typing import Any

from optarena.fakemodel._script import Reply, Tool
from optarena.proxy import ApiKind, CallTokens, sse_event


def _id(prefix: str) -> str:
    return f"{prefix}{uuid.uuid4().hex[:24]}"


def _n(v: int | None) -> int:
    return v or 0


def pieces_of(text: str, n: int) -> list[str]:
    """`text` in `n` consecutive pieces (fewer when it is shorter), as a long reply streams."""
    n = max(1, min(n, len(text)))
    step = -(-len(text) // n)
    return [text[i : i + step] for i in range(0, len(text), step)] or [text]


# ---- usage in each dialect -----------------------------------------------------------------


def anthropic_usage(t: CallTokens) -> dict[str, int]:
    return {
        "input_tokens": _n(t.input),
        "cache_creation_input_tokens": _n(t.cache_write),
        "cache_read_input_tokens": _n(t.cache_read),
        "output_tokens": _n(t.output),
    }


def responses_usage(t: CallTokens) -> dict[str, Any]:
    """OpenAI counts cached tokens inside input and reasoning inside output."""
    inp = _n(t.input) + _n(t.cache_read)
    return {
        "input_tokens": inp,
        "input_tokens_details": {"cached_tokens": _n(t.cache_read)},
        "output_tokens": _n(t.output),
        "output_tokens_details": {"reasoning_tokens": _n(t.reasoning)},
        "total_tokens": inp + _n(t.output),
    }


def chat_usage(t: CallTokens) -> dict[str, Any]:
    inp = _n(t.input) + _n(t.cache_read)
    return {
        "prompt_tokens": inp,
        "prompt_tokens_details": {"cached_tokens": _n(t.cache_read)},
        "completion_tokens": _n(t.output),
        "completion_tokens_details": {"reasoning_tokens": _n(t.reasoning)},
        "total_tokens": inp + _n(t.output),
    }


def served_tokens(api: ApiKind, t: CallTokens) -> CallTokens:
    """What a client can read back from the usage we send: OpenAI has no cache writes and
    Anthropic does not report reasoning separately."""
    if api == "anthropic":
        return CallTokens(
            input=_n(t.input),
            output=_n(t.output),
            cache_read=_n(t.cache_read),
            cache_write=_n(t.cache_write),
            reasoning=None,
        )
    return CallTokens(
        input=_n(t.input),
        output=_n(t.output),
        cache_read=_n(t.cache_read),
        cache_write=None,
        reasoning=_n(t.reasoning),
    )


# ---- Anthropic Messages ---------------------------------------------------------------------


def _anthropic_blocks(reply: Reply) -> list[dict[str, Any]]:
    blocks: list[dict[str, Any]] = []
    if reply.text:
        blocks.append({"type": "text", "text": reply.text})
    if reply.tool:
        args = reply.tool.args if isinstance(reply.tool.args, dict) else {"input": reply.tool.args}
        blocks.append(
            {"type": "tool_use", "id": _id("toolu_"), "name": reply.tool.name, "input": args}
        )
    return blocks


def anthropic_json(reply: Reply, model: str) -> dict[str, Any]:
    return {
        "id": _id("msg_"),
        "type": "message",
        "role": "assistant",
        "model": model,
        "content": _anthropic_blocks(reply),
        "stop_reason": "tool_use" if reply.tool else "end_turn",
        "stop_sequence": None,
        "usage": anthropic_usage(reply.usage),
    }


def anthropic_sse(reply: Reply, model: str) -> list[bytes]:
    msg = anthropic_json(reply, model)
    n = reply.pieces
    start_usage = dict(msg["usage"], output_tokens=1)
    head = dict(msg, content=[], stop_reason=None, usage=start_usage)
    out = [sse_event({"type": "message_start", "message": head}, "message_start")]
    for i, block in enumerate(msg["content"]):
        first: dict[str, Any]
        if block["type"] == "text":
            first = {"type": "text", "text": ""}
            deltas = [{"type": "text_delta", "text": t} for t in pieces_of(block["text"], n)]
        else:
            first = {**block, "input": {}}
            deltas = [{"type": "input_json_delta", "partial_json": json.dumps(block["input"])}]
        out.append(
            sse_event(
                {"type": "content_block_start", "index": i, "content_block": first},
                "content_block_start",
            )
        )
        out += [
            sse_event(
                {"type": "content_block_delta", "index": i, "delta": d}, "content_block_delta"
            )
            for d in deltas
        ]
        out.append(sse_event({"type": "content_block_stop", "index": i}, "content_block_stop"))
    final = {"output_tokens": msg["usage"]["output_tokens"]}
    delta_ev = {
        "type": "message_delta",
        "delta": {"stop_reason": msg["stop_reason"], "stop_sequence": None},
        "usage": final,
    }
    out.append(sse_event(delta_ev, "message_delta"))
    out.append(sse_event({"type": "message_stop"}, "message_stop"))
    return out


# ---- OpenAI Responses -----------------------------------------------------------------------


TOOL_SEARCH = "tool_search"


def _offers_tool_search(body: dict[str, Any]) -> bool:
    """Whether the request offers the hosted `tool_search` tool (a typed entry, no name)."""
    return any(
        isinstance(t, dict) and t.get("type") == TOOL_SEARCH for t in body.get("tools") or []
    )


def _responses_item(reply: Reply, body: dict[str, Any]) -> dict[str, Any]:
    tool: Tool | None = reply.tool
    if tool is not None and tool.name == TOOL_SEARCH and _offers_tool_search(body):
        # Client-executed tool search: the client runs the search over its deferred tools
        # and answers with a `tool_search_output` item listing what it loaded.
        return {
            "type": "tool_search_call",
            "id": _id("tsc_"),
            "call_id": _id("call_"),
            "execution": "client",
            "status": "completed",
            "arguments": tool.args if isinstance(tool.args, dict) else {"query": tool.args},
        }
    if tool is None:
        content = [{"type": "output_text", "text": reply.text or "", "annotations": []}]
        return {
            "type": "message",
            "id": _id("msg_"),
            "status": "completed",
            "role": "assistant",
            "content": content,
        }
    if isinstance(tool.args, str):
        return {
            "type": "custom_tool_call",
            "id": _id("ctc_"),
            "call_id": _id("call_"),
            "name": tool.name,
            "input": tool.args,
            "status": "completed",
        }
    call = {
        "type": "function_call",
        "id": _id("fc_"),
        "call_id": _id("call_"),
        "name": tool.name,
        "arguments": json.dumps(tool.args),
        "status": "completed",
    }
    return call | ({"namespace": tool.namespace} if tool.namespace else {})


def responses_json(reply: Reply, model: str, body: dict[str, Any]) -> dict[str, Any]:
    return {
        "id": _id("resp_"),
        "object": "response",
        "created_at": int(time.time()),
        "status": "completed",
        "model": model,
        "output": [_responses_item(reply, body)],
        "usage": responses_usage(reply.usage),
    }


def responses_sse(reply: Reply, model: str, body: dict[str, Any]) -> list[bytes]:
    resp = responses_json(reply, model, body)
    item = resp["output"][0]
    seq = iter(range(1_000))

    def ev(etype: str, **kw: Any) -> bytes:
        return sse_event({"type": etype, "sequence_number": next(seq), **kw}, etype)

    pending = dict(resp, status="in_progress", output=[], usage=None)
    out = [ev("response.created", response=pending), ev("response.in_progress", response=pending)]
    out.append(
        ev("response.output_item.added", output_index=0, item=dict(item, status="in_progress"))
    )
    if item["type"] == "message":
        text = item["content"][0]["text"]
        out += [
            ev(
                "response.output_text.delta",
                item_id=item["id"],
                output_index=0,
                content_index=0,
                delta=piece,
            )
            for piece in pieces_of(text, reply.pieces)
        ]
        out.append(
            ev(
                "response.output_text.done",
                item_id=item["id"],
                output_index=0,
                content_index=0,
                text=text,
            )
        )
    out.append(ev("response.output_item.done", output_index=0, item=item))
    out.append(ev("response.completed", response=resp))
    return out


# ---- OpenAI Chat Completions ----------------------------------------------------------------


def _chat_message(reply: Reply) -> dict[str, Any]:
    msg: dict[str, Any] = {"role": "assistant", "content": reply.text}
    if reply.tool:
        args = reply.tool.args if isinstance(reply.tool.args, dict) else {"input": reply.tool.args}
        call = {
            "id": _id("call_"),
            "type": "function",
            "function": {"name": reply.tool.name, "arguments": json.dumps(args)},
        }
        msg["tool_calls"] = [call]
    return msg


def chat_json(reply: Reply, model: str) -> dict[str, Any]:
    return {
        "id": _id("chatcmpl-"),
        "object": "chat.completion",
        "created": int(time.time()),
        "model": model,
        "choices": [
            {
                "index": 0,
                "message": _chat_message(reply),
                "finish_reason": "tool_calls" if reply.tool else "stop",
            }
        ],
        "usage": chat_usage(reply.usage),
    }


def chat_sse(reply: Reply, model: str, include_usage: bool = True) -> list[bytes]:
    full = chat_json(reply, model)
    base = {k: full[k] for k in ("id", "created", "model")} | {"object": "chat.completion.chunk"}
    msg = full["choices"][0]["message"]
    texts = pieces_of(msg["content"], reply.pieces) if msg["content"] else [msg["content"]]
    deltas: list[dict[str, Any]] = [{"role": "assistant", "content": texts[0]}]
    deltas += [{"content": t} for t in texts[1:]]
    if "tool_calls" in msg:
        deltas[-1]["tool_calls"] = [dict(tc, index=i) for i, tc in enumerate(msg["tool_calls"])]
    out = [
        sse_event(dict(base, choices=[{"index": 0, "delta": d, "finish_reason": None}]))
        for d in deltas
    ]
    finish = full["choices"][0]["finish_reason"]
    out.append(sse_event(dict(base, choices=[{"index": 0, "delta": {}, "finish_reason": finish}])))
    if include_usage:
        out.append(sse_event(dict(base, choices=[], usage=full["usage"])))
    out.append(sse_event("[DONE]"))
    return out


def render(
    api: ApiKind, reply: Reply, model: str, stream: bool, body: dict[str, Any]
) -> tuple[dict[str, Any] | None, list[bytes]]:
    """(JSON body, None) for a plain reply, or (None, events) for a streamed one."""
    if api == "anthropic":
        return (None, anthropic_sse(reply, model)) if stream else (anthropic_json(reply, model), [])
    if api == "responses":
        if stream:
            return None, responses_sse(reply, model, body)
        return responses_json(reply, model, body), []
    if stream:
        include = bool((body.get("stream_options") or {}).get("include_usage"))
        return None, chat_sse(reply, model, include)
    return chat_json(reply, model), []
