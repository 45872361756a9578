"""The relay in front of an activated server records every tool call it passes on: a line it
cannot read (nested too deep for its parser, say) is not passed on, so no call runs unlogged;
a tools/call in a JSON-RPC batch is noted like any other."""

from __future__ import annotations

import json
import socket
import sys
from pathlib import Path
from typing import IO, Any

from harness_example import BENCH_SERVER
from optarena.harness import ServerHost, read_telemetry


def _send(f: IO[bytes], msg: Any) -> None:
    f.write((msg if isinstance(msg, bytes) else json.dumps(msg).encode()) + b"\n")
    f.flush()


def _reply(f: IO[bytes]) -> dict[str, Any]:
    while True:
        msg = json.loads(f.readline())
        if "id" in msg:
            return dict(msg)


def _call(i: Any, n: int) -> dict[str, Any]:
    params = {"name": "probe", "arguments": {"n": n}}
    return {"jsonrpc": "2.0", "id": i, "method": "tools/call", "params": params}


def test_every_call_that_reaches_the_server_is_in_the_log(tmp_path: Path) -> None:
    snap = tmp_path / "snapshots" / "bench"
    snap.mkdir(parents=True)
    (snap / "server.py").write_text(BENCH_SERVER)
    host = ServerHost("bench", snap, [sys.executable, "server.py"])
    host.telemetry = tmp_path / "calls.jsonl"
    host.start()
    try:
        assert host.port is not None
        with socket.create_connection(("127.0.0.1", host.port), timeout=60) as s:
            f = s.makefile("rwb")
            init = {
                "protocolVersion": "2025-06-18",
                "capabilities": {},
                "clientInfo": {"name": "t", "version": "1"},
            }
            _send(f, {"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": init})
            assert "result" in _reply(f)
            _send(f, {"jsonrpc": "2.0", "method": "notifications/initialized"})
            # unreadable to the relay: dropped, never run by the server
            _send(f, b'{"a":' * 100_000 + b"1" + b"}" * 100_000)
            _send(f, _call([1], 11))  # an id the log could not key: dropped too
            _send(f, _call(2, 7))
            assert "checked 7 rows" in json.dumps(_reply(f))
    finally:
        host.close()
    calls = read_telemetry(host.telemetry.read_text())
    assert [(c.tool, c.status, c.arguments) for c in calls] == [("probe", "ok", {"n": 7})]
