"""Per-trial accounting for the metering proxy: one record per model call, running totals,
and the limits that refuse the next call once a budget is spent.

Limits are checked before a call is forwarded, never by cutting a call mid-stream. Under a
token or cost limit a call waits until the calls before it are counted, so a run overshoots
a budget by at most the call that spent it; the next call is refused with an API error the
agent shows. A count the proxy does not know is not zero: it refuses the next call under the
budget it would break (an answered call without believable token counts under a token limit,
a call or model without a price under a cost limit), and what such a call did report counts
toward the budget as its lower bound (`tokens_at_least`, `cost_usd_at_least`). Records never
hold request headers, so API keys never reach a log or the ledger.
"""

from __future__ import annotations

import threading
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict, Field

from optarena.proxy._prices import PriceTable
from optarena.proxy._usage import CallTokens, ReplyUsage
from optarena.records import CallRecord, Usage


class ProxyLimits(BaseModel):
    """What a trial may spend through the proxy. None: no limit of that kind."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    max_calls: int | None = Field(default=None, ge=1)
    max_tokens: int | None = Field(
        default=None, ge=1, description="every token processed: input (cached or not) + output"
    )
    max_cost_usd: float | None = Field(default=None, gt=0)

    def is_unlimited(self) -> bool:
        return self.max_calls is None and self.max_tokens is None and self.max_cost_usd is None


def total_tokens(call: CallRecord) -> int | None:
    """Every token a call processed (input, cached or not, and output); None unless both input
    and output are known (a cache count not reported is none used)."""
    if call.input_tokens is None or call.output_tokens is None:
        return None
    cached = (call.cache_read_tokens or 0) + (call.cache_write_tokens or 0)
    return call.input_tokens + call.output_tokens + cached


def may_have_spent(call: CallRecord) -> bool:
    """Whether a call may have cost tokens: a metered call the upstream answered (providers do
    not bill a failed one), or one that got no reply after its request went out (the proxy
    then says so in `usage_note`)."""
    if call.refused is not None or call.api == "other":
        return False
    if call.status is None:
        return call.usage_note is not None
    return call.status < 400


def _set_counts(call: CallRecord, t: CallTokens) -> None:
    call.input_tokens, call.output_tokens = t.input, t.output
    call.cache_read_tokens, call.cache_write_tokens = t.cache_read, t.cache_write
    call.reasoning_tokens = t.reasoning


def _noted(call: CallRecord, note: str | None) -> None:
    if note:
        call.usage_note = f"{call.usage_note}; {note}" if call.usage_note else note


class Meter:
    """Thread-safe: the proxy's handler threads admit and record calls concurrently."""

    def __init__(
        self, limits: ProxyLimits, prices: PriceTable, log_path: Path | None = None
    ) -> None:
        self.limits = limits
        self.prices = prices
        self.log_path = log_path
        self.calls: list[CallRecord] = []
        self.refusals = 0
        self.refused_connections = 0  # connections over the proxy's limit, closed unserved
        self._lock = threading.Lock()
        self._settled = threading.Condition(self._lock)  # notified when a call is recorded
        self._in_flight: dict[int, CallRecord] = {}  # started, not yet recorded
        self._closed = False  # the proxy is stopping: nothing more is admitted
        self._seq = 0
        self._spent_calls, self._spent_tokens, self._spent_usd = 0, 0, 0.0
        # the first call that may have spent an unknown number of tokens, or an unknown cost
        self._unknown_tokens: CallRecord | None = None
        self._unknown_cost: CallRecord | None = None

    def start(self, **fields: Any) -> CallRecord:
        """A new call's record, numbered; the call is in flight until `record` takes it."""
        with self._lock:
            self._seq += 1
            call = CallRecord(seq=self._seq, **fields)
            self._in_flight[call.seq] = call
            return call

    def refused_connection(self) -> None:
        with self._lock:
            self.refused_connections += 1

    def admit(
        self, model: str | None = None, *, seq: int | None = None, wait_s: float = 0.0
    ) -> str | None:
        """None to forward the next call (number `seq`, for `model`); else why it is refused.

        An admitted call counts against the call budget at once, not when its reply ends:
        otherwise calls sent side by side would all be admitted under a budget of one. Under
        a token or cost budget it first waits (at most `wait_s`) until every earlier metered
        call is recorded: a count still coming is unknown, so the budget is checked against
        known counts only (an agent hanging up mid-stream and calling again at once does not
        get ahead of the count), and a run overshoots it by at most the call that spent it.
        Earlier calls still in flight after the wait leave the budget unkeepable: refused."""
        with self._lock:
            reason = self._wait_for_earlier(seq, wait_s)
            if reason is None:
                reason = self._over_budget() or self._unenforceable(model)
            if reason:
                self.refusals += 1
            else:
                self._spent_calls += 1
            return reason

    def _wait_for_earlier(self, seq: int | None, wait_s: float) -> str | None:
        """(Holding the lock.) Why the call cannot be admitted after waiting, if so."""
        lim = self.limits
        if seq is not None and (lim.max_tokens is not None or lim.max_cost_usd is not None):

            def earlier() -> list[int]:
                calls = self._in_flight.values()
                return [c.seq for c in calls if c.seq < seq and c.api != "other"]

            self._settled.wait_for(lambda: self._closed or not earlier(), timeout=wait_s)
            if earlier() and not self._closed:
                return (
                    f"call(s) {', '.join(map(str, earlier()))} still in flight after "
                    f"{wait_s:g} s: their counts are unknown, so the budget cannot be kept"
                )
        return "the run has ended" if self._closed else None

    def close(self) -> None:
        """The proxy is stopping: calls waiting to be admitted, or coming, are refused."""
        with self._lock:
            self._closed = True
            self._settled.notify_all()

    def _unenforceable(self, model: str | None) -> str | None:
        """Why a set token or cost limit could not be kept for the next call: an unknown
        count is not zero, so a budget that depends on one is refused rather than ignored."""
        lim = self.limits
        if lim.max_tokens is not None and self._unknown_tokens is not None:
            c = self._unknown_tokens
            return (
                f"call {c.seq}'s token count is unknown ({c.usage_note or 'not reported'}), at "
                f"least {c.tokens_at_least or 0} tokens: the token budget cannot be kept"
            )
        if lim.max_cost_usd is not None:
            if self.prices.lookup(model) is None:
                return f"no price for model {model!r}: the cost budget cannot be kept"
            if self._unknown_cost is not None:
                c = self._unknown_cost
                why = c.usage_note or f"no price for {c.model!r}"
                return f"call {c.seq} has no known cost ({why}): the cost budget cannot be kept"
        return None

    def drain(self, timeout_s: float) -> int:
        """Wait until every call in flight is recorded (a reply reaches the agent before its
        record is written, so an agent that exits at once must not take its last call with
        it). Returns how many calls were still in flight at the timeout."""
        with self._settled:
            self._settled.wait_for(lambda: not self._in_flight, timeout=timeout_s)
            return len(self._in_flight)

    def give_up(self, why: str) -> int:
        """Record every call still in flight as cut off (`why`), its spending unknown: the
        last resort when its handler could not finish. Its handler's own record, if it ever
        comes, is dropped. Returns how many there were."""
        with self._lock:
            stuck = [c.model_copy() for c in self._in_flight.values()]
        for call in stuck:
            call.error = call.error or why
            _set_counts(call, CallTokens())
            _noted(call, f"{why}: what it spent is unknown")
            self.account(call, None)
            self.record(call)
        return len(stuck)

    def _over_budget(self) -> str | None:
        lim, n, tokens, cost = self.limits, self._spent_calls, self._spent_tokens, self._spent_usd
        if lim.max_calls is not None and n >= lim.max_calls:
            return f"call budget exhausted ({n} of {lim.max_calls} calls made)"
        some = "at least " if self._unknown_tokens is not None else ""
        if lim.max_tokens is not None and tokens >= lim.max_tokens:
            return f"token budget exhausted ({some}{tokens} of {lim.max_tokens} tokens used)"
        some = "at least " if self._unknown_cost is not None else ""
        if lim.max_cost_usd is not None and cost >= lim.max_cost_usd:
            return f"cost budget exhausted ({some}${cost:.4f} of ${lim.max_cost_usd:.4f} spent)"
        return None

    def account(self, call: CallRecord, usage: ReplyUsage | None) -> None:
        """Put on the call's record what its reply said it used (`usage`; None: no reply was
        read for usage) and what that costs. When a count or the cost is unknown, what the
        reply did report is recorded beside it as a lower bound, never as the count.

        The price is the asked model's; when the reply names a model with another price, the
        dearer of the two (a reply from another model must not make a call cheap), and
        unknown when either has no price."""
        if usage is not None:
            if usage.tokens is not None:
                _set_counts(call, usage.tokens)
            _noted(call, usage.note)
        reply_model = usage.model if usage is not None else None
        call.model = call.model or reply_model
        models = list(dict.fromkeys(m for m in (call.model, reply_model) if m))
        if len(models) == 2 and self.prices.lookup(models[0]) != self.prices.lookup(models[1]):
            _noted(call, f"the reply is from model {models[1]!r}: priced as the dearer")
        counts = _counts(call)
        if counts.input is not None or counts.output is not None:
            costs = [self.prices.cost(m, **_priced(counts)) for m in models]
            call.cost_usd = None if not costs or None in costs else max(c or 0.0 for c in costs)
            call.prices_version = self.prices.version
        if not may_have_spent(call):
            return
        floor = CallTokens(
            **{k: v or 0 for k, v in (usage or ReplyUsage(None)).seen.as_dict().items()}
        )
        floor.raise_to(counts)
        if total_tokens(call) is None:
            call.tokens_at_least = floor.known_sum()
        if call.cost_usd is None:
            bounds = [self.prices.cost(m, **_priced(floor)) for m in models]
            known = [b for b in bounds if b is not None]  # the cheaper: a bound must hold
            call.cost_usd_at_least = min(known) if known else None
            call.prices_version = self.prices.version

    def record(self, call: CallRecord) -> None:
        with self._lock:
            if self._in_flight.pop(call.seq, None) is None:
                return  # given up on at the proxy's stop, recorded then
            self.calls.append(call)
            self._settled.notify_all()
            if may_have_spent(call):  # running totals for admit()
                tokens = total_tokens(call)
                known = tokens if tokens is not None else call.tokens_at_least or 0
                self._spent_tokens += known
                self._spent_usd += (
                    call.cost_usd if call.cost_usd is not None else call.cost_usd_at_least or 0.0
                )
                if tokens is None and self._unknown_tokens is None:
                    self._unknown_tokens = call
                if call.cost_usd is None and self._unknown_cost is None:
                    self._unknown_cost = call
            if self.log_path is not None:
                with self.log_path.open("a", encoding="utf-8") as f:
                    f.write(call.model_dump_json() + "\n")

    @property
    def budget_hit(self) -> bool:
        return self.refusals > 0

    def usage(self) -> Usage:
        """Totals over the calls that reached the upstream, as a metered Usage.

        Only calls that may have spent count (`may_have_spent`). A total is None (unknown)
        when any such call did not report that count, the cost None when any has no known
        cost; then `tokens_at_least` / `cost_usd_at_least` say what is certain (each call's
        count, else its lower bound). With no calls at all, everything is a measured zero:
        nothing went through the proxy.
        """
        with self._lock:
            calls = [c for c in self.calls if c.refused is None and c.api != "other"]
        spent = [c for c in calls if may_have_spent(c)]
        totals = {f: _total(getattr(c, f) for c in spent) for f in TOKEN_FIELDS}
        tokens = [total_tokens(c) for c in spent]
        costs = [c.cost_usd for c in spent]
        models: dict[str, dict[str, int | None]] = {}
        for c in spent:
            m = models.setdefault(c.model or "unknown", {"calls": 0})
            m["calls"] = (m["calls"] or 0) + 1
            for f in TOKEN_FIELDS:
                m[f] = _add(m.get(f, 0), getattr(c, f))
        return Usage.model_validate(
            {
                "source": "metered",
                "calls": len(calls),
                "cost_usd": None if None in costs else sum(c or 0.0 for c in costs),
                "tokens_at_least": None
                if None not in tokens
                else sum(t if t is not None else c.tokens_at_least or 0
                         for t, c in zip(tokens, spent, strict=True)),
                "cost_usd_at_least": None
                if None not in costs
                else sum(c.cost_usd if c.cost_usd is not None else c.cost_usd_at_least or 0.0
                         for c in spent),
                "models": models or None,
                **totals,
            }
        )  # fmt: skip


TOKEN_FIELDS = (
    "input_tokens",
    "output_tokens",
    "cache_read_tokens",
    "cache_write_tokens",
    "reasoning_tokens",
)


def _total(values: Iterable[int | None]) -> int | None:
    vals = list(values)
    return None if None in vals else sum(v or 0 for v in vals)


def _add(a: int | None, b: int | None) -> int | None:
    return None if a is None or b is None else a + b


def _counts(call: CallRecord) -> CallTokens:
    return CallTokens(
        call.input_tokens, call.output_tokens, call.cache_read_tokens, call.cache_write_tokens
    )


def _priced(t: CallTokens) -> dict[str, int | None]:
    """`t` as the price table's keyword arguments."""
    return {"input": t.input, "output": t.output, "cache_read": t.cache_read,
            "cache_write": t.cache_write}  # fmt: skip
