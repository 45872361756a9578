"""The task tools over MCP, through the SDK's own client: every tool, bad arguments, telemetry,
and that nothing the tools return quotes the oracle."""

from __future__ import annotations

import json
import shutil
import sys
import tempfile
from pathlib import Path
from typing import Any

import anyio
import pytest
from mcp import Client, StdioServerParameters

from optarena.mcp import TOOL_NAMES, TaskTools, Telemetry, build_server

# private: the tools' redaction and the host's limit, attacked directly
from optarena.mcp._tools import redact
from optarena.records import ToolCallRecord, calls_of
from optarena.tasks import BUILTIN_DIR, Task, load_task

WRONG = """
import numpy as np


def rmsnorm(x, weight, *, eps):
    return x * weight  # no normalisation
"""


@pytest.fixture(scope="module")
def small_task(tmp_path_factory: pytest.TempPathFactory) -> Task:
    """rmsnorm with a smaller prefill: quick to measure."""
    root = tmp_path_factory.mktemp("tools") / "rmsnorm"
    shutil.copytree(BUILTIN_DIR / "rmsnorm", root, ignore=shutil.ignore_patterns("__pycache__"))
    spec = root / "task.toml"
    text = spec.read_text()
    assert "shape = [2, 256, 4096]" in text
    spec.write_text(text.replace("shape = [2, 256, 4096]", "shape = [2, 64, 4096]", 1))
    return load_task(root)


def _workspace(task: Task, dest: Path, source: str | None = None) -> Path:
    shutil.copytree(task.baseline_dir, dest, ignore=shutil.ignore_patterns("__pycache__"))
    if source is not None:
        (dest / "solution.py").write_text(source)
    return dest


def _call(tools: TaskTools, name: str, args: dict[str, Any] | None = None) -> Any:
    async def go() -> Any:
        async with Client(build_server(tools)) as client:
            listed = await client.list_tools()
            assert sorted(t.name for t in listed.tools) == sorted(TOOL_NAMES)
            return await client.call_tool(name, args or {})

    return anyio.run(go)


def _text(result: Any) -> str:
    return "".join(getattr(c, "text", "") for c in result.content)


def test_task_info_states_the_contract(small_task: Task, tmp_path: Path) -> None:
    tools = TaskTools(small_task, _workspace(small_task, tmp_path / "ws"), Telemetry(None))
    result = _call(tools, "task_info")
    assert not result.is_error
    info = json.loads(_text(result))
    assert info["entry"] == {"file": "solution.py", "function": "rmsnorm"}
    assert info["editable"] == ["solution.py"]
    assert {w["role"] for w in info["workloads"]} == {"timed", "check", "edge"}
    assert "rmsnorm" in info["contract"].lower()


def test_check_correctness_accepts_the_baseline_and_rejects_a_wrong_file(
    small_task: Task, tmp_path: Path
) -> None:
    log = tmp_path / "logs" / "tool_calls.jsonl"
    good = TaskTools(small_task, _workspace(small_task, tmp_path / "good"), Telemetry(log))
    ok = json.loads(_text(_call(good, "check_correctness")))
    assert ok["verdict"] == "accepted" and ok["failed_checks"] == []
    bad = TaskTools(small_task, _workspace(small_task, tmp_path / "bad", WRONG), Telemetry(log))
    result = _call(bad, "check_correctness")
    assert not result.is_error
    text = _text(result)
    out = json.loads(text)
    assert out["verdict"] == "rejected" and "out_of_tolerance" in out["reason_codes"]
    assert all("expected" not in f["detail"] for f in out["failed_checks"])
    assert "seed" not in out
    lines = calls_of(ToolCallRecord.model_validate_json(x) for x in log.read_text().splitlines())
    assert [(r.tool, r.status, r.verdict) for r in lines] == [
        ("check_correctness", "ok", "accepted"),
        ("check_correctness", "ok", "rejected"),
    ]
    assert lines[1].result_bytes > 0 and (lines[1].duration_s or 0) > 0


