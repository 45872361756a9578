"""What a model reply says it used, read so that a cut or a lie is never a small number.

Counts come from the upstream's reply: a JSON body's `usage`, or the usage events of a
server-sent-event stream. A stream's counts are final only once its terminal event arrived
after its final usage: Anthropic `message_stop` after a `message_delta` carrying usage;
Responses `response.completed|incomplete|failed`; Chat Completions `[DONE]` after the usage
chunk. Anything less leaves every count unknown (None): a stream cut before its end (the agent
or the upstream hung up, the proxy stopped), a final event that does not parse or is too large
to read, a count that is not a count (negative, fractional, a string, over `MAX_COUNT`),
counts that go down, a second final event, a reply that names two models. What the reply did
report on the way is kept apart, as a lower bound (`ReplyUsage.seen`), never as the count: an
agent that hangs up after 30 of 40 chunks must not be billed the 4 output tokens of
`message_start`.

Counts are normalised to one convention: `input` is uncached input, `output` includes
reasoning, `reasoning` is the part of `output` spent reasoning. OpenAI reports cached tokens
inside its input count and reasoning inside its output count; they are split here once, so
nothing downstream double counts. Everything here is pure (bytes and dicts in, numbers out).
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field, fields
from typing import Any

from optarena.proxy._wire import MAX_MODEL, ApiKind

# More tokens than any model reads or writes in one call: a larger count is not believed.
MAX_COUNT = 10**9
# The largest event read for usage (a Responses `response.completed` repeats the whole reply).
MAX_EVENT = 16 << 20
_MAX_PROBLEMS = 4  # problems named in a note; an upstream may repeat one a million times


@dataclass
class CallTokens:
    """Token counts of one call, None where the reply did not say."""

    input: int | None = None
    output: int | None = None
    cache_read: int | None = None
    cache_write: int | None = None
    reasoning: int | None = None

    def total(self) -> int | None:
        """Every token the call processed (input, cached or not, plus output); None unless
        both input and output are known. An unreported cache count is none used."""
        if self.input is None or self.output is None:
            return None
        return self.input + self.output + (self.cache_read or 0) + (self.cache_write or 0)

    def known_sum(self) -> int:
        """The sum of the counts that are known: a lower bound of `total`."""
        parts = (self.input, self.output, self.cache_read, self.cache_write)
        return sum(p or 0 for p in parts)

    def as_dict(self) -> dict[str, int | None]:
        return {f.name: getattr(self, f.name) for f in fields(self)}

    def raise_to(self, other: CallTokens) -> None:
        """Keep, per kind, the larger of this count and `other`'s (a running lower bound)."""
        for f in fields(self):
            mine, theirs = getattr(self, f.name), getattr(other, f.name)
            if theirs is not None and (mine is None or theirs > mine):
                setattr(self, f.name, theirs)


@dataclass
class ReplyUsage:
    """What one reply said it used: `tokens` are the counts (None: unknown, a field None: that
    count unknown), `seen` the largest count of each kind the reply gave anywhere (a lower
    bound when `tokens` is not complete), `note` why anything is unknown."""

    tokens: CallTokens | None
    seen: CallTokens = field(default_factory=CallTokens)
    model: str | None = None
    note: str | None = None


class _Problems:
    """What in a reply could not be believed, said once each, at most `_MAX_PROBLEMS`."""

    def __init__(self) -> None:
        self.items: list[str] = []
        self.dropped = 0

    def add(self, what: str) -> None:
        if what in self.items:
            return
        if len(self.items) < _MAX_PROBLEMS:
            self.items.append(what)
        else:
            self.dropped += 1

    def __bool__(self) -> bool:
        return bool(self.items)

    def text(self) -> str:
        more = f" (and {self.dropped} more)" if self.dropped else ""
        return "; ".join(self.items) + more


def _shown(value: Any) -> str:
    """A short description of a value that is not a count (never its full text: an upstream
    may send a number of 10,000 digits)."""
    if isinstance(value, bool):
        return str(value).lower()
    if isinstance(value, int):
        return "negative" if value < 0 else f"over {MAX_COUNT:.0e}"
    if isinstance(value, float):
        return "a fraction" if value == value else "NaN"
    return f"a {type(value).__name__}"


def _count(usage: dict[str, Any], key: str, problems: _Problems) -> int | None:
    """`usage[key]` when it is a count; None when absent or null, or (noted) not a count."""
    value = usage.get(key)
    if value is None:
        return None
    if isinstance(value, int) and not isinstance(value, bool) and 0 <= value <= MAX_COUNT:
        return value
    problems.add(f"{key} is {_shown(value)}, not a token count")
    return None


def _details(usage: dict[str, Any], key: str) -> dict[str, Any]:
    value = usage.get(key)
    return value if isinstance(value, dict) else {}


def _part_of(
    whole: int | None, part: int | None, names: tuple[str, str], problems: _Problems
) -> tuple[int | None, int | None]:
    """(whole - part, part): OpenAI counts cached input inside input, reasoning inside output.
    A part larger than its whole is a lie about both."""
    if whole is not None and part is not None and part > whole:
        problems.add(f"{names[1]} exceeds {names[0]}")
        return None, None
    return (None if whole is None else whole - (part or 0)), part


