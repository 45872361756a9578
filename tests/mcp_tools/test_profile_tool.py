"""The `profile` tool through the SDK's client: where a candidate spends its time, from its own
sandbox, never a verdict; bad arguments and a candidate that fails are clear results."""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

import anyio
from mcp import Client

from optarena.mcp import TaskTools, Telemetry, build_server
from optarena.records import calls_of
from optarena.tasks import Task, resolve_task

TASK: Task = resolve_task("rmsnorm")

# All the time goes into one helper the profile must name first (cProfile times wall clock, so
# the helper must outweigh any preemption a loaded machine adds to the other functions).
SLOW = """
import numpy as np


def _slow_part(x):
    total = 0.0
    for _ in range(400000):  # about 20 ms a call, far more than a preemption adds
        total += 1.0
    return x * (total / total)


def rmsnorm(x, weight, *, eps):
    x = _slow_part(x)
    ms = np.mean(x * x, axis=-1, keepdims=True)
    return x / np.sqrt(ms + eps) * weight
"""
CRASH = "def rmsnorm(x, weight, *, eps):\n    raise RuntimeError('candidate bug')\n"


def _tools(tmp: Path, source: str | None = None) -> TaskTools:
    ws = tmp / "ws"
    shutil.copytree(TASK.baseline_dir, ws, ignore=shutil.ignore_patterns("__pycache__"))
    if source is not None:
        (ws / "solution.py").write_text(source)
    return TaskTools(TASK, ws, Telemetry(tmp / "logs" / "tool_calls.jsonl"))


def _calls(tools: TaskTools, *calls: tuple[str, dict[str, Any]]) -> list[Any]:
    async def go() -> list[Any]:
        async with Client(build_server(tools)) as client:
            return [await client.call_tool(name, args) for name, args in calls]

    return anyio.run(go)


def _json(result: Any) -> Any:
    assert not result.is_error, result
    return json.loads("".join(getattr(c, "text", "") for c in result.content))


def test_profile_names_where_the_time_goes_and_gives_no_verdict(tmp_path: Path) -> None:
    tools = _tools(tmp_path, SLOW)
    (result,) = _calls(tools, ("profile", {"workload": "decode", "calls": 2, "top": 5}))
    out = _json(result)
    assert out["workload"] == "decode" and out["calls"] == 2
    rows = out["functions"]
    assert 1 <= len(rows) <= 5
    assert rows[0]["function"] == "solution.py:5(_slow_part)" and rows[0]["ncalls"] == 2
    assert rows == sorted(rows, key=lambda r: r["tottime_s"], reverse=True)
    assert "verdict" not in out and "diagnostic" in out["note"]
    assert out["sandbox"]["network"]  # the isolation it ran under, in words
    (record,) = calls_of(tools.telemetry.records)
    assert (record.tool, record.status, record.verdict) == ("profile", "ok", None)


def test_profile_defaults_to_the_first_timed_workload(tmp_path: Path) -> None:
    (result,) = _calls(_tools(tmp_path), ("profile", {}))
    first_timed = next(w.name for w in TASK.spec.workloads if w.role == "timed")
    out = _json(result)
    assert out["workload"] == first_timed and out["calls"] == 5
    assert any(r["function"].startswith("solution.py:") for r in out["functions"])


def test_bad_profile_arguments_are_error_results(tmp_path: Path) -> None:
    tools = _tools(tmp_path)
    nope, zero, many = _calls(
        tools,
        ("profile", {"workload": "nope"}),
        ("profile", {"calls": 0}),
        ("profile", {"top": 1000}),
    )
    text = ["".join(getattr(c, "text", "") for c in r.content) for r in (nope, zero, many)]
    assert nope.is_error and "workload 'nope' is not one of this task's" in text[0]
    assert zero.is_error and "calls must be a whole number from 1 to" in text[1]
    assert many.is_error and "top must be a whole number from 1 to" in text[2]
    assert [r.status for r in calls_of(tools.telemetry.records)] == ["error", "error", "error"]


def test_a_candidate_that_fails_gets_no_profile_and_its_error(tmp_path: Path) -> None:
    (result,) = _calls(_tools(tmp_path, CRASH), ("profile", {"calls": 1}))
    out = _json(result)
    assert out["functions"] is None and "failed" in out["why"]
    assert "candidate bug" in out["stderr_tail"]
