"""What each task tool does, independent of MCP: the judge on the workspace's current files.

Every call judges a fresh copy of the editable files on inputs from a new secret seed (the
judge draws one per judgement), in the same sandbox as any judgement. Results carry verdicts,
reason codes and how far off an output was, never an expected value of the oracle, and never
the seed. Each call is appended to the telemetry log by this process, not by the agent: when it
arrives and when it ends, or is cut off by the server's stop.
"""

from __future__ import annotations

import itertools
import json
import os
import re
import secrets
import tempfile
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, Literal

from optarena.files import UntrustedFileError, copy_untrusted
from optarena.judge import JudgeOptions, JudgeResult, judge
from optarena.mcp._errors import ToolInputError
from optarena.mcp._profile import MAX_CALLS, MAX_TOP, profile_candidate
from optarena.records import ToolCallRecord, ToolCallStatus, arguments_sha256
from optarena.tasks import Task, in_scope

TOOL_NAMES = ("task_info", "check_correctness", "measure", "profile")
PROFILE_CALLS = 5
PROFILE_TOP = 15
DEFAULT_MAX_BUDGET_S = 60.0
SNAPSHOT_LIMIT = 256 << 20  # bytes of editable files a tool call copies (the agent chose them)

# "..., expected 0.123" in a tolerance detail is one oracle value: the tools never show one.
_EXPECTED_VALUE = re.compile(
    r",?\s*expected\s+[-+]?(?:nan|inf|\d+(?:\.\d*)?(?:e[-+]?\d+)?)", re.IGNORECASE
)