def anthropic_tokens(usage: dict[str, Any], problems: _Problems) -> CallTokens:
    """Anthropic `usage`: input_tokens is already uncached; cache reads and writes apart."""
    return CallTokens(
        input=_count(usage, "input_tokens", problems),
        output=_count(usage, "output_tokens", problems),
        cache_read=_count(usage, "cache_read_input_tokens", problems),
        cache_write=_count(usage, "cache_creation_input_tokens", problems),
    )


def _openai_tokens(
    usage: dict[str, Any], names: tuple[str, ...], problems: _Problems
) -> CallTokens:
    inp_key, out_key, inp_details, out_details = names
    cached = _count(_details(usage, inp_details), "cached_tokens", problems)
    reasoning = _count(_details(usage, out_details), "reasoning_tokens", problems)
    uncached, cached = _part_of(
        _count(usage, inp_key, problems), cached, (inp_key, "cached_tokens"), problems
    )
    output = _count(usage, out_key, problems)
    if output is not None and reasoning is not None and reasoning > output:
        problems.add(f"reasoning_tokens exceeds {out_key}")
        output = reasoning = None
    return CallTokens(input=uncached, output=output, cache_read=cached, reasoning=reasoning)


_RESPONSES = ("input_tokens", "output_tokens", "input_tokens_details", "output_tokens_details")
_CHAT = ("prompt_tokens", "completion_tokens", "prompt_tokens_details", "completion_tokens_details")


def usage_tokens(kind: ApiKind, usage: dict[str, Any], problems: _Problems) -> CallTokens:
    """The counts of one `usage` object in `kind`'s dialect."""
    if kind == "anthropic":
        return anthropic_tokens(usage, problems)
    return _openai_tokens(usage, _RESPONSES if kind == "responses" else _CHAT, problems)


def reply_usage(kind: ApiKind, reply: dict[str, Any]) -> ReplyUsage:
    """What a complete (non-streamed) JSON reply says it used."""
    model = reply.get("model")
    model = model[:MAX_MODEL] if isinstance(model, str) else None
    usage = reply.get("usage")
    if not isinstance(usage, dict):
        return ReplyUsage(None, model=model, note="the reply carried no usage")
    problems = _Problems()
    t = usage_tokens(kind, usage, problems)
    if problems:
        return ReplyUsage(None, t, model, problems.text())
    note = None if t.total() is not None else "the reply's usage has no input or output count"
    return ReplyUsage(t, CallTokens(**t.as_dict()), model, note)


def tokens_from_reply(kind: ApiKind, reply: dict[str, Any]) -> CallTokens | None:
    """Token counts of a complete JSON reply; None when it has no (believable) usage."""
    return reply_usage(kind, reply).tokens


def reply_id(reply: dict[str, Any]) -> str | None:
    """The provider's id of a reply (`msg_...`, `resp_...`, `chatcmpl-...`)."""
    rid = reply.get("id")
    return rid if isinstance(rid, str) else None


_RESPONSES_END = ("response.completed", "response.incomplete", "response.failed")


