"""The one relay host: relayed, every tools/call becomes one `ToolCallRecord` line (the server's
name, the arguments, the reply's excerpt), a call the server never answers included (`cut_off`);
handed over, the connection is the server's own stdio; beyond `max_servers` a connection is
closed at once."""

from __future__ import annotations

import json
import socket
import sys
import time
from pathlib import Path
from typing import IO, Any

from optarena.agents import RelayHost
from optarena.records import NO_REPLY, arguments_sha256, load_tool_call

# A stdio "server": answers `echo` with its arguments, exits without answering `quit`.
SERVER = """
import json, sys
for line in sys.stdin:
    msg = json.loads(line)
    if msg["params"]["name"] == "quit":
        sys.exit(0)
    out = {"jsonrpc": "2.0", "id": msg["id"], "result": {"echo": msg["params"]["arguments"]}}
    print(json.dumps(out), flush=True)
"""


class _Host(RelayHost):
    def __init__(self, script: Path, record: bool, **kw: Any) -> None:
        super().__init__("echo", record=record, **kw)
        self.script = script

    def launch(self, n: int, workdir: Path) -> tuple[list[str], Path | None]:
        assert workdir.is_dir()
        return [sys.executable, str(self.script)], workdir


def _call(f: IO[bytes], i: int, name: str, arguments: Any) -> None:
    params = {"name": name, "arguments": arguments}
    msg = {"jsonrpc": "2.0", "id": i, "method": "tools/call", "params": params}
    f.write(json.dumps(msg).encode() + b"\n")
    f.flush()


def _lines(path: Path, n: int) -> list[str]:
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        lines = path.read_text().splitlines() if path.exists() else []
        if len(lines) >= n:
            return lines
        time.sleep(0.05)
    raise AssertionError(f"{n} lines expected in {path}")


def test_a_relayed_call_is_recorded_answered_or_not(tmp_path: Path) -> None:
    script = tmp_path / "server.py"
    script.write_text(SERVER)
    log = tmp_path / "calls.jsonl"
    with _Host(script, record=True, telemetry=log) as host:
        assert host.port is not None and host.argv()[-2:] == ["--port", str(host.port)]
        with socket.create_connection(("127.0.0.1", host.port), timeout=30) as s:
            f = s.makefile("rwb")
            _call(f, 1, "echo", {"n": 7})
            assert json.loads(f.readline())["result"] == {"echo": {"n": 7}}
            _call(f, 2, "quit", None)
            assert f.readline() == b""  # the server ended without a reply
        ok, cut = (load_tool_call(x) for x in _lines(log, 2))
    assert (ok.server, ok.tool, ok.status, ok.arguments) == ("echo", "echo", "ok", {"n": 7})
    assert ok.arguments_sha256 == arguments_sha256({"n": 7}) and '"n": 7' in ok.result
    assert ok.duration_s is not None and ok.call_id != cut.call_id
    assert (cut.tool, cut.status, cut.error, cut.duration_s) == ("quit", "cut_off", NO_REPLY, None)


def test_a_handed_over_connection_is_the_servers_stdio_and_extra_ones_are_refused(
    tmp_path: Path,
) -> None:
    script = tmp_path / "server.py"
    script.write_text(SERVER)
    with _Host(script, record=False, tcp=False, max_servers=1) as host:
        assert host.argv()[-2:] == ["--socket", str(host.socket_path)]
        first = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        first.connect(str(host.socket_path))
        f = first.makefile("rwb")
        _call(f, 1, "echo", [1])
        assert json.loads(f.readline())["result"] == {"echo": [1]}
        second = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        second.connect(str(host.socket_path))
        second.settimeout(30)
        assert second.recv(1) == b""  # closed at once: one server was running
        assert host.served == 1 and host.refused == 1
        second.close()
        f.close()
        first.close()  # the server's input ends: it exits
    assert not host.socket_path.parent.exists()
