"""A task-tool call is on record from the moment the server receives it: an agent that quits
mid-call, a server stopped by the host, or one killed outright, never loses the call (the
telemetry had 0 lines for calls in flight when the agent quit)."""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import mcp.types
import pytest

from optarena.mcp import ToolsHost

# private: the server's cut-off for a reply, checked in the telemetry
from optarena.mcp._server import CUT_OFF
from optarena.records import NO_END, ToolCallRecord, calls_of, load_tool_call
from optarena.tasks import BUILTIN_DIR


def _workspace(dest: Path) -> Path:
    shutil.copytree(
        BUILTIN_DIR / "rmsnorm" / "baseline", dest, ignore=shutil.ignore_patterns("__pycache__")
    )
    return dest


def _send(proc: subprocess.Popen[bytes], message: dict[str, Any]) -> None:
    assert proc.stdin is not None
    proc.stdin.write(json.dumps(message).encode() + b"\n")
    proc.stdin.flush()


def _start_a_long_measure(proc: subprocess.Popen[bytes]) -> None:
    """What an MCP client sends: initialize, initialized, then a 40 s `measure`."""
    _send(proc, {
        "jsonrpc": "2.0", "id": 1, "method": "initialize",
        "params": {
            "protocolVersion": mcp.types.LATEST_PROTOCOL_VERSION,
            "capabilities": {}, "clientInfo": {"name": "agent", "version": "1"},
        },
    })  # fmt: skip
    assert proc.stdout is not None
    assert b'"id":1' in proc.stdout.readline().replace(b" ", b"")
    _send(proc, {"jsonrpc": "2.0", "method": "notifications/initialized"})
    _send(proc, {
        "jsonrpc": "2.0", "id": 2, "method": "tools/call",
        "params": {"name": "measure", "arguments": {"budget_s": 40}},
    })  # fmt: skip


def _lines(log: Path) -> list[ToolCallRecord]:
    text = log.read_text() if log.exists() else ""
    return [load_tool_call(x) for x in text.splitlines() if x.strip()]


def _wait_for(log: Path, n: int, timeout: float = 60) -> None:
    deadline = time.monotonic() + timeout
    while len(_lines(log)) < n and time.monotonic() < deadline:
        time.sleep(0.05)
    assert len(_lines(log)) >= n, _lines(log)


@pytest.mark.slow
def test_a_call_in_flight_when_the_agent_quits_is_recorded_as_cut_off(tmp_path: Path) -> None:
    """The agent (its relay) quits while `measure` runs: the host stops the server, which
    records the call cut off; before, the server was killed and the call left no line."""
    ws = _workspace(tmp_path / "ws")
    log = tmp_path / "outside" / "tool_calls.jsonl"
    with ToolsHost(str(BUILTIN_DIR / "rmsnorm"), ws, log, max_budget_s=60.0) as host:
        argv = host.argv()
        relay = subprocess.Popen(argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE)
        _start_a_long_measure(relay)
        _wait_for(log, 1)  # received: on record already
        relay.kill()  # the agent quits mid-call
        relay.wait()
        t0 = time.monotonic()
    assert time.monotonic() - t0 < 30  # the host does not wait for the call's 40 s
    (line_start, line_end) = _lines(log)
    assert (line_start.status, line_end.status) == ("started", "cut_off")
    assert line_end.call_id == line_start.call_id and line_end.error == CUT_OFF
    (call,) = calls_of(_lines(log))
    assert call.tool == "measure" and call.status == "cut_off" and call.duration_s is not None


def test_a_server_killed_outright_leaves_its_call_on_record(tmp_path: Path) -> None:
    """kill -9 of the server mid-call: no handler runs, yet the call's `started` line is
    there, and it reads as cut off with no end recorded."""
    ws = _workspace(tmp_path / "ws")
    log = tmp_path / "tool_calls.jsonl"
    cmd = [
        sys.executable, "-m", "optarena", "mcp", "serve", "--task", str(BUILTIN_DIR / "rmsnorm"),
        "--workspace", str(ws), "--telemetry", str(log), "--max-budget-s", "60",
    ]  # fmt: skip
    server = subprocess.Popen(cmd, stdin=subprocess.PIPE, stdout=subprocess.PIPE)
    try:
        _start_a_long_measure(server)
        _wait_for(log, 1)
        os.kill(server.pid, signal.SIGKILL)
    finally:
        server.kill()
        server.wait()
    (call,) = calls_of(_lines(log))
    assert (call.tool, call.status, call.error, call.duration_s) == (
        "measure", "cut_off", NO_END, None,
    )  # fmt: skip


def test_calls_of_reads_one_record_per_call() -> None:
    def line(call_id: str | None, status: str, tool: str = "measure") -> ToolCallRecord:
        return ToolCallRecord(
            call_id=call_id, tool=tool, arguments_sha256="0" * 64,
            started_at="2026-01-01T00:00:00.000+00:00", status=status,  # type: ignore[arg-type]
            duration_s=None if status == "started" else 1.0,
        )  # fmt: skip

    lines = [
        line("1-1", "started"),
        line("1-2", "started", "task_info"),
        line("1-2", "ok", "task_info"),
        line("1-1", "ok"),
        line("1-3", "started"),
        line(None, "ok", "check_correctness"),  # a version 1 line: a whole call
        line(None, "ok", "check_correctness"),
    ]
    calls = calls_of(lines)
    assert [(c.call_id, c.tool, c.status) for c in calls] == [
        ("1-1", "measure", "ok"),
        ("1-2", "task_info", "ok"),
        ("1-3", "measure", "cut_off"),
        (None, "check_correctness", "ok"),
        (None, "check_correctness", "ok"),
    ]
    v1 = '{"tool": "measure", "arguments_sha256": "00", "started_at": "x", "duration_s": 1.0, '
    v1 += '"status": "ok", "result_bytes": 5}'
    assert load_tool_call(v1).call_id is None  # older logs still read