def test_measure_returns_a_ratio_within_the_capped_budget(small_task: Task, tmp_path: Path) -> None:
    tools = TaskTools(
        small_task, _workspace(small_task, tmp_path / "ws"), Telemetry(None), max_budget_s=4.0
    )
    out = json.loads(_text(_call(tools, "measure", {"budget_s": 500})))
    assert out["verdict"] == "accepted"
    speed = out["speed"]
    assert speed["budget_s"] == 4.0  # capped
    assert speed["ratio"] is not None and 0.5 < speed["ratio"] < 2.0
    # the baseline against itself: any verdict but a change backed by an interval is fine here
    assert speed["verdict"] in ("no_difference", "inconclusive") or speed["ratio_ci"] is not None
    assert speed["why"]
    assert tools.telemetry.records[-1].verdict == speed["verdict"]


def test_bad_arguments_are_an_error_result_and_the_server_keeps_serving(
    small_task: Task, tmp_path: Path
) -> None:
    tools = TaskTools(small_task, _workspace(small_task, tmp_path / "ws"), Telemetry(None))

    async def go() -> tuple[Any, Any, Any]:
        async with Client(build_server(tools)) as client:
            neg = await client.call_tool("measure", {"budget_s": -3})
            typ = await client.call_tool("measure", {"budget_s": "soon"})
            info = await client.call_tool("task_info", {})
            return neg, typ, info

    neg, typ, info = anyio.run(go)
    assert neg.is_error and "budget_s must be a positive number" in _text(neg)
    assert typ.is_error and "budget_s" in _text(typ)
    assert not info.is_error
    assert [r.status for r in calls_of(tools.telemetry.records)] == ["error", "ok"]


def test_a_missing_workspace_is_an_error_result(small_task: Task, tmp_path: Path) -> None:
    tools = TaskTools(small_task, tmp_path / "gone", Telemetry(None))
    result = _call(tools, "check_correctness")
    assert result.is_error and "does not exist" in _text(result)


def test_a_sparse_editable_file_of_terabytes_is_an_error_not_a_full_disk(
    small_task: Task, tmp_path: Path
) -> None:
    """The agent chooses the size of what a tool copies: a 1 TB sparse `solution.py` costs it
    nothing, and a copy of it would have written a terabyte of zeros."""
    ws = _workspace(small_task, tmp_path / "ws")
    with open(ws / "solution.py", "r+b") as f:
        f.truncate(1 << 40)
    result = _call(TaskTools(small_task, ws, Telemetry(None)), "check_correctness")
    assert result.is_error and "more than 256 MiB" in _text(result)


def test_served_over_stdio_by_the_cli(small_task: Task, tmp_path: Path) -> None:
    ws = _workspace(small_task, tmp_path / "ws", WRONG)
    log = tmp_path / "logs" / "calls.jsonl"
    params = StdioServerParameters(
        command=sys.executable,
        args=[
            "-m",
            "optarena",
            "mcp",
            "serve",
            "--task",
            str(small_task.root),
            "--workspace",
            str(ws),
            "--telemetry",
            str(log),
        ],
    )

    async def go() -> Any:
        async with Client(params) as client:
            return await client.call_tool("check_correctness", {})

    out = json.loads(_text(anyio.run(go)))
    assert out["verdict"] == "rejected"
    lines = [ToolCallRecord.model_validate_json(x) for x in log.read_text().splitlines()]
    assert [(x.status, x.verdict) for x in lines] == [("started", None), ("ok", "rejected")]


def test_redact_drops_oracle_values_only() -> None:
    detail = (
        "3 of 64 elements outside atol 1e-05 + rtol 0.0001*|ref|; max abs error 0.5; "
        "first at (0, 1): got 1.5, expected 1.0"
    )
    assert redact(detail).endswith("first at (0, 1): got 1.5")
    assert redact("expected shape (4, 8), got (8, 4)") == "expected shape (4, 8), got (8, 4)"
    assert redact("got nan, expected -inf") == "got nan"


@pytest.mark.parametrize("tcp", [False, True], ids=["unix-socket", "loopback-port"])
def test_a_contained_agent_reaches_the_tools_through_the_relay(
    small_task: Task, tmp_path: Path, tcp: bool
) -> None:
    """The agent's side runs only the relay; the server (and its telemetry) is the host's."""
    from optarena.mcp import ToolsHost

    ws = _workspace(small_task, tmp_path / "ws", WRONG)
    log = tmp_path / "outside" / "calls.jsonl"
    with ToolsHost(str(small_task.root), ws, log, max_budget_s=5.0, tcp=tcp) as host:
        argv = host.argv()
        params = StdioServerParameters(command=argv[0], args=argv[1:])

        async def go() -> tuple[Any, Any]:
            async with Client(params) as client:
                info = await client.call_tool("task_info", {})
                check = await client.call_tool("check_correctness", {})
                return info, check

        info, check = anyio.run(go)
        assert host.served == 1
    assert json.loads(_text(info))["id"] == "rmsnorm"
    assert json.loads(_text(check))["verdict"] == "rejected"
    lines = calls_of(ToolCallRecord.model_validate_json(x) for x in log.read_text().splitlines())
    assert [x.tool for x in lines] == ["task_info", "check_correctness"]
    assert not host.socket_path.exists()


