"""Per-trial accounting for the metering proxy: one record per model call, running totals,
and the limits that refuse the next call once a budget is spent.

Limits are checked before a call is forwarded: a call in flight is never cut mid-stream, so a
run can overshoot a budget by at most the calls it had in flight when the budget ran out; the
next call is refused with an API error the agent shows. A budget the proxy cannot keep (an
answered call without token counts under a token limit, a model without a price under a cost
limit) refuses the next call too: unknown is not zero. Records never hold request headers,
so API keys never reach a log or the ledger.
"""

from __future__ import annotations

import threading
from collections.abc import Iterable
from pathlib import Path

from pydantic import BaseModel, ConfigDict, Field

from optarena.proxy._prices import PriceTable
from optarena.proxy._wire import CallTokens
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
    """Every token a call processed (input, cached or not, and output); None: none known."""
    parts = [call.input_tokens, call.cache_read_tokens, call.cache_write_tokens]
    parts.append(call.output_tokens)
    if all(p is None for p in parts):
        return None
    return sum(p or 0 for p in parts)


def set_tokens(call: CallRecord, t: CallTokens | None) -> None:
    """Copy what the reply said it used onto the call's record (nothing when it said nothing)."""
    if t is None:
        return
    call.input_tokens, call.output_tokens = t.input, t.output
    call.cache_read_tokens, call.cache_write_tokens = t.cache_read, t.cache_write
    call.reasoning_tokens = t.reasoning


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
        self._lock = threading.Lock()
        self._settled = threading.Condition(self._lock)  # notified when a call is recorded
        self._in_flight: set[int] = set()  # seqs handed out, not yet recorded
        self._seq = 0
        self._spent_calls, self._spent_tokens, self._spent_usd = 0, 0, 0.0
        # the first answered call whose tokens, or whose cost, the reply left unknown (its seq)
        self._unknown_tokens: int | None = None
        self._unknown_cost: int | None = None

    def next_seq(self) -> int:
        """A new call's number; the call is in flight until `record` takes it."""
        with self._lock:
            self._seq += 1
            self._in_flight.add(self._seq)
            return self._seq

    def admit(self, model: str | None = None) -> str | None:
        """None to forward the next call (for `model`); else the reason it is refused.

        An admitted call counts against the call budget at once, not when its reply ends:
        otherwise calls sent side by side would all be admitted under a budget of one."""
        with self._lock:
            reason = self._over_budget() or self._unenforceable(model)
            if reason:
                self.refusals += 1
            else:
                self._spent_calls += 1
            return reason

    def _unenforceable(self, model: str | None) -> str | None:
        """Why a set token or cost limit could not be kept for the next call: an unknown
        count is not zero, so a budget that depends on one is refused rather than ignored."""
        lim = self.limits
        if lim.max_tokens is not None and self._unknown_tokens is not None:
            return (
                f"call {self._unknown_tokens} reported no token counts: the token budget "
                "cannot be kept (for Chat Completions streams, ask for "
                "stream_options.include_usage)"
            )
        if lim.max_cost_usd is not None:
            if self.prices.lookup(model) is None:
                return f"no price for model {model!r}: the cost budget cannot be kept"
            if self._unknown_cost is not None:
                return (
                    f"call {self._unknown_cost} has no known cost: the cost budget cannot be kept"
                )
        return None

    def drain(self, timeout_s: float) -> int:
        """Wait until every call in flight is recorded (a reply reaches the agent before its
        record is written, so an agent that exits at once must not take its last call with
        it). Returns how many calls were still in flight at the timeout."""
        with self._settled:
            self._settled.wait_for(lambda: not self._in_flight, timeout=timeout_s)
            return len(self._in_flight)

    def _over_budget(self) -> str | None:
        lim, n, tokens, cost = self.limits, self._spent_calls, self._spent_tokens, self._spent_usd
        if lim.max_calls is not None and n >= lim.max_calls:
            return f"call budget exhausted ({n} of {lim.max_calls} calls made)"
        if lim.max_tokens is not None and tokens >= lim.max_tokens:
            return f"token budget exhausted ({tokens} of {lim.max_tokens} tokens used)"
        if lim.max_cost_usd is not None and cost >= lim.max_cost_usd:
            return f"cost budget exhausted (${cost:.4f} of ${lim.max_cost_usd:.4f} spent)"
        return None

    def price(self, call: CallRecord) -> None:
        """Fill the call's cost from the price table (None when model or counts unknown)."""
        if call.input_tokens is None and call.output_tokens is None:
            return
        call.cost_usd = self.prices.cost(
            call.model,
            input=call.input_tokens,
            output=call.output_tokens,
            cache_read=call.cache_read_tokens,
            cache_write=call.cache_write_tokens,
        )
        call.prices_version = self.prices.version

    def record(self, call: CallRecord) -> None:
        with self._lock:
            self.calls.append(call)
            self._in_flight.discard(call.seq)
            self._settled.notify_all()
            if call.refused is None and call.api != "other":  # running totals for admit()
                tokens = total_tokens(call)
                self._spent_tokens += tokens or 0
                self._spent_usd += call.cost_usd or 0.0
                answered = call.status is not None and call.status < 400
                if answered and tokens is None and self._unknown_tokens is None:
                    self._unknown_tokens = call.seq
                if answered and call.cost_usd is None and self._unknown_cost is None:
                    self._unknown_cost = call.seq
            if self.log_path is not None:
                with self.log_path.open("a", encoding="utf-8") as f:
                    f.write(call.model_dump_json() + "\n")

    @property
    def budget_hit(self) -> bool:
        return self.refusals > 0

    def usage(self) -> Usage:
        """Totals over the calls that reached the upstream, as a metered Usage.

        Only answered calls (HTTP 200) spend tokens; providers do not bill failed ones. A
        total is None (unknown) when any answered call did not report that count, and the
        cost is None when any answered call has no price. With no calls at all, everything
        is a measured zero: nothing went through the proxy.
        """
        with self._lock:
            calls = [c for c in self.calls if c.refused is None and c.api != "other"]
        answered = [c for c in calls if c.status == 200]
        totals = {f: _total(getattr(c, f) for c in answered) for f in TOKEN_FIELDS}
        costs = [c.cost_usd for c in answered]
        models: dict[str, dict[str, int | None]] = {}
        for c in answered:
            m = models.setdefault(c.model or "unknown", {"calls": 0})
            m["calls"] = (m["calls"] or 0) + 1
            for f in TOKEN_FIELDS:
                m[f] = _add(m.get(f, 0), getattr(c, f))
        return Usage.model_validate(
            {
                "source": "metered",
                "calls": len(calls),
                "cost_usd": None if None in costs else sum(c or 0.0 for c in costs),
                "models": models or None,
                **totals,
            }
        )


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
