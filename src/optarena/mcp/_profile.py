"""The `profile` tool: where the candidate spends its time, as a diagnostic, never a verdict.

The candidate runs in its own sandbox (the same isolation and the task's worker limits as any
judgement, the task package hidden) on fresh inputs of one workload, drawn from a new secret
seed; `_profile_driver.py` makes a warm-up call, then profiles a few calls with cProfile and
prints the functions by own time. The numbers come from a process the candidate runs in: they
are advice, and nothing here is recorded as a result of the trial.
"""

from __future__ import annotations

import os
import pickle
import secrets
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from optarena.mcp._errors import ToolInputError
from optarena.sandbox import ResourceLimits, Sandbox, SandboxPolicy
from optarena.tasks import Task, Workload

DRIVER = Path(__file__).resolve().with_name("_profile_driver.py")
MAX_CALLS = 20
MAX_TOP = 50
MAX_OUTPUT_BYTES = 1 << 20
INPUTS = ".optarena-profile-inputs.pkl"
# What the judge's worker gets too: single-threaded BLAS, nothing of optarena's environment.
_ENV = {"OPENBLAS_NUM_THREADS": "1", "OMP_NUM_THREADS": "1", "MKL_NUM_THREADS": "1"}


class ProfileRow(BaseModel):
    model_config = ConfigDict(extra="forbid")

    function: str = Field(max_length=400)
    ncalls: int = Field(ge=0)
    tottime_s: float = Field(ge=0.0, description="time in the function itself")
    cumtime_s: float = Field(ge=0.0, description="time including what it called")


class ProfileOutput(BaseModel):
    """The driver's line, checked: it is written by a process the candidate runs in."""

    model_config = ConfigDict(extra="forbid")

    calls: int = Field(ge=1)
    wall_s: float = Field(ge=0.0)
    rows: list[ProfileRow] = Field(max_length=MAX_TOP)


def pick_workload(task: Task, name: str | None) -> Workload:
    """The named workload, else the first timed one (the one `measure` weighs), else the first."""
    workloads = task.spec.workloads
    if name is not None:
        found = next((w for w in workloads if w.name == name), None)
        if found is None:
            known = ", ".join(w.name for w in workloads)
            raise ToolInputError(f"workload {name!r} is not one of this task's: {known}")
        return found
    return next((w for w in workloads if w.role == "timed"), workloads[0])


def profile_candidate(
    task: Task, snapshot: Path, workload: str | None, calls: int, top: int, timeout_s: float
) -> dict[str, Any]:
    """Profile the entry in `snapshot` (a private copy: it is handed to the sandbox's uid)."""
    w = pick_workload(task, workload)
    args, kwargs = task.generator(w, secrets.randbits(63))
    with (snapshot / INPUTS).open("wb") as f:
        pickle.dump((args, kwargs), f)
    entry = task.spec.entry
    lim = task.spec.limits
    limits = ResourceLimits(
        address_space_mb=lim.memory_mb,
        cpu_s=lim.cpu_s,
        file_size_mb=lim.file_size_mb,
        open_files=lim.open_files,
        processes=lim.processes,
    )
    sandbox = Sandbox(snapshot, limits, SandboxPolicy(), hide=[task.root], needed=[DRIVER.parent])
    argv = [sys.executable, "-I", str(DRIVER), entry.file, entry.function, INPUTS]
    env = {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "HOME": str(snapshot), **_ENV}
    with tempfile.TemporaryDirectory(prefix="optarena-profile-") as tmp:
        out = _run(sandbox, [*argv, str(calls), str(top)], env, Path(tmp), timeout_s, w.name)
    report = sandbox.report()
    out["sandbox"] = {k: report.get(k) for k in ("network", "user", "filesystem", "pid")}
    return out


def _run(
    sandbox: Sandbox, argv: list[str], env: dict[str, str], tmp: Path, timeout_s: float, name: str
) -> dict[str, Any]:
    """The driver in the sandbox, its stdout read back (capped) once the sandbox is closed."""
    out_path, err_path = tmp / "out", tmp / "err"
    try:
        with out_path.open("wb") as out, err_path.open("wb") as err:
            proc = sandbox.spawn(argv, env=env, stdout=out, stderr=err)
            try:
                proc.wait(timeout=timeout_s)
            except subprocess.TimeoutExpired:
                return _no_profile(name, f"the calls did not finish within {timeout_s:.0f} s")
    finally:
        sandbox.close()
    if proc.returncode != 0:  # the candidate chose how much it wrote: read only what is shown
        with err_path.open("rb") as f:
            f.seek(max(0, os.fstat(f.fileno()).st_size - 600))
            tail = f.read(600).decode(errors="replace").strip()
        return _no_profile(name, f"the candidate's process failed (exit {proc.returncode})", tail)
    with out_path.open("rb") as f:
        return _view(name, f.read(MAX_OUTPUT_BYTES))


def _view(workload: str, raw: bytes) -> dict[str, Any]:
    lines = raw.decode(errors="replace").strip().splitlines()
    try:
        parsed = ProfileOutput.model_validate_json(lines[-1] if lines else "")
    except ValidationError:
        return _no_profile(workload, "the profile the candidate's process printed is unreadable")
    return {
        "workload": workload,
        "calls": parsed.calls,
        "wall_s": round(parsed.wall_s, 6),
        "functions": [
            r.model_dump()
            | {"tottime_s": round(r.tottime_s, 6), "cumtime_s": round(r.cumtime_s, 6)}
            for r in parsed.rows
        ],
        "note": "cProfile, sorted by own time (tottime_s); profiling slows Python-level calls, "
        "so use it for where, not how fast. A diagnostic, never a verdict.",
    }


def _no_profile(workload: str, why: str, stderr: str | None = None) -> dict[str, Any]:
    return {"workload": workload, "functions": None, "why": why, "stderr_tail": stderr}
