"""Deterministic instruction counts per call, beside time and never instead of it.

Hardware counters are often missing on virtual machines (perf reports `<not supported>` for
`instructions` here), so the count comes from valgrind's callgrind, which simulates the CPU and
counts every instruction executed. Each arm runs in its own worker under callgrind with
collection off; the worker makes each call through one ctypes call (libffi's `ffi_call`), and
`--toggle-collect=ffi_call --dump-after=ffi_call` collects exactly that call and writes one
dump per call. The count includes the CPython interpreter's own work for the call.

A candidate that itself calls through ctypes during the call would nest `ffi_call` and corrupt
the count; then the number of dumps does not match the number of calls and the result says so.
Counts are written by a process the candidate runs in: a diagnostic, not evidence.
"""

from __future__ import annotations

import os
import shutil
from collections.abc import Callable
from pathlib import Path

from optarena.files import temporary_tree
from optarena.judge.client import WorkerClient, WorkerError
from optarena.judge.correctness import derive_seed, load_request
from optarena.judge.speed._stats import median
from optarena.records import Instructions, evolve
from optarena.sandbox import SandboxPolicy
from optarena.tasks import Task

CALLS_PER_WORKLOAD = 3  # the first is a warm-up, the median of the rest is reported
_TAG = 0x696E73  # input stream for counting, apart from correctness and timing
TOOL = "valgrind-callgrind"


def unavailable_reason() -> str | None:
    if shutil.which("valgrind") is None:
        return "valgrind is not installed, and no hardware-counter path is implemented"
    return None


def parse_total(text: str) -> int | None:
    """The instruction total of one callgrind dump (`summary:` or `totals:` line)."""
    for line in text.splitlines():
        if line.startswith(("summary:", "totals:")):
            fields = line.split()
            if len(fields) >= 2 and fields[1].isdigit():
                return int(fields[1])
    return None


def _dump_totals(out_dir: Path) -> list[int | None]:
    """Totals of the numbered dumps `cg.out.N`, in order of N."""
    parts = []
    for f in out_dir.glob("cg.out.*"):
        suffix = f.name.rsplit(".", 1)[-1]
        if suffix.isdigit():
            parts.append((int(suffix), f))
    return [parse_total(f.read_text(errors="replace")) for _, f in sorted(parts)]


class _ArmCounter:
    """One arm in one worker under callgrind."""

    def __init__(self, task: Task, workdir: Path, out_dir: Path, policy: SandboxPolicy | None):
        self.task = task
        self.out_dir = out_dir
        limits = evolve(task.spec.limits, memory_mb=max(task.spec.limits.memory_mb, 16384))
        # (16 GiB at least: valgrind's own maps)
        prefix = [
            "valgrind",
            "--tool=callgrind",
            "--collect-atstart=no",
            "--toggle-collect=ffi_call",
            "--dump-after=ffi_call",
            f"--callgrind-out-file={out_dir}/cg.out",
        ]
        log = out_dir.parent / f"{out_dir.name}.log"
        self.client = WorkerClient(
            workdir, limits, log, policy=policy, protect=[task.root], prefix=prefix
        )

    def run(self, seed: int) -> tuple[dict[str, float], str | None]:
        spec = self.task.spec
        timed = [(wi, w) for wi, w in enumerate(spec.workloads) if w.role == "timed"]
        slow = 50.0  # everything runs tens of times slower under callgrind
        with self.client as c:
            c.request({"op": "hello"}, timeout=spec.limits.load_timeout_s * slow)
            load = load_request(spec, spec.limits.load_timeout_s * slow)
            if not c.request(load, timeout=spec.limits.load_timeout_s * slow).get("ok"):
                return {}, "the entry did not load under valgrind"
            for wi, w in timed:
                calls = []
                for ci in range(CALLS_PER_WORKLOAD):
                    args, kwargs = self.task.generator(w, derive_seed(seed, _TAG, wi, ci))
                    calls.append({"args": args, "kwargs": kwargs})
                timeout = spec.limits.call_timeout_s * slow * len(calls)
                if not c.request({"op": "count", "calls": calls}, timeout=timeout).get("ok"):
                    return {}, f"a call of workload '{w.name}' failed under valgrind"
        totals = _dump_totals(self.out_dir)
        if len(totals) != len(timed) * CALLS_PER_WORKLOAD or any(t is None for t in totals):
            return {}, (
                f"expected {len(timed) * CALLS_PER_WORKLOAD} call dumps, found {len(totals)} "
                "(the code itself calls through ctypes, which nests the counted region)"
            )
        out = {}
        for i, (_, w) in enumerate(timed):
            chunk = totals[i * CALLS_PER_WORKLOAD + 1 : (i + 1) * CALLS_PER_WORKLOAD]
            out[w.name] = median([float(t) for t in chunk if t is not None])
        return out, None


def count_arms(
    task: Task, dirs: tuple[Path, Path], seed: int, policy: SandboxPolicy | None = None
) -> Instructions:
    """Instructions per call of both arms (a, b) on identical fresh inputs, per timed workload."""
    reason = unavailable_reason()
    if reason is not None:
        return Instructions(available=False, reason=reason)
    per_call: dict[str, dict[str, float]] = {}
    with temporary_tree("optarena-instr-") as tmp:
        for arm, src in zip(("a", "b"), dirs, strict=True):
            workdir = Path(tmp) / arm
            shutil.copytree(src, workdir, ignore=shutil.ignore_patterns("__pycache__"))
            out_dir = workdir / ".callgrind"
            out_dir.mkdir()
            for d in (Path(tmp), workdir, out_dir):
                os.chmod(d, 0o777)  # the worker may run under its own uid
            try:
                counts, why = _ArmCounter(task, workdir, out_dir, policy).run(seed)
            except WorkerError as e:
                counts, why = {}, f"the worker under valgrind failed: {e}"
            if why is not None:
                return Instructions(available=False, tool=TOOL, reason=f"arm {arm}: {why}")
            for w, n in counts.items():
                per_call.setdefault(w, {})[arm] = n
    ratio = {w: v["b"] / v["a"] for w, v in per_call.items() if v.get("a")}
    return Instructions(
        available=True,
        tool=TOOL,
        reason="callgrind instructions per entry call (incl. interpreter), median of "
        f"{CALLS_PER_WORKLOAD - 1} calls after one warm-up, identical inputs in both arms",
        per_call=per_call,
        ratio=ratio,
    )


def count_instructions(
    task: Task, seed: int, policy: SandboxPolicy | None = None
) -> Callable[[tuple[Path, Path]], Instructions]:
    """A counter for `measure_candidate`, bound to this judgement's task and seed."""

    def count(dirs: tuple[Path, Path]) -> Instructions:
        return count_arms(task, dirs, seed, policy)

    return count
