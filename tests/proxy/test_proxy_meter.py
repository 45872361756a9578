"""Metering arithmetic, limits and the price table, on literal numbers."""

from __future__ import annotations

from pathlib import Path

import pytest

from optarena.errors import SpecError
from optarena.proxy import Meter, PriceTable, ProxyLimits, load_prices
from optarena.records import CallRecord

PRICES = PriceTable.model_validate(
    {
        "schema_version": 1,
        "version": "test-1",
        "as_of": "2026-01-01",
        "currency": "USD",
        "unit": "per_million_tokens",
        "models": [
            {
                "match": ["m-*"],
                "input": 2.0,
                "output": 10.0,
                "cache_read": 0.5,
                "cache_write": 0.0,
                "source": "test",
                "checked": "2026-01-01",
            }
        ],
    }
)


def settle(m: Meter, model: str = "m-1", status: int = 200, **tokens: int | None) -> CallRecord:
    """One call through `m` as the proxy makes it: started, answered with `tokens`, priced,
    recorded."""
    c = m.start(started_at="t", api="responses", method="POST", path="/v1/responses", model=model)
    c.status = status
    for name, value in tokens.items():
        setattr(c, name, value)
    m.account(c, None)
    m.record(c)
    return c


def test_shipped_price_table_loads_and_knows_a_model() -> None:
    table = load_prices()
    assert table.version and table.as_of
    cost = table.cost("claude-sonnet-4-5", input=1_000_000, output=0, cache_read=0, cache_write=0)
    assert cost == pytest.approx(3.0)
    assert table.lookup("claude-opus-4-8[1m]") is not None
    assert table.cost("some-future-model", input=1, output=1) is None


def test_cost_unknown_when_a_priced_count_is_unknown() -> None:
    assert PRICES.cost("m-1", input=1_000_000, output=None) is None
    # cache_write costs nothing here, so its being unknown does not matter
    assert PRICES.cost("m-1", input=1_000_000, output=0, cache_read=0) == pytest.approx(2.0)


def test_bad_price_table_names_the_field(tmp_path: Path) -> None:
    bad = tmp_path / "p.toml"
    bad.write_text('schema_version = 1\nversion = "x"\nas_of = "y"\ncurrency = "EUR"\n')
    with pytest.raises(SpecError, match="currency"):
        load_prices(bad)


def test_totals_and_cost_over_answered_calls(tmp_path: Path) -> None:
    log = tmp_path / "calls.jsonl"
    m = Meter(ProxyLimits(), PRICES, log)
    settle(m, input_tokens=100, output_tokens=10, cache_read_tokens=1000)
    settle(m, input_tokens=50, output_tokens=5, cache_read_tokens=0)
    settle(m, status=500)  # failed: no tokens, not billed
    u = m.usage()
    assert (u.calls, u.input_tokens, u.output_tokens, u.cache_read_tokens) == (3, 150, 15, 1000)
    assert u.cost_usd == pytest.approx((150 * 2 + 15 * 10 + 1000 * 0.5) / 1e6)
    assert u.reasoning_tokens is None  # no call reported it
    assert len(log.read_text().splitlines()) == 3


def test_unpriced_model_makes_the_total_cost_unknown() -> None:
    m = Meter(ProxyLimits(), PRICES)
    settle(m, input_tokens=1, output_tokens=1)
    settle(m, "other", input_tokens=1, output_tokens=1)
    assert m.usage().cost_usd is None


def test_no_calls_is_a_measured_zero() -> None:
    u = Meter(ProxyLimits(), PRICES).usage()
    assert (u.calls, u.cost_usd, u.input_tokens) == (0, 0, 0)


