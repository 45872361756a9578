"""The metering proxy's added latency per call: N calls straight to the scripted model server,
N through the proxy, interleaved, over kept-alive connections as agents make them.

    python tests/proxy/bench_proxy_latency.py [N]

Prints median and 95th percentile of the time to the last byte, per API and streaming mode,
and the difference. Not a test (timings on a shared machine vary); its numbers go in notes.
"""

from __future__ import annotations

import http.client
import json
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from optarena.fakemodel import FakeModelServer, make_script
from optarena.proxy import MeteredSession, ProxyLimits

BODIES: dict[str, tuple[str, dict[str, Any]]] = {
    "anthropic": (
        "/v1/messages",
        {"model": "claude-sonnet-4-5", "messages": [{"role": "user", "content": "hi"}]},
    ),
    "responses": ("/v1/responses", {"model": "gpt-5", "input": "hi"}),
}


def one_call(conn: http.client.HTTPConnection, path: str, body: bytes) -> float:
    t0 = time.perf_counter()
    conn.request("POST", path, body=body, headers={"content-type": "application/json"})
    conn.getresponse().read()
    return time.perf_counter() - t0


def connect(url: str) -> http.client.HTTPConnection:
    host, port = url.removeprefix("http://").split(":")
    return http.client.HTTPConnection(host, int(port), timeout=30)


def measure(n: int) -> list[str]:
    lines = []
    with (
        FakeModelServer(make_script("hello")) as fake,
        tempfile.TemporaryDirectory() as tmp,
        MeteredSession(fake.url, ProxyLimits(), Path(tmp) / "calls.jsonl") as proxy,
    ):
        direct, via = connect(fake.url), connect(proxy.url)
        for api, (path, req) in BODIES.items():
            for stream in (False, True):
                body = json.dumps(req | {"stream": stream}).encode()
                for _ in range(20):  # warm up both paths
                    one_call(direct, path, body), one_call(via, path, body)
                d, p = [], []
                for _ in range(n):
                    d.append(one_call(direct, path, body))
                    p.append(one_call(via, path, body))
                lines.append(_row(api, stream, d, p))
    return lines


def _row(api: str, stream: bool, d: list[float], p: list[float]) -> str:
    def q95(xs: list[float]) -> float:
        return statistics.quantiles(xs, n=20)[-1]

    md, mp = statistics.median(d), statistics.median(p)
    return (
        f"{api:9} stream={stream!s:5} direct median {md * 1e3:6.2f} ms p95 {q95(d) * 1e3:6.2f}"
        f" | proxy median {mp * 1e3:6.2f} ms p95 {q95(p) * 1e3:6.2f}"
        f" | added median {(mp - md) * 1e3:5.2f} ms"
    )


if __name__ == "__main__":
    count = int(sys.argv[1]) if len(sys.argv) > 1 else 200
    print(f"{count} calls per row, interleaved")
    print("\n".join(measure(count)))
