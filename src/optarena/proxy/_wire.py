"""What optarena knows about the three model APIs on the wire: which API a path is, and where
each one puts its token counts, in a JSON reply or spread over a server-sent-event stream.

Everything here is pure (bytes and dicts in, numbers out) so it is tested on recorded replies.
Counts are normalised to one convention: `input` is uncached input, `output` includes
reasoning, `reasoning` is the part of `output` spent reasoning. OpenAI reports cached tokens
inside its input count and reasoning inside its output count; they are split here once, so
nothing downstream double counts.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, fields
from typing import Any, Literal

ApiKind = Literal["anthropic", "responses", "chat"]


# A path the upstream might read as another endpoint than its text says (`/v1/completions#/
# messages`, `%2F`, `..`): never metered as an API, so a POST there is refused.
_AMBIGUOUS = re.compile(r"[#%\\]|/\.\.?(/|$)|//")


def api_kind(path: str) -> ApiKind | None:
    """The metered API a request path belongs to; None for anything else."""
    bare = path.split("?", 1)[0].rstrip("/")
    if _AMBIGUOUS.search(bare):
        return None
    if bare.endswith("/messages"):
        return "anthropic"
    if bare.endswith("/responses"):
        return "responses"
    if bare.endswith("/chat/completions"):
        return "chat"
    return None


# Requests that spend no tokens: reads (GET, HEAD: model listing, a connectivity check on the
# base URL) and token counting. They are forwarded unmetered; every other request the proxy
# cannot meter (legacy completions, embeddings, batches, ...) is refused, or an agent could
# spend through it outside every budget.
_COUNTING = re.compile(r"(/messages/count_tokens|/responses/input_tokens)$")
_READS = frozenset({"GET", "HEAD", "OPTIONS"})


def spends_nothing(method: str, path: str) -> bool:
    """Whether an unmetered request is one that spends no tokens (see `_COUNTING`)."""
    bare = path.split("?", 1)[0].rstrip("/")
    counting = _COUNTING.search(bare) is not None and not _AMBIGUOUS.search(bare)
    return method.upper() in _READS or counting


@dataclass
class CallTokens:
    """Token counts of one call, None where the reply did not say."""

    input: int | None = None
    output: int | None = None
    cache_read: int | None = None
    cache_write: int | None = None
    reasoning: int | None = None

    def total(self) -> int | None:
        """Every token the call processed (input, cached or not, plus output); None if the
        reply carried no counts at all."""
        parts = [self.input, self.cache_read, self.cache_write, self.output]
        if all(p is None for p in parts):
            return None
        return sum(p or 0 for p in parts)

    def as_dict(self) -> dict[str, int | None]:
        return {f.name: getattr(self, f.name) for f in fields(self)}


def _int(value: Any) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def _sub(a: int | None, b: int | None) -> int | None:
    return None if a is None else a - (b or 0)


def anthropic_tokens(usage: dict[str, Any], into: CallTokens | None = None) -> CallTokens:
    """Anthropic `usage`: input_tokens is already uncached; cache reads and writes are separate.
    Fields present in `usage` override those in `into` (message_delta carries final counts)."""
    t = into or CallTokens()
    for key, attr in (
        ("input_tokens", "input"),
        ("output_tokens", "output"),
        ("cache_read_input_tokens", "cache_read"),
        ("cache_creation_input_tokens", "cache_write"),
    ):
        v = _int(usage.get(key))
        if v is not None:
            setattr(t, attr, v)
    return t


def responses_tokens(usage: dict[str, Any]) -> CallTokens:
    """OpenAI Responses `usage`: cached tokens are part of input_tokens, reasoning part of
    output_tokens."""
    cached = _int((usage.get("input_tokens_details") or {}).get("cached_tokens"))
    reasoning = _int((usage.get("output_tokens_details") or {}).get("reasoning_tokens"))
    return CallTokens(
        input=_sub(_int(usage.get("input_tokens")), cached),
        output=_int(usage.get("output_tokens")),
        cache_read=cached,
        reasoning=reasoning,
    )


def chat_tokens(usage: dict[str, Any]) -> CallTokens:
    """OpenAI Chat Completions `usage`: the same split under older names."""
    cached = _int((usage.get("prompt_tokens_details") or {}).get("cached_tokens"))
    reasoning = _int((usage.get("completion_tokens_details") or {}).get("reasoning_tokens"))
    return CallTokens(
        input=_sub(_int(usage.get("prompt_tokens")), cached),
        output=_int(usage.get("completion_tokens")),
        cache_read=cached,
        reasoning=reasoning,
    )


def tokens_from_reply(kind: ApiKind, reply: dict[str, Any]) -> CallTokens | None:
    """Token counts of a complete (non-streamed) JSON reply; None when it has no usage."""
    usage = reply.get("usage")
    if not isinstance(usage, dict):
        return None
    if kind == "anthropic":
        return anthropic_tokens(usage)
    if kind == "responses":
        return responses_tokens(usage)
    return chat_tokens(usage)


def reply_id(reply: dict[str, Any]) -> str | None:
    """The provider's id of a reply (`msg_...`, `resp_...`, `chatcmpl-...`)."""
    rid = reply.get("id")
    return rid if isinstance(rid, str) else None