class SseUsage:
    """Reads a server-sent-event stream as it passes and keeps the reply's id, model and
    usage. Fed raw bytes in whatever pieces the network delivers; `result` says what the
    stream used once it has ended (or been cut)."""

    def __init__(self, kind: ApiKind, max_event: int = MAX_EVENT) -> None:
        self.kind = kind
        self.max_event = max_event
        self.reply_id: str | None = None
        self.model: str | None = None
        self.error: str | None = None
        self._buf = bytearray()
        self._scan = 0  # where the search for the next event's end resumes
        self._skipping = False  # inside an event too large to read
        self._problems = _Problems()
        self._seen = CallTokens()
        self._start: CallTokens | None = None  # Anthropic message_start's counts
        self._final: CallTokens | None = None  # the latest usage that may be the final one
        self._ended = False  # the terminal event arrived

    def feed(self, chunk: bytes) -> None:
        self._buf += chunk
        while True:
            cut = _event_end(self._buf, self._scan)
            if cut is None:
                self._scan = max(0, len(self._buf) - 3)  # a separator may straddle pieces
                if len(self._buf) > self.max_event:
                    if not self._skipping:
                        self._problems.add(f"an event over {_size(self.max_event)} was not read")
                    self._skipping = True
                    del self._buf[:-3]
                    self._scan = 0
                return
            if self._skipping:
                self._skipping = False
            else:
                self._event(bytes(self._buf[: cut[0]]))
            del self._buf[: cut[1]]
            self._scan = 0

    def _event(self, raw: bytes) -> None:
        lines = raw.decode("utf-8", "replace").splitlines()
        data = "\n".join(ln[5:].lstrip() for ln in lines if ln.startswith("data:"))
        if not data:
            return
        if data == "[DONE]":
            if self.kind == "chat":
                self._end()
            return
        try:
            obj = json.loads(data)
        except (ValueError, RecursionError):
            return  # a final event that does not parse leaves its stream unfinished
        if not isinstance(obj, dict):
            return
        if self.kind == "anthropic":
            self._anthropic(obj.get("type"), obj)
        elif self.kind == "responses":
            self._responses(obj.get("type"), obj)
        else:
            self._chat(obj)

    def _end(self) -> None:
        if self._ended:
            self._problems.add("a second final event")
        self._ended = True

    def _named(self, obj: dict[str, Any]) -> None:
        model, rid = obj.get("model"), reply_id(obj)
        self.reply_id = self.reply_id or rid
        if not isinstance(model, str):
            return
        if self.model is None:
            self.model = model[:MAX_MODEL]
        elif model[:MAX_MODEL] != self.model:
            self._problems.add("the reply names two models")

    def _usage(self, usage: dict[str, Any]) -> CallTokens:
        if self._ended:
            self._problems.add("usage after the final event")
        t = usage_tokens(self.kind, usage, self._problems)
        self._seen.raise_to(t)
        return t

    def _cumulative(self, t: CallTokens) -> None:
        """A later usage event of the same reply repeats or raises each count (they are
        running totals); one that lowers a count contradicts the earlier."""
        if self._final is not None:
            for f in fields(t):
                old, new = getattr(self._final, f.name), getattr(t, f.name)
                if old is not None and new is not None and new < old:
                    self._problems.add("a usage count went down")
                if new is None:
                    setattr(t, f.name, old)
        self._final = t

    def _anthropic(self, etype: Any, obj: dict[str, Any]) -> None:
        if etype == "message_start" and isinstance(obj.get("message"), dict):
            msg = obj["message"]
            self._named(msg)
            if self._start is not None:
                self._problems.add("a second message_start")
            usage = msg.get("usage")
            self._start = self._usage(usage) if isinstance(usage, dict) else CallTokens()
        elif etype == "message_delta" and isinstance(obj.get("usage"), dict):
            self._cumulative(self._usage(obj["usage"]))
        elif etype == "message_stop":
            self._end()
        elif etype == "error":
            self.error = json.dumps(obj.get("error"))[:500]

    def _responses(self, etype: Any, obj: dict[str, Any]) -> None:
        resp = obj.get("response")
        if isinstance(resp, dict):
            self._named(resp)
            if etype in _RESPONSES_END:
                usage = resp.get("usage")
                if isinstance(usage, dict):
                    self._final = self._usage(usage)
                self._end()
                if etype == "response.failed":
                    self.error = json.dumps(resp.get("error"))[:500]
        elif etype == "error":
            self.error = json.dumps(obj)[:500]

    def _chat(self, obj: dict[str, Any]) -> None:
        self._named(obj)
        if isinstance(obj.get("usage"), dict):
            self._cumulative(self._usage(obj["usage"]))
        if isinstance(obj.get("error"), dict):
            self.error = json.dumps(obj["error"])[:500]

    def _final_tokens(self) -> CallTokens | None:
        """The final counts, if the stream reported them (Anthropic: output from the last
        message_delta, input and cache counts from it or else from message_start)."""
        if self.kind != "anthropic" or self._final is None:
            return self._final
        start, last = self._start or CallTokens(), self._final
        return CallTokens(
            input=last.input if last.input is not None else start.input,
            output=last.output,
            cache_read=last.cache_read if last.cache_read is not None else start.cache_read,
            cache_write=last.cache_write if last.cache_write is not None else start.cache_write,
        )

    def result(self, cut: str | None = None) -> ReplyUsage:
        """What the stream used. `cut`: why it stopped early, when the caller knows (the
        agent hung up, the upstream did, the proxy stopped); a stream that simply stopped
        before its terminal event is cut too."""
        seen = CallTokens(**self._seen.as_dict())
        final = self._final_tokens()
        if not self._ended:
            why = cut or "the stream stopped"
            return ReplyUsage(None, seen, self.model, f"{why} before its final usage event")
        if final is None:
            hint = "; ask for stream_options.include_usage" if self.kind == "chat" else ""
            return ReplyUsage(None, seen, self.model, f"the stream carried no usage{hint}")
        if self._problems:
            return ReplyUsage(None, seen, self.model, self._problems.text())
        note = None if final.total() is not None else "its final usage has no input or output count"
        return ReplyUsage(final, seen, self.model, note)

    @property
    def tokens(self) -> CallTokens | None:
        """The stream's counts, if it has reported them all (see `result`)."""
        return self.result().tokens


def _size(n: int) -> str:
    return f"{n >> 20} MiB" if n >= 1 << 20 else f"{n} bytes"


def _event_end(buf: bytearray, start: int) -> tuple[int, int] | None:
    """(end of the first complete event, start of the next) in `buf`, searching from
    `start`, or None."""
    best: tuple[int, int] | None = None
    for sep in (b"\n\n", b"\r\n\r\n", b"\r\r"):
        i = buf.find(sep, start)
        if i >= 0 and (best is None or i < best[0]):
            best = (i, i + len(sep))
    return best
