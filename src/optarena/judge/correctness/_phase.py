"""The correctness phase: fresh inputs from a secret seed, the candidate in its own worker, every
output compared with the float64 oracle in the judge's process."""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from optarena.judge._result import Check
from optarena.judge.client import (
    CallResult,
    WorkerClient,
    WorkerError,
    arena_bytes,
    one_blas_thread,
)
from optarena.judge.correctness._call_checks import contract_findings, returned
from optarena.judge.correctness._checks import (
    Finding,
    check_dtype,
    check_finite,
    check_precision,
    check_shape,
    check_tolerance,
    digest,
    fail,
    is_stale,
    ok,
)
from optarena.judge.correctness._native import build_record, compile_finding, load_request
from optarena.sandbox import SandboxPolicy
from optarena.tasks import REASON_CODES, Task, Tolerance, Workload


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
    result: CallResult,
    ref: np.ndarray,
    dtype: np.dtype[Any],
    tol: Tolerance,
    earlier: set[bytes],
) -> list[Finding]:
    """All checks for one successful call, in order; numeric checks only when they make sense."""
    out = returned(result, ref.shape)
    if isinstance(out, Finding):
        findings = [out]
    else:
        findings = [ok("output_type", "numpy.ndarray")]
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
            if not tolerance.passed:
                findings.append(check_precision(out))
    return findings + contract_findings(result)


def remember_if_replayable(out: Any, checks: list[Finding], earlier: set[bytes]) -> None:
    """Keep the digest of a correct, non-constant output: returning it again later is a replay.

    Correct is what `evaluate_call` found (`checks`: its tolerance check passed, so the output
    is an array of the oracle's shape within tolerance), not computed again. Constant outputs
    (all zeros, all ones) are skipped: a constant function returns them honestly.
    """
    if not any(f.name == "tolerance" and f.passed for f in checks):
        return
    if not isinstance(out, np.ndarray) or out.size < 2:
        return
    if out.dtype.kind in "fc" and not np.all(np.isfinite(out)):
        return
    if np.min(out) == np.max(out):
        return
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
    sandbox: dict[str, Any] = field(default_factory=dict)


def guard_findings(reply: dict[str, Any]) -> list[Finding]:
    """What the worker's guard saw (protected reads, writes outside, network, patching, late
    output changes). A candidate can suppress these, never turn them into a pass."""
    found = []
    violations = reply.get("violations") or []
    if not isinstance(violations, list):  # the reply came through the candidate's process
        return [fail("guard", "protocol_violation", "a guard report that is not a list")]
    for v in violations:
        if isinstance(v, dict) and v.get("code"):
            code, detail = str(v["code"]), str(v.get("detail", ""))
            if code not in REASON_CODES:  # the reply came through the candidate's process
                code, detail = "protocol_violation", f"a guard report of unknown kind {code!r}"
            found.append(fail("guard", code, detail))
    return found


def stray_findings(worker: WorkerClient) -> list[Finding]:
    """Processes the candidate started that outlived the call are killed, and a finding."""
    strays = worker.strays()
    if not strays:
        return []
    worker.kill_strays()
    return [
        fail(
            "processes",
            "process_outlived_call",
            f"{len(strays)} process(es) it started were still running after the call returned",
        )
    ]


FAILED_VALUE_CHECKS = ("tolerance", "finite")
_PLAN_TAG = 0x91A9  # keeps the call plan's random stream apart from the inputs' streams


def _values_failed(findings: list[Finding]) -> bool:
    return any(f.name in FAILED_VALUE_CHECKS and not f.passed for f in findings)


@dataclass(frozen=True)
class PlannedCall:
    """One correctness call: which workload, its index there, and its inputs (judge-only)."""

    wi: int
    ci: int
    args: list[Any]
    kwargs: dict[str, Any]


def plan_calls(task: Task, seed: int) -> list[PlannedCall]:
    """Every correctness call, from the secret seed: how many per workload (between the task's
    count and twice it) and in what order (workloads interleaved at random), so a candidate
    cannot count its way to the end of the checked calls or tell which workload comes next."""
    rng = np.random.default_rng(derive_seed(seed, _PLAN_TAG))
    n = task.spec.correctness.calls_per_workload
    calls = []
    for wi, workload in enumerate(task.spec.workloads):
        for ci in range(n + int(rng.integers(0, n + 1))):
            args, kwargs = task.generator(workload, derive_seed(seed, wi, ci))
            calls.append(PlannedCall(wi, ci, args, kwargs))
    order = rng.permutation(len(calls))
    return [calls[int(i)] for i in order]


def area_sizes(calls: list[list[np.ndarray]]) -> tuple[int, int]:
    """Input and output areas for these calls: the inputs with their layouts, and room for an
    output four times the largest call's input bytes (a wrong shape beyond that is rejected)."""
    biggest = max((sum(a.nbytes for a in arrays) for arrays in calls), default=0)
    return arena_bytes(calls), 4 * biggest + (1 << 20)