@pytest.mark.parametrize(
    ("limits", "reason"),
    [
        (ProxyLimits(max_calls=2), "call budget exhausted (2 of 2 calls made)"),
        (ProxyLimits(max_tokens=300), "token budget exhausted (330 of 300 tokens used)"),
        (ProxyLimits(max_cost_usd=0.0005), "cost budget exhausted ($0.0008 of $0.0005"),
    ],
)
def test_limits_refuse_the_next_call(limits: ProxyLimits, reason: str) -> None:
    m = Meter(limits, PRICES)
    for _ in (1, 2):
        assert m.admit("m-1") is None
        settle(m, input_tokens=100, output_tokens=15, cache_read_tokens=50)
    refusal = m.admit("m-1")
    assert refusal is not None and refusal.startswith(reason)
    assert m.budget_hit
    assert Meter(ProxyLimits(max_calls=3), PRICES).admit() is None


def test_calls_sent_side_by_side_cannot_all_be_admitted_under_a_budget() -> None:
    """The budget counts a call when it is admitted: two calls in flight at once under
    max_calls=1 are one call and one refusal, whatever order their replies end in."""
    m = Meter(ProxyLimits(max_calls=1), PRICES)
    assert m.admit() is None
    second = m.admit()  # the first has no reply yet
    assert second is not None and second.startswith("call budget exhausted (1 of 1")


def test_drain_waits_for_every_call_in_flight() -> None:
    import threading

    m = Meter(ProxyLimits(), PRICES)
    c = m.start(started_at="t", api="chat", method="POST", path="/v1/chat/completions")
    assert m.drain(0.01) == 1  # started, not recorded: still in flight
    t = threading.Timer(0.2, m.record, args=(c,))
    t.start()
    assert m.drain(30) == 0 and len(m.calls) == 1
    t.join()


def test_a_budget_an_unknown_count_would_break_refuses_the_next_call() -> None:
    """Unknown is not zero: an answered call without token counts stops a token budget, one
    without a known cost stops a cost budget, and an unpriced model is refused at once under a
    cost budget. A failed call (no reply to count) stops nothing."""
    m = Meter(ProxyLimits(max_tokens=10**6), PRICES)
    assert m.admit("m-1") is None
    settle(m, status=500)  # failed: nothing to count
    assert m.admit("m-1") is None
    settle(m)  # answered, no counts
    assert (m.admit("m-1") or "").startswith("call 2's token count is unknown")
    c = Meter(ProxyLimits(max_cost_usd=1.0), PRICES)
    assert (
        c.admit("no-such-model")
        == "no price for model 'no-such-model': the cost budget cannot be kept"
    )
    assert c.admit("m-1") is None
    settle(c, input_tokens=5)  # counted, but no cost was worked out for it
    assert (c.admit("m-1") or "").startswith("call 1 has no known cost")


def test_under_a_budget_a_call_waits_for_the_calls_before_it() -> None:
    """A count still coming is unknown: under a token budget the next call is admitted only
    once the earlier ones are recorded; still in flight after the wait, it is refused. With
    no token or cost budget nothing waits."""
    import threading

    m = Meter(ProxyLimits(max_tokens=10**6), PRICES)
    first = m.start(started_at="t", api="chat", method="POST", path="/v1/chat/completions")
    assert m.admit("m-1", seq=first.seq) is None
    nxt = m.start(started_at="t", api="chat", method="POST", path="/v1/chat/completions")
    refusal = m.admit("m-1", seq=nxt.seq, wait_s=0.05)
    assert refusal == (
        "call(s) 1 still in flight after 0.05 s: their counts are unknown, so the budget "
        "cannot be kept"
    )
    nxt.refused = refusal
    m.record(nxt)  # as the proxy records a refused call
    first.status, first.input_tokens, first.output_tokens = 200, 10, 10
    threading.Timer(0.2, m.record, args=(first,)).start()
    later = m.start(started_at="t", api="chat", method="POST", path="/v1/chat/completions")
    assert m.admit("m-1", seq=later.seq, wait_s=30) is None  # once call 1 is counted
    free = Meter(ProxyLimits(max_calls=10), PRICES)
    a = free.start(started_at="t", api="chat", method="POST", path="/v1/chat/completions")
    b = free.start(started_at="t", api="chat", method="POST", path="/v1/chat/completions")
    assert free.admit("m-1", seq=a.seq) is None and free.admit("m-1", seq=b.seq) is None
