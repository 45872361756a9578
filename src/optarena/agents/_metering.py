"""Metering, one mechanism for every runner: the trial's model-API proxy around `run`.

A runner that talks to a model says where its calls go (`AgentRunner.upstream`); then a
metering proxy is started for the run, the runner gets its URL in `RunContext.proxy_url` (and
its port opened in the agent sandbox), and the proxy's limits are the run's `max_calls`,
`max_tokens` and `max_cost_usd`. Afterwards the outcome carries the metered usage beside the
runner's own report (never merged into it), every call record, and `budget_exceeded` when the
proxy refused a call. A runner that asks for no proxy gets none, and its `metered_usage` stays
None (not metered), which is different from zero metered calls.
"""

from __future__ import annotations

import os
from dataclasses import replace
from urllib.parse import urlsplit

from optarena.agents._base import AgentRunner, RunContext
from optarena.agents._storable import storable_outcome
from optarena.proxy import MeteredSession, ProxyLimits, Upstreams
from optarena.records import AgentLimits, AgentOutcome, evolve


def proxy_limits(limits: AgentLimits) -> ProxyLimits:
    """What the proxy enforces of a run's limits (the rest the process tree enforces)."""
    return ProxyLimits(
        max_calls=limits.max_calls, max_tokens=limits.max_tokens, max_cost_usd=limits.max_cost_usd
    )


def run_metered(
    runner: AgentRunner, context: RunContext, prompt: str, limits: AgentLimits
) -> AgentOutcome:
    """`runner.run`, inside a metering proxy when the runner names an upstream; the outcome
    made storable (`storable_outcome`: it carries what the agent wrote)."""
    upstream = runner.upstream({**os.environ, **context.env})
    if upstream is None:
        return storable_outcome(runner.run(context, prompt, limits))
    base: Upstreams
    if isinstance(upstream, str):
        base = _base_url(upstream)
    else:
        base = {provider: _base_url(url) for provider, url in upstream.items()}
    context.paths.logs.mkdir(parents=True, exist_ok=True)
    with MeteredSession(base, proxy_limits(limits), context.paths.calls_log) as session:
        port = urlsplit(session.url).port
        metered = replace(
            context,
            proxy_url=session.url,
            proxy_ports=(*context.proxy_ports, *([port] if port else [])),
            metered=session.usage,
        )
        outcome = runner.run(metered, prompt, limits)
    return storable_outcome(with_metering(outcome, session))


def _base_url(url: str) -> str:
    """The API's root: agents append `/v1/...` themselves."""
    return url.removesuffix("/").removesuffix("/v1")


def with_metering(outcome: AgentOutcome, session: MeteredSession) -> AgentOutcome:
    """The outcome with what the proxy saw: usage, calls, its log, refusals, unpriced models.
    A refused call makes the run `budget_exceeded` unless it timed out (we killed it first)."""
    status, detail = outcome.status, outcome.detail
    if session.refusals and status != "timeout":
        status = "budget_exceeded"
        detail = f"the metering proxy refused a call: {session.refusals[0]}"
    notes = []
    if session.unmetered_refused:
        paths = ", ".join(sorted(set(session.unmetered_refused)))
        notes.append(f"the proxy refused requests it cannot meter: {paths}")
    notes += session.notes()
    bridged = (outcome.sandbox or {}).get("bridge_refused")
    if bridged:
        notes.append(f"the agent's network bridge refused {bridged} connection(s) over its limit")
    return evolve(
        outcome,
        status=status,
        detail="; ".join(d for d in [detail, *notes] if d),
        metered_usage=session.usage(),
        calls=session.calls,
        logs={**outcome.logs, "api_calls": str(session.log_path)},
        extra={**outcome.extra, "proxy": {"url": session.url, "refusals": session.refusals}},
    )