@dataclass
class _Session:
    """One correctness phase against one worker; `run` never raises for the candidate."""

    task: Task
    worker: WorkerClient
    seed: int
    deadline: float
    calls: list[PlannedCall]
    rec: Recorder = field(default_factory=Recorder)
    earlier: set[bytes] = field(default_factory=set)
    first_pass: PlannedCall | None = None
    replayed: bool = False

    def _call(self, call: PlannedCall) -> tuple[dict[str, Any], list[Finding]] | None:
        """One call on fresh inputs; the oracle runs only after the candidate has answered,
        so the expected output never exists while candidate code runs."""
        workload = self.task.spec.workloads[call.wi]
        inputs = array_inputs(call.args, call.kwargs)
        left = self.deadline - time.monotonic()
        timeout = max(min(self.task.spec.limits.call_timeout_s, left), 1e-3)
        try:
            result = self.worker.call(call.args, call.kwargs, timeout)
        except WorkerError as e:
            detail = e.detail
            if e.code == "timeout" and left < self.task.spec.limits.call_timeout_s:
                detail = f"total time limit {self.task.spec.limits.total_timeout_s:g} s reached"
            self.rec.add(fail("call", e.code, detail), workload.name, call.ci)
            return None
        reply = result.reply
        findings = guard_findings(reply) + stray_findings(self.worker)
        if not reply.get("ok"):
            findings.append(fail("call", str(reply.get("code")), str(reply.get("error"))))
            return reply, findings
        ref = np.asarray(self.task.oracle(*call.args, **call.kwargs), dtype=np.float64)
        dtype = expected_dtype(workload, inputs)
        tol = self.task.spec.tolerance
        checks = evaluate_call(result, ref, dtype, tol, self.earlier)
        findings = [ok("call"), *checks, *findings]
        remember_if_replayable(result.output, checks, self.earlier)
        return reply, findings

    def _replay_first_pass(self, call: PlannedCall) -> None:
        """After a wrong value: the inputs of the first correct call, again. Wrong now means the
        result depends on how many calls came before (warm-up detection), not on the input."""
        if self.first_pass is None or self.replayed:
            return
        self.replayed = True
        first = self.first_pass
        earlier, self.earlier = self.earlier, set()  # a replay is not a replay of itself
        result = self._call(first)
        self.earlier = earlier
        if result is not None and _values_failed(result[1]):
            name = self.task.spec.workloads[first.wi].name
            detail = (
                f"call {first.ci} of workload '{name}' was correct earlier, but the same inputs "
                "now give a wrong output: the behaviour depends on the call history (warm-up "
                "detection, a call counter), not on the inputs"
            )
            here = self.task.spec.workloads[call.wi].name
            self.rec.add(fail("history", "history_dependent", detail), here, call.ci)

    def run_calls(self) -> None:
        spec = self.task.spec
        failed: set[int] = set()  # workloads whose call raised: no more calls there
        for call in self.calls:
            if call.wi in failed:
                continue
            if self.deadline - time.monotonic() <= 0:
                total = spec.limits.total_timeout_s
                detail = f"total time limit {total:g} s exceeded"
                self.rec.add(fail("judgement", "timeout", detail), None)
                return
            result = self._call(call)
            if result is None:
                return
            reply, findings = result
            workload = spec.workloads[call.wi]
            for finding in findings:
                self.rec.add(finding, workload.name, call.ci)
            if not reply.get("ok"):
                failed.add(call.wi)
                continue
            if _values_failed(findings):
                self._replay_first_pass(call)
            elif self.first_pass is None and all(f.passed for f in findings):
                self.first_pass = call

    def settle(self) -> None:
        """A short pause, then: did the guard see anything at the end, is anything left?"""
        left = self.deadline - time.monotonic()
        if left <= 0:
            return
        try:
            timeout = max(min(left, 5.0), 1e-3)
            reply = self.worker.request({"op": "settle", "delay_s": 0.05}, timeout)
        except WorkerError as e:
            self.rec.add(fail("settle", e.code, e.detail), None)
            return
        for finding in guard_findings(reply) + stray_findings(self.worker):
            self.rec.add(finding, None)


def run_correctness(
    task: Task,
    candidate_dir: Path,
    seed: int,
    log_path: Path,
    deadline: float,
    *,
    policy: SandboxPolicy | None = None,
) -> CorrectnessReport:
    """Judge one private copy of a candidate. Never raises for anything the candidate does."""
    spec = task.spec
    limits = spec.limits
    info: dict[str, Any] = {}
    calls = plan_calls(task, seed)
    sizes = area_sizes([array_inputs(c.args, c.kwargs) for c in calls])
    # The oracle's products on one BLAS thread: the pool's threads would spin on the CPUs the
    # worker's calls run on (a call's timeout counts their time), and on a small machine
    # everything else's (`client/_blas`).
    with (
        one_blas_thread(),
        WorkerClient(
            candidate_dir, limits, log_path, policy=policy, protect=[task.root], arena_bytes=sizes
        ) as w,
    ):
        session = _Session(task, w, seed, deadline, calls)
        rec = session.rec
        load_timeout = max(min(limits.load_timeout_s, deadline - time.monotonic()), 1e-3)
        try:
            info = w.request({"op": "hello"}, timeout=load_timeout)
            loaded = w.request(load_request(spec, load_timeout), timeout=load_timeout)
        except WorkerError as e:
            rec.add(fail("load", e.code, e.detail), None)
            return CorrectnessReport(rec, info, w.sandbox_report())
        for finding in guard_findings(loaded) + stray_findings(w):
            rec.add(finding, None)
        build = build_record(spec)
        if build is not None:
            info = {**info, "build": build}
            rec.add(compile_finding(build, loaded), None)
        if not loaded.get("ok"):
            rec.add(fail("load", str(loaded.get("code")), str(loaded.get("error"))), None)
            return CorrectnessReport(rec, info, w.sandbox_report())
        rec.add(ok("load", f"{spec.entry.file}:{spec.entry.function}"), None)
        session.run_calls()
        if w.proc is not None and w.proc.poll() is None and rec.passed:
            session.settle()
    return CorrectnessReport(rec, info, w.sandbox_report())