def test_an_agent_opening_connections_in_a_loop_starts_at_most_two_servers(
    small_task: Task, tmp_path: Path
) -> None:
    """Each server runs as optarena's user, outside the agent's process limit: a connection
    beyond the limit is closed at once instead of starting another one."""
    import socket
    import time

    from optarena.mcp import ToolsHost

    # private: see above
    from optarena.mcp._host import MAX_SERVERS

    ws = _workspace(small_task, tmp_path / "ws", WRONG)
    with ToolsHost(str(small_task.root), ws, tmp_path / "calls.jsonl", tcp=True) as host:
        assert host.port is not None
        held = [socket.create_connection(("127.0.0.1", host.port)) for _ in range(MAX_SERVERS)]
        deadline = time.monotonic() + 10
        while host.served < MAX_SERVERS and time.monotonic() < deadline:
            time.sleep(0.02)
        extra = [socket.create_connection(("127.0.0.1", host.port)) for _ in range(5)]
        for s in extra:
            s.settimeout(10)
            assert s.recv(1) == b""  # closed by the host, no server behind it
        assert host.served == MAX_SERVERS and host.refused == 5
        for s in [*held, *extra]:
            s.close()


def test_calls_sent_side_by_side_are_judged_one_at_a_time(
    small_task: Task, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Two judgements at once would time each other (and double what runs outside the
    agent's limits): a server answers one call at a time."""
    import threading
    import time

    tools = TaskTools(small_task, _workspace(small_task, tmp_path / "ws", WRONG), Telemetry(None))
    running, most = [0], [0]
    lock = threading.Lock()

    def slow_call(tool: str, arguments: dict[str, Any], received: object = None) -> dict[str, Any]:
        with lock:
            running[0] += 1
            most[0] = max(most[0], running[0])
        time.sleep(0.2)
        with lock:
            running[0] -= 1
        return {"tool": tool}

    monkeypatch.setattr(tools, "call", slow_call)

    async def go() -> None:
        async with Client(build_server(tools)) as client, anyio.create_task_group() as tg:
            for _ in range(3):
                tg.start_soon(client.call_tool, "check_correctness", {})

    anyio.run(go)
    assert most[0] == 1


PEEK = """
import pathlib

try:
    SEEN = pathlib.Path({path!r}).read_text()
except OSError as e:
    SEEN = "unreadable: " + type(e).__name__


def rmsnorm(x, weight, *, eps):
    raise ValueError("the other trial says: " + SEEN)
"""


def test_a_candidate_checked_by_the_tools_reads_no_other_trials_workspace(
    small_task: Task, tmp_path: Path
) -> None:
    """The candidate runs in the judge's worker sandbox, and its error message comes back in
    the tool's result: another trial's world-readable workspace must not be readable there."""
    base = Path(tempfile.mkdtemp(prefix=".tools-test-", dir=Path(__file__).resolve().parents[2]))
    try:
        base.chmod(0o755)
        other = base / "ledger" / "work" / "t0" / "workspace" / "solution.py"
        other.parent.mkdir(parents=True)
        for d in (base / "ledger", base / "ledger" / "work", other.parent.parent, other.parent):
            d.chmod(0o755)  # as a ledger made before ledgers were private
        other.write_text("OTHER-TRIAL-SECRET-4411")
        other.chmod(0o644)
        ws = _workspace(small_task, tmp_path / "ws", PEEK.format(path=str(other)))
        text = _text(_call(TaskTools(small_task, ws, Telemetry(None)), "check_correctness"))
        assert json.loads(text)["verdict"] == "rejected"
        assert "OTHER-TRIAL-SECRET-4411" not in text and "unreadable" in text, text
    finally:
        shutil.rmtree(base)