def request_fields(body: bytes) -> tuple[str | None, bool]:
    """(model, stream) of a JSON request body; (None, False) when it is not readable JSON."""
    try:
        obj = json.loads(body)
    except (ValueError, UnicodeDecodeError):
        return None, False
    if not isinstance(obj, dict):
        return None, False
    model = obj.get("model")
    return (model if isinstance(model, str) else None), bool(obj.get("stream"))


def sse_event(data: dict[str, Any] | str, event: str | None = None) -> bytes:
    """One server-sent event; `data` is JSON-encoded unless it is already a string."""
    payload = data if isinstance(data, str) else json.dumps(data, separators=(",", ":"))
    head = f"event: {event}\n" if event else ""
    return f"{head}data: {payload}\n\n".encode()


class SseUsage:
    """Reads a server-sent-event stream as it passes and keeps the reply's id, model and
    token counts. Fed raw bytes in whatever pieces the network delivers."""

    def __init__(self, kind: ApiKind) -> None:
        self.kind = kind
        self.tokens: CallTokens | None = None
        self.reply_id: str | None = None
        self.model: str | None = None
        self.error: str | None = None
        self._buf = b""

    def feed(self, chunk: bytes) -> None:
        self._buf += chunk
        while True:
            cut = _event_end(self._buf)
            if cut is None:
                return
            raw, self._buf = self._buf[: cut[0]], self._buf[cut[1] :]
            self._event(raw)

    def _event(self, raw: bytes) -> None:
        lines = raw.decode("utf-8", "replace").splitlines()
        data = "\n".join(ln[5:].lstrip() for ln in lines if ln.startswith("data:"))
        if not data or data == "[DONE]":
            return
        try:
            obj = json.loads(data)
        except ValueError:
            return
        if isinstance(obj, dict):
            self._apply(obj)

    def _apply(self, obj: dict[str, Any]) -> None:
        etype = obj.get("type")
        if self.kind == "anthropic":
            self._anthropic(etype, obj)
        elif self.kind == "responses":
            self._responses(etype, obj)
        else:
            self._chat(obj)

    def _anthropic(self, etype: Any, obj: dict[str, Any]) -> None:
        if etype == "message_start" and isinstance(obj.get("message"), dict):
            msg = obj["message"]
            self.reply_id, self.model = reply_id(msg), msg.get("model")
            if isinstance(msg.get("usage"), dict):
                self.tokens = anthropic_tokens(msg["usage"])
        elif etype == "message_delta" and isinstance(obj.get("usage"), dict):
            self.tokens = anthropic_tokens(obj["usage"], self.tokens)
        elif etype == "error":
            self.error = json.dumps(obj.get("error"))[:500]

    def _responses(self, etype: Any, obj: dict[str, Any]) -> None:
        resp = obj.get("response")
        if isinstance(resp, dict):
            self.reply_id = reply_id(resp) or self.reply_id
            self.model = resp.get("model") or self.model
            if etype in ("response.completed", "response.incomplete", "response.failed"):
                if isinstance(resp.get("usage"), dict):
                    self.tokens = responses_tokens(resp["usage"])
                if etype == "response.failed":
                    self.error = json.dumps(resp.get("error"))[:500]
        elif etype == "error":
            self.error = json.dumps(obj)[:500]

    def _chat(self, obj: dict[str, Any]) -> None:
        self.reply_id = reply_id(obj) or self.reply_id
        self.model = obj.get("model") or self.model
        if isinstance(obj.get("usage"), dict):
            self.tokens = chat_tokens(obj["usage"])
        if isinstance(obj.get("error"), dict):
            self.error = json.dumps(obj["error"])[:500]


def _event_end(buf: bytes) -> tuple[int, int] | None:
    """(end of the first complete event, start of the next) in `buf`, or None."""
    best: tuple[int, int] | None = None
    for sep in (b"\n\n", b"\r\n\r\n", b"\r\r"):
        i = buf.find(sep)
        if i >= 0 and (best is None or i < best[0]):
            best = (i, i + len(sep))
    return best


def error_body(kind: ApiKind | None, status: int, message: str) -> dict[str, Any]:
    """An error reply in the dialect the client speaks, so its agent shows `message`."""
    if kind == "anthropic":
        etype = {400: "invalid_request_error", 403: "permission_error", 429: "rate_limit_error"}
        return {
            "type": "error",
            "error": {"type": etype.get(status, "api_error"), "message": message},
        }
    code = {400: "invalid_request_error", 403: "permission_denied", 429: "rate_limit_exceeded"}
    return {"error": {"message": message, "type": code.get(status, "server_error"), "code": None}}