class Telemetry:
    """Appends one JSON line when a call arrives and one when it ends (or is cut off), each in
    one `write` to a file opened with O_APPEND, then synced: a killed server loses no call it
    received. One write per line needs no lock, so the SIGTERM handler can write too."""

    def __init__(self, path: Path | None) -> None:
        self.path = path
        self.records: list[ToolCallRecord] = []
        if path is not None:
            path.parent.mkdir(parents=True, exist_ok=True)

    def write(self, record: ToolCallRecord) -> None:
        self.records.append(record)
        if self.path is None:
            return
        line = record.model_dump_json() + "\n"
        fd = os.open(self.path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
        try:
            os.write(fd, line.encode())
            os.fsync(fd)
        finally:
            os.close(fd)


@dataclass(frozen=True)
class _Call:
    """A call received and not yet ended."""

    call_id: str
    tool: str
    arguments_sha256: str
    started_at: str
    t0: float

    def record(self, status: ToolCallStatus, **fields: Any) -> ToolCallRecord:
        duration = None if status == "started" else round(time.monotonic() - self.t0, 4)
        return ToolCallRecord(
            call_id=self.call_id,
            tool=self.tool,
            arguments_sha256=self.arguments_sha256,
            started_at=self.started_at,
            duration_s=duration,
            status=status,
            **fields,
        )


def _count(name: str, value: Any, default: int, most: int) -> int:
    if value is None:
        return default
    if isinstance(value, bool) or not isinstance(value, int) or not 1 <= value <= most:
        raise ToolInputError(f"{name} must be a whole number from 1 to {most}, got {value!r}")
    return value


def redact(detail: str) -> str:
    """A check's detail without the oracle values it quotes."""
    return _EXPECTED_VALUE.sub("", detail)


class TaskTools:
    """The tools for one task and one workspace (the agent's working copy)."""

    def __init__(
        self,
        task: Task,
        workspace: Path,
        telemetry: Telemetry,
        max_budget_s: float = DEFAULT_MAX_BUDGET_S,
        judge_fn: Callable[[Task, Path, JudgeOptions], JudgeResult] = judge,
    ) -> None:
        self.task = task
        self.workspace = workspace
        self.telemetry = telemetry
        self.max_budget_s = max_budget_s
        self._judge = judge_fn
        self._session = secrets.token_hex(4)  # call ids unique among servers sharing a log
        self._ids = itertools.count(1)
        self._in_flight: dict[str, _Call] = {}

    # -- the tools ------------------------------------------------------------------------

    def task_info(self) -> dict[str, Any]:
        spec = self.task.spec
        prompt = self.task.root / spec.prompt
        return {
            "id": spec.id,
            "version": spec.version,
            "title": spec.title,
            "entry": {"file": spec.entry.file, "function": spec.entry.function},
            "editable": list(spec.editable),
            "tolerance": {"atol": spec.tolerance.atol, "rtol": spec.tolerance.rtol},
            "workloads": [
                {"name": w.name, "role": w.role, "description": w.description, "params": w.params}
                for w in spec.workloads
            ],
            "contract": prompt.read_text() if prompt.is_file() else None,
        }

    def check_correctness(self) -> dict[str, Any]:
        result = self._run(JudgeOptions(measure=False))
        return self._correctness_view(result)

    def measure(self, budget_s: float | None = None) -> dict[str, Any]:
        if budget_s is not None and not (isinstance(budget_s, int | float) and budget_s > 0):
            raise ToolInputError(f"budget_s must be a positive number of seconds, got {budget_s!r}")
        budget = min(float(budget_s or self.max_budget_s), self.max_budget_s)
        result = self._run(JudgeOptions(measure=True, budget_s=budget))
        view = self._correctness_view(result)
        m = result.metrics
        if m is None:
            view["speed"] = None
            view["speed_note"] = "no measurement: a rejected candidate gets no speed figure"
            return view
        view["speed"] = {
            "verdict": m.verdict,
            "ratio": m.overall.ratio,
            "ratio_ci": m.overall.ratio_ci,
            "why": m.overall.why,
            "budget_s": budget,
            "stop": m.stop.model_dump(),
            "workloads": [
                {
                    "name": w.name,
                    "ratio": w.summary.ratio,
                    "ratio_ci": w.summary.ratio_ci,
                    "verdict": w.summary.verdict,
                }
                for w in m.workloads
            ],
            "note": "ratio = candidate time / baseline time; below 1 is faster",
        }
        return view

    def profile(
        self, workload: str | None = None, calls: int | None = None, top: int | None = None
    ) -> dict[str, Any]:
        """Where the candidate spends its time on one workload: a diagnostic, never a verdict."""
        n = _count("calls", calls, PROFILE_CALLS, MAX_CALLS)
        k = _count("top", top, PROFILE_TOP, MAX_TOP)
        if workload is not None and not isinstance(workload, str):
            raise ToolInputError(f"workload must be a workload's name, got {workload!r}")
        lim = self.task.spec.limits
        timeout = lim.load_timeout_s + (n + 1) * lim.call_timeout_s
        with self._snapshot() as snapshot:
            return profile_candidate(self.task, snapshot, workload, n, k, timeout)

    # -- telemetry around every call ------------------------------------------------------

    def begin(self, tool: str, arguments: dict[str, Any]) -> _Call:
        """Record a call as it arrives (before it waits its turn): it is on record even if
        the server never gets to end it."""
        call = _Call(
            call_id=f"{self._session}-{next(self._ids)}",
            tool=tool,
            arguments_sha256=arguments_sha256(arguments),
            started_at=datetime.now(UTC).isoformat(timespec="milliseconds"),
            t0=time.monotonic(),
        )
        self._in_flight[call.call_id] = call
        self.telemetry.write(call.record("started"))
        return call

    def cut_off(self, why: str) -> None:
        """Record every call still running as cut off (the server is being stopped)."""
        for call in list(self._in_flight.values()):
            if self._in_flight.pop(call.call_id, None) is not None:
                self.telemetry.write(call.record("cut_off", error=why))

    def call(
        self, tool: str, arguments: dict[str, Any], received: _Call | None = None
    ) -> dict[str, Any]:
        """Run `tool` and record its end, whatever happens (ToolInputError re-raised)."""
        call = received or self.begin(tool, arguments)
        status: Literal["ok", "error"] = "ok"
        error = None
        out: dict[str, Any] = {}
        try:
            out = self._dispatch(tool, arguments)
            return out
        except Exception as e:
            status, error = "error", f"{type(e).__name__}: {e}"
            raise
        finally:
            speed = out.get("speed") if isinstance(out.get("speed"), dict) else None
            if self._in_flight.pop(call.call_id, None) is not None:  # else cut off already
                self.telemetry.write(
                    call.record(
                        status,
                        result_bytes=len(json.dumps(out, default=str)) if status == "ok" else 0,
                        verdict=(speed or {}).get("verdict") or out.get("verdict"),
                        error=error,
                    )
                )

    def _dispatch(self, tool: str, arguments: dict[str, Any]) -> dict[str, Any]:
        if tool == "task_info":
            return self.task_info()
        if tool == "check_correctness":
            return self.check_correctness()
        if tool == "measure":
            return self.measure(arguments.get("budget_s"))
        if tool == "profile":
            return self.profile(
                arguments.get("workload"), arguments.get("calls"), arguments.get("top")
            )
        raise ToolInputError(f"unknown tool {tool!r}; the tools are {', '.join(TOOL_NAMES)}")

    # -- helpers ----------------------------------------------------------------------------

    def _run(self, options: JudgeOptions) -> JudgeResult:
        """Judge a snapshot of the workspace: the agent may keep editing while it runs."""
        with self._snapshot() as snapshot:
            return self._judge(self.task, snapshot, options)

    @contextmanager
    def _snapshot(self) -> Iterator[Path]:
        """A private copy of the workspace, removed afterwards."""
        if not self.workspace.is_dir():
            raise ToolInputError(f"the workspace {self.workspace} does not exist")
        with tempfile.TemporaryDirectory(prefix="optarena-tool-") as tmp:
            snapshot = Path(tmp) / "candidate"
            # The agent runs meanwhile: never through a link it swaps in (see copy_untrusted)
            editable = self.task.spec.editable
            try:
                copy_untrusted(
                    self.workspace,
                    snapshot,
                    skip=(".git", "__pycache__"),
                    want=lambda rel: in_scope(rel, editable),
                    max_bytes=SNAPSHOT_LIMIT,
                )
            except UntrustedFileError:
                raise ToolInputError(
                    f"the editable files hold more than {SNAPSHOT_LIMIT >> 20} MiB"
                ) from None
            yield snapshot

    @staticmethod
    def _correctness_view(result: JudgeResult) -> dict[str, Any]:
        failed = [c for c in result.checks if not c.passed]
        return {
            "verdict": result.verdict,
            "reason_codes": list(result.reason_codes),
            "failed_checks": [
                {
                    "check": c.name,
                    "workload": c.workload,
                    "code": c.code,
                    "detail": redact(c.detail),
                }
                for c in failed
            ],
            "checks_passed": sum(c.passed for c in result.checks),
            "checks_total": len(result.checks),
            "note": "a tool result is advice to you, never the trial's score: the trial is "
            "judged again, on fresh inputs, after you stop",
        }
