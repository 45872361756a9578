"""A metering proxy for one agent run: started before the agent, stopped after it, its calls
appended to a JSONL log as they happen and returned as records (`calls`) when it stops.

The proxy never writes the ledger: the trial's finish records the calls with everything else,
in one transaction, and if the trial never finishes (Ctrl-C, `kill -9`), the ledger takes the
calls from the JSONL log (in the trial's logs, so it also becomes an artifact) when it marks
the trial interrupted.
"""

from __future__ import annotations

from pathlib import Path
from types import TracebackType

from optarena.proxy import _server
from optarena.proxy._meter import Meter, ProxyLimits, may_have_spent, total_tokens
from optarena.proxy._prices import PriceTable, load_prices
from optarena.proxy._server import MeteringProxy, Upstreams
from optarena.records import CallRecord, Usage


class MeteredSession:
    """Meter + proxy for one run (a context manager). `url` is what the agent talks to."""

    def __init__(
        self,
        upstream: Upstreams,
        limits: ProxyLimits,
        log_path: Path,
        *,
        prices: PriceTable | None = None,
    ) -> None:
        log_path.parent.mkdir(parents=True, exist_ok=True)
        self.log_path = log_path
        self.meter = Meter(limits, prices or load_prices(), log_path)
        self.proxy = MeteringProxy(upstream, self.meter)

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

    @property
    def calls(self) -> list[CallRecord]:
        """Every call the proxy saw, in arrival order (what the trial records). The meter
        holds them in the order their records were written, which is not it: a reply reaches
        the agent before its record is written, so the agent's next call can be recorded
        first (the JSONL log keeps that order; each record's `seq` is its arrival)."""
        return sorted(self.meter.calls, key=lambda c: c.seq)

    def usage(self) -> Usage:
        return self.meter.usage()

    @property
    def refusals(self) -> list[str]:
        """Why calls to the metered APIs were refused (budgets)."""
        return [c.refused for c in self.meter.calls if c.refused and c.api != "other"]

    @property
    def unmetered_refused(self) -> list[str]:
        """Paths of requests refused because the proxy cannot meter them."""
        return [c.path for c in self.meter.calls if c.refused and c.api == "other"]

    def notes(self) -> list[str]:
        """What the trial's outcome should say about its metering beyond the refusals:
        calls whose counts are unknown (and why the first is), connections refused over the
        proxy's limit, models without a price."""
        out = []
        unknown = [c for c in self.meter.calls if may_have_spent(c) and total_tokens(c) is None]
        if unknown:
            seqs = ", ".join(str(c.seq) for c in unknown[:10])
            more = " ..." if len(unknown) > 10 else ""
            why = unknown[0].usage_note or "not reported"
            out.append(f"token counts unknown for call(s) {seqs}{more} ({why})")
        if self.meter.refused_connections:
            out.append(
                f"the proxy refused {self.meter.refused_connections} connection(s) over its "
                f"limit of {_server.MAX_CONNECTIONS} at once"
            )
        if self.unpriced_models():
            out.append(f"no price for {', '.join(self.unpriced_models())}: cost unknown")
        return out

    def unpriced_models(self) -> list[str]:
        """Models of answered calls the price table does not know (their cost is unknown)."""
        models = {c.model or "unknown" for c in self.meter.calls if may_have_spent(c)}
        return sorted(m for m in models if self.meter.prices.lookup(m) is None)
