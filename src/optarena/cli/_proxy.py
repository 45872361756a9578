"""`optarena proxy` (the metering proxy, standalone) and `optarena fake-model` (the scripted
model server). Both listen on 127.0.0.1 only and run until interrupted."""

from __future__ import annotations

import contextlib
import threading
from pathlib import Path
from typing import Annotated

import typer

from optarena.cli._app import app, console, err_console
from optarena.fakemodel import SCRIPT_NAMES


def _wait(seconds: float | None) -> None:
    """Block until Ctrl-C (or `seconds`, for scripted use)."""
    with contextlib.suppress(KeyboardInterrupt):
        threading.Event().wait(seconds)


@app.command("proxy")
def proxy_cmd(
    upstream: Annotated[
        str, typer.Option(help="the real API base URL, e.g. https://api.anthropic.com")
    ],
    port: Annotated[int, typer.Option(help="port on 127.0.0.1 (0: any free port)")] = 8787,
    max_calls: Annotated[int | None, typer.Option(min=1, help="refuse calls after N")] = None,
    max_tokens: Annotated[
        int | None, typer.Option(min=1, help="refuse calls after N tokens")
    ] = None,
    max_cost_usd: Annotated[float | None, typer.Option(help="refuse calls after $X")] = None,
    log: Annotated[Path, typer.Option(help="JSONL file, one line per call")] = Path(
        "api_calls.jsonl"
    ),
    prices: Annotated[Path | None, typer.Option(help="price table TOML (default: shipped)")] = None,
    seconds: Annotated[float | None, typer.Option(hidden=True)] = None,
) -> None:
    """Forward model-API calls to UPSTREAM, meter each one, enforce limits. Point an agent at
    it (ANTHROPIC_BASE_URL=http://127.0.0.1:PORT, or a Codex provider with base_url
    http://127.0.0.1:PORT/v1). API keys pass through and are never written down."""
    from optarena.proxy import Meter, MeteringProxy, ProxyLimits, load_prices

    limits = ProxyLimits(max_calls=max_calls, max_tokens=max_tokens, max_cost_usd=max_cost_usd)
    meter = Meter(limits, load_prices(prices), log)
    with MeteringProxy(upstream.removesuffix("/").removesuffix("/v1"), meter, port=port) as p:
        console.print(f"metering proxy on {p.url} -> {upstream}; calls logged to {log}")
        _wait(seconds)
    u = meter.usage()
    err_console.print(
        f"{u.calls} calls, input {u.input_tokens} (+{u.cache_read_tokens} cached), "
        f"output {u.output_tokens}, all {u.tokens_text('unknown')}, cost "
        f"{u.cost_text('unknown')}"
    )


@app.command("fake-model")
def fake_model_cmd(
    script: Annotated[str, typer.Option(help=f"one of: {', '.join(SCRIPT_NAMES)}")] = "optimize",
    task: Annotated[
        str, typer.Option(help="task whose optimized control the script delivers")
    ] = "rmsnorm",
    port: Annotated[int, typer.Option(help="port on 127.0.0.1 (0: any free port)")] = 8788,
    log: Annotated[Path | None, typer.Option(help="JSONL file, one line per reply")] = None,
    error_status: Annotated[int, typer.Option(help="HTTP status of upstream-error")] = 500,
    seconds: Annotated[float | None, typer.Option(hidden=True)] = None,
) -> None:
    """A scripted model server (Anthropic Messages, OpenAI Responses and Chat Completions,
    streaming included) for tests and offline demos. Not a model: it plays a script."""
    from optarena.fakemodel import FakeModelServer, make_script

    s = make_script(script, task, error_status)
    with FakeModelServer(s, port=port, log_path=log) as server:
        console.print(f"scripted model '{s.name}' on {server.url}")
        _wait(seconds)
    err_console.print(f"{len(server.served)} replies served")
