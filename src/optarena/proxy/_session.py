"""A metering proxy for one agent run: started before the agent, stopped after it, its calls
written to a JSONL log as they happen and to the ledger's `api_calls` table at the end.

The JSONL log (in the trial's logs, so it becomes an artifact) is written call by call, so a
crash mid-run still leaves a record of what was spent; the ledger rows are written in one
transaction once the agent has stopped, from the runner's thread (the ledger's connection is
not shared with the proxy's threads).
"""

from __future__ import annotations

import sqlite3
from pathlib import Path
from types import TracebackType
from typing import TYPE_CHECKING

from optarena.agents._base import Usage
from optarena.agents._prices import PriceTable, load_prices
from optarena.proxy._meter import CallRecord, Meter, ProxyLimits
from optarena.proxy._server import MeteringProxy

if TYPE_CHECKING:
    from optarena.ledger import Ledger

_COLUMNS = (
    "seq", "started_at", "api", "method", "path", "model", "stream", "status", "request_id",
    "reply_id", "latency_s", "ttfb_s", "input_tokens", "output_tokens", "cache_read_tokens",
    "cache_write_tokens", "reasoning_tokens", "cost_usd", "prices_version", "refused", "error",
)  # fmt: skip


def record_calls(ledger: Ledger, trial_id: str, calls: list[CallRecord]) -> None:
    """Insert a trial's call records into `api_calls`, all or none."""
    names = ", ".join(("trial_id", *_COLUMNS))
    marks = ", ".join("?" for _ in range(len(_COLUMNS) + 1))
    rows = [(trial_id, *(getattr(c, k) for k in _COLUMNS)) for c in calls]
    with ledger.transaction() as conn:
        conn.executemany(f"INSERT INTO api_calls ({names}) VALUES ({marks})", rows)


def calls_of(ledger: Ledger, trial_id: str) -> list[CallRecord]:
    """A trial's call records, in arrival order."""
    conn = sqlite3.connect(f"file:{ledger.db_path}?mode=ro", uri=True)
    try:
        rows = conn.execute(
            f"SELECT {', '.join(_COLUMNS)} FROM api_calls WHERE trial_id = ? ORDER BY seq",
            (trial_id,),
        ).fetchall()
    finally:
        conn.close()
    return [CallRecord(**dict(zip(_COLUMNS, tuple(r), strict=True))) for r in rows]


class MeteredSession:
    """Meter + proxy for one run (a context manager). `url` is what the agent talks to."""

    def __init__(
        self,
        upstream: str,
        limits: ProxyLimits,
        log_path: Path,
        *,
        prices: PriceTable | None = None,
        ledger: Ledger | None = None,
        trial_id: str | None = None,
    ) -> None:
        log_path.parent.mkdir(parents=True, exist_ok=True)
        self.log_path = log_path
        self.meter = Meter(limits, prices or load_prices(), log_path)
        self.proxy = MeteringProxy(upstream, self.meter)
        self.ledger, self.trial_id = ledger, trial_id
        self.notes: list[str] = []

    @property
    def url(self) -> str:
        return self.proxy.url

    def __enter__(self) -> MeteredSession:
        self.proxy.start()
        return self

    def __exit__(
        self, t: type[BaseException] | None, e: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.proxy.stop()
        if self.ledger is not None and self.trial_id is not None:
            try:
                record_calls(self.ledger, self.trial_id, self.meter.calls)
            except Exception as err:  # the JSONL log still has every call
                self.notes.append(f"api_calls not written to the ledger: {err}")

    def usage(self) -> Usage:
        return self.meter.usage()

    @property
    def refusals(self) -> list[str]:
        return [c.refused for c in self.meter.calls if c.refused]

    def unpriced_models(self) -> list[str]:
        """Models of answered calls the price table does not know (their cost is unknown)."""
        models = {
            c.model or "unknown" for c in self.meter.calls if c.status == 200 and c.api != "other"
        }
        return sorted(m for m in models if self.meter.prices.lookup(m) is None)
