"""The correctness phase: fresh inputs from a secret seed, the candidate in its own worker, every
output compared with the float64 oracle in the judge's process."""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from optarena.judge._checks import (
    Finding,
    check_dtype,
    check_finite,
    check_inputs_unmodified,
    check_no_alias,
    check_shape,
    check_tolerance,
    check_type,
    digest,
    fail,
    is_stale,
    ok,
    tolerance_violations,
)
from optarena.judge._client import WorkerClient, WorkerError
from optarena.judge._result import Check
from optarena.tasks import Task, Tolerance, Workload


def derive_seed(seed: int, *path: int) -> int:
    """A per-(workload, call) seed: independent streams from one recorded judgement seed."""
    state = np.random.SeedSequence([seed, *path]).generate_state(2, dtype=np.uint32)
    return int(state[0]) << 31 | int(state[1]) >> 1


def array_inputs(args: list[Any], kwargs: dict[str, Any]) -> list[np.ndarray]:
    """The array arguments in the order the worker reports them back."""
    return [a for a in [*args, *kwargs.values()] if isinstance(a, np.ndarray)]


def expected_dtype(workload: Workload, inputs: list[np.ndarray]) -> np.dtype[Any]:
    if "dtype" in workload.params:
        return np.dtype(workload.params["dtype"])
    return inputs[0].dtype if inputs else np.dtype(np.float64)


def evaluate_call(
    reply: dict[str, Any],
    ref: np.ndarray,
    inputs: list[np.ndarray],
    dtype: np.dtype[Any],
    tol: Tolerance,
    earlier: set[bytes],
) -> list[Finding]:
    """All checks for one successful call, in order; numeric checks only when they make sense."""
    findings = [check_type(reply.get("output"))]
    out = reply.get("output")
    if isinstance(out, np.ndarray):
        shape = check_shape(out, ref)
        findings += [shape, check_dtype(out, dtype)]
        if shape.passed:
            findings.append(check_finite(out, ref))
            tolerance = check_tolerance(out, ref, tol.atol, tol.rtol)
            if not tolerance.passed and is_stale(out, earlier):
                tolerance = fail(
                    "tolerance",
                    "stale_output",
                    "output is byte-identical to an earlier call's output (replayed, "
                    f"not computed); {tolerance.detail}",
                )
            findings.append(tolerance)
    findings.append(check_inputs_unmodified(inputs, list(reply.get("inputs_after") or [])))
    findings.append(check_no_alias(bool(reply.get("aliases"))))
    return findings


def remember_if_replayable(out: Any, ref: np.ndarray, tol: Tolerance, earlier: set[bytes]) -> None:
    """Keep the digest of a correct, non-constant output: returning it again later is a replay.

    Constant outputs (all zeros, all ones) are skipped: a constant function returns them honestly.
    """
    if not isinstance(out, np.ndarray) or out.shape != ref.shape or out.size < 2:
        return
    if out.dtype.kind in "fc" and not np.all(np.isfinite(out)):
        return
    if np.min(out) == np.max(out):
        return
    if not np.any(tolerance_violations(out, ref, tol.atol, tol.rtol)):
        earlier.add(digest(out))


@dataclass
class Recorder:
    """Folds per-call findings into one Check per (name, workload) and one reason per failure."""

    checks: dict[tuple[str, str | None], Check] = field(default_factory=dict)
    reasons: list[str] = field(default_factory=list)
    codes: list[str] = field(default_factory=list)
    _seen: set[tuple[str, str | None]] = field(default_factory=set)

    def add(self, f: Finding, workload: str | None, call: int | None = None) -> None:
        key = (f.name, workload)
        where = "" if call is None else f"call {call}: "
        current = self.checks.get(key)
        if f.passed:
            if current is None:
                self.checks[key] = Check(
                    name=f.name, workload=workload, passed=True, detail=f.detail
                )
            elif current.passed:
                current.detail = f.detail
            return
        if current is None or current.passed:
            self.checks[key] = Check(
                name=f.name, workload=workload, passed=False, detail=where + f.detail, code=f.code
            )
        code = f.code or f.name
        if (code, workload) not in self._seen:
            self._seen.add((code, workload))
            scope = f"workload '{workload}' {where}" if workload else ""
            self.reasons.append(f"{code}: {scope}{f.detail}")
        if code not in self.codes:
            self.codes.append(code)

    @property
    def passed(self) -> bool:
        return not self.codes

    def check_list(self) -> list[Check]:
        return list(self.checks.values())


@dataclass
class CorrectnessReport:
    recorder: Recorder
    worker: dict[str, Any]


def run_correctness(
    task: Task, candidate_dir: Path, seed: int, log_path: Path, deadline: float
) -> CorrectnessReport:
    """Judge one private copy of a candidate. Never raises for anything the candidate does."""
    rec = Recorder()
    spec = task.spec
    limits = spec.limits
    info: dict[str, Any] = {}
    with WorkerClient(candidate_dir, limits, log_path) as worker:
        try:
            info = worker.request({"op": "hello"}, timeout=limits.load_timeout_s)
            loaded = worker.request(
                {"op": "load", "file": spec.entry.file, "function": spec.entry.function},
                timeout=limits.load_timeout_s,
            )
        except WorkerError as e:
            rec.add(fail("load", e.code, e.detail), None)
            return CorrectnessReport(rec, info)
        if not loaded.get("ok"):
            rec.add(fail("load", str(loaded.get("code")), str(loaded.get("error"))), None)
            return CorrectnessReport(rec, info)
        rec.add(ok("load", f"{spec.entry.file}:{spec.entry.function}"), None)
        earlier: set[bytes] = set()
        for wi, workload in enumerate(spec.workloads):
            for ci in range(spec.correctness.calls_per_workload):
                left = deadline - time.monotonic()
                if left <= 0:
                    rec.add(
                        fail(
                            "judgement",
                            "timeout",
                            f"total time limit {limits.total_timeout_s:g} s exceeded",
                        ),
                        None,
                    )
                    return CorrectnessReport(rec, info)
                args, kwargs = task.generator(workload, derive_seed(seed, wi, ci))
                inputs = array_inputs(args, kwargs)
                ref = np.asarray(task.oracle(*args, **kwargs), dtype=np.float64)
                try:
                    reply = worker.request(
                        {"op": "call", "args": args, "kwargs": kwargs},
                        timeout=min(limits.call_timeout_s, left),
                    )
                except WorkerError as e:
                    rec.add(fail("call", e.code, e.detail), workload.name, ci)
                    return CorrectnessReport(rec, info)
                if not reply.get("ok"):
                    rec.add(
                        fail("call", str(reply.get("code")), str(reply.get("error"))),
                        workload.name,
                        ci,
                    )
                    break
                rec.add(ok("call"), workload.name, ci)
                dtype = expected_dtype(workload, inputs)
                for finding in evaluate_call(reply, ref, inputs, dtype, spec.tolerance, earlier):
                    rec.add(finding, workload.name, ci)
                remember_if_replayable(reply.get("output"), ref, spec.tolerance, earlier)
    return CorrectnessReport(rec, info)
