"""One process pair of a speed comparison: two fresh workers, identical inputs, ABBA/BAAB rounds.

The judge process orchestrates and never times anything itself (pyperf's split): it generates
every input before a batch is sent, sends the identical inputs to both arms, and checks every
output against the float64 oracle after the batch, outside the timed region. Both workers are
pinned to the same CPU and get the same environment, so what differs between them is the code.
"""

from __future__ import annotations

import math
import random
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from optarena.judge._checks import Finding, fail
from optarena.judge._client import WorkerClient, WorkerError
from optarena.judge._correctness import (
    array_inputs,
    derive_seed,
    expected_dtype,
    guard_findings,
    stray_findings,
)
from optarena.judge._integrity import BatchObservation, cpu_time_ns, minor_faults
from optarena.judge._measure_checks import (
    TimedInput,
    call_bytes,
    first_failure,
    prefault_mb,
    reply_problem,
)
from optarena.judge._stats import median, round_log_ratio
from optarena.sandbox import SandboxPolicy
from optarena.tasks import Task, Workload

ARMS = ("a", "b")
CLOCKS = ("cpu", "wall")
SLOT_WARMUP = 1  # leading call of every slot, on a warm-up input, whose time is not counted
SLOT_TARGET_NS = 1_000_000  # short calls get more calls per slot, up to about this much work
MAX_SLOT_CALLS = 32
CHEAP_CALL_NS = 500_000  # shorter calls get twice the rounds per pair
SLOT_MEMORY_BYTES = 64 << 20  # ... as long as one slot's inputs and outputs fit in this
MAX_WARMUP_BATCHES = 4  # per arm and workload in each fresh process
WARMUP_FAULT_LIMIT = 64  # minor faults in a batch that still count as "no new memory"
_MEASURE_TAG = 0x6D656173  # keeps measurement inputs apart from the correctness phase's


class ArmFailure(Exception):
    """An arm went wrong while being measured: a wrong output, a crash, a timeout."""

    def __init__(self, arm: str, finding: Finding, workload: str | None) -> None:
        self.arm = arm
        self.finding = finding
        self.workload = workload
        where = f"workload '{workload}' " if workload else ""
        super().__init__(f"{finding.code}: {where}{finding.detail}")


@dataclass(frozen=True)
class PairPlan:
    """What one pair does; the orchestrator fixes it for the whole comparison."""

    warmup_calls: int
    calls_per_slot: int  # at least; short calls get more (SLOT_TARGET_NS)
    rounds: int
    seed: int  # the comparison's seed: inputs and round orders derive from it
    stream: int  # separates comparisons under one seed (the main one, the A/A control)


@dataclass
class WorkloadSamples:
    """Raw samples of one workload in one pair, in the order they were taken.

    `cpu` is the calling thread's CPU time of each call, `wall` its elapsed time; both come
    from clocks the worker bound before candidate code existed.
    """

    calls_per_slot: int = 0
    rounds: int = 0
    wall: dict[str, list[int]] = field(default_factory=lambda: {"a": [], "b": []})
    cpu: dict[str, list[int]] = field(default_factory=lambda: {"a": [], "b": []})
    orders: list[str] = field(default_factory=list)
    warmup_batches: list[int] = field(default_factory=list)  # per arm, in ARMS order

    def round_log_ratios(self, clock: str) -> list[float]:
        """Per round: `round_log_ratio` over the round's 2 x calls_per_slot calls per arm."""
        data = self.cpu if clock == "cpu" else self.wall
        n = 2 * self.calls_per_slot
        return [
            round_log_ratio(data["a"][i : i + n], data["b"][i : i + n])
            for i in range(0, len(data["a"]), n)
        ]

    def log_ratio(self, clock: str) -> float:
        """The pair's statistic: the mean over its rounds, as many ABBA as BAAB, so the
        advantage of running two slots back to back cancels."""
        rounds = self.round_log_ratios(clock)
        return sum(rounds) / len(rounds)


@dataclass
class Batch:
    """One batch's reply and its per-call times (wall, thread CPU), and the faults it caused."""

    reply: dict[str, Any]
    wall: list[int]
    cpu: list[int]
    faults: int | None


@dataclass
class PairRecord:
    index: int
    cpu: int | None
    spawn_order: str
    workloads: dict[str, WorkloadSamples]
    batches: dict[tuple[str, str], list[BatchObservation]]
    cpu_source: str
    seconds: float


def slot_calls(per_call_ns: float, per_call_bytes: int, least: int) -> int:
    """Calls per slot: enough for about SLOT_TARGET_NS of work, within the slot memory cap."""
    by_time = math.ceil(SLOT_TARGET_NS / max(per_call_ns, 1.0))
    return max(least, min(by_time, slot_call_cap(per_call_bytes, least)))


def round_factor(per_call_ns: float) -> int:
    """More rounds per pair for cheap calls: their noise comes in whole slots (a busy moment
    slows a slot, not a call), so more, short slots average it down at little cost."""
    return 2 if per_call_ns < CHEAP_CALL_NS else 1


def slot_call_cap(per_call_bytes: int, least: int) -> int:
    return max(least, min(MAX_SLOT_CALLS, SLOT_MEMORY_BYTES // max(per_call_bytes, 1)))


class PairSession:
    """Runs one pair from spawn to exit; raises ArmFailure when either arm goes wrong."""

    def __init__(
        self,
        task: Task,
        dirs: tuple[Path, Path],
        plan: PairPlan,
        index: int,
        cpu: int | None,
        log_dir: Path,
        call_timeout_s: float,
        policy: SandboxPolicy | None = None,
    ) -> None:
        self.task = task
        self.dirs = dirs
        self.plan = plan
        self.index = index
        self.cpu = cpu
        self.log_dir = log_dir
        self.call_timeout_s = call_timeout_s
        self.policy = policy
        self.rng = random.Random(derive_seed(plan.seed, _MEASURE_TAG, plan.stream, index))
        # Rounds alternate ABBA and BAAB from a random start: the arm whose two slots are back to
        # back runs with warmer caches, so each pair gives each arm that advantage equally often.
        self.orders = ("abba", "baab")
        self.first_order = self.rng.randrange(2)
        self.workers: dict[str, WorkerClient] = {}
        self.earlier: dict[tuple[str, str], set[bytes]] = {}
        self.batches: dict[tuple[str, str], list[BatchObservation]] = {}
        self.cpu_source = "unavailable"

    def run(self) -> PairRecord:
        t0 = time.monotonic()
        order = self.rng.choice(["ab", "ba"])
        timed = [w for w in self.task.spec.workloads if w.role == "timed"]
        least = self.plan.calls_per_slot
        n_warm = max(self.plan.warmup_calls, least + SLOT_WARMUP)
        warm = {w.name: self._inputs(wi, w, 0, 2, n_warm) for wi, w in enumerate(timed)}
        caps = {name: slot_call_cap(call_bytes(inputs), least) for name, inputs in warm.items()}
        samples = {w.name: WorkloadSamples() for w in timed}
        heap = max(call_bytes(warm[n]) * (caps[n] + SLOT_WARMUP) for n in warm)
        try:
            self._start(order, prefault_mb(heap, self.task.spec.limits.memory_mb))
            for w in timed:
                acc = samples[w.name]
                per_call = self._warmup(w, warm[w.name], acc)
                acc.calls_per_slot = slot_calls(per_call, call_bytes(warm[w.name]), least)
                acc.rounds = self.plan.rounds * round_factor(per_call)
            for r in range(max(acc.rounds for acc in samples.values())):
                for wi, w in self.rng.sample(list(enumerate(timed)), len(timed)):
                    if r < samples[w.name].rounds:
                        self._round(r, wi, w, warm[w.name], samples[w.name])
            for arm, worker in self.workers.items():
                for finding in stray_findings(worker):
                    raise ArmFailure(arm, finding, None)
        finally:
            for worker in self.workers.values():
                worker.close()
        return PairRecord(
            self.index,
            self.cpu,
            order,
            samples,
            self.batches,
            self.cpu_source,
            time.monotonic() - t0,
        )

    def _start(self, order: str, prefault: int) -> None:
        """Start both workers (in `order`), then greet and load both, their start-ups overlapping.

        `hello` pins each worker to the pair's CPU and has it touch `prefault` MiB of heap,
        both before the candidate's code is imported.
        """
        limits, spec = self.task.spec.limits, self.task.spec
        for arm in order:
            log = self.log_dir / f"pair{self.index}-{arm}.log"
            workdir = self.dirs[ARMS.index(arm)]
            worker = WorkerClient(
                workdir, limits, log, policy=self.policy, protect=[self.task.root]
            )
            self.workers[arm] = worker
            worker.start()
        hello: dict[str, Any] = {"op": "hello", "prefault_mb": prefault}
        if self.cpu is not None:
            hello["cpus"] = [self.cpu]
        load = {"op": "load", "file": spec.entry.file, "function": spec.entry.function}
        for arm in order:
            try:
                self.workers[arm].request(hello, timeout=limits.load_timeout_s)
                loaded = self.workers[arm].request(load, timeout=limits.load_timeout_s)
            except WorkerError as e:
                raise ArmFailure(arm, fail("load", e.code, e.detail), None) from None
            for finding in guard_findings(loaded):
                raise ArmFailure(arm, finding, None)
            if not loaded.get("ok"):
                finding = fail("load", str(loaded.get("code")), str(loaded.get("error")))
                raise ArmFailure(arm, finding, None)

    def _inputs(self, wi: int, w: Workload, r: int, slot: int, n: int) -> list[TimedInput]:
        out = []
        for c in range(n):
            seed = derive_seed(
                self.plan.seed, _MEASURE_TAG, self.plan.stream, self.index, wi, r, slot, c
            )
            args, kwargs = self.task.generator(w, seed)
            out.append(TimedInput(args, kwargs, array_inputs(args, kwargs)))
        return out

    def _answer(self, inputs: list[TimedInput]) -> None:
        """The oracle's answers, once both arms have answered these inputs."""
        for inp in inputs:
            if inp.ref is None:
                inp.ref = np.asarray(self.task.oracle(*inp.args, **inp.kwargs), dtype=np.float64)

    def _warmup(self, w: Workload, inputs: list[TimedInput], acc: WorkloadSamples) -> float:
        """Untimed batches per arm until the worker stops faulting in new memory.

        The heap was grown and touched before the candidate loaded (`prefault_mb`), so usually
        one batch warms the code and nothing more is needed; the judge still watches the
        worker's page faults (OS accounting) and repeats, at most MAX_WARMUP_BATCHES times,
        while a batch keeps touching new memory: on a virtual machine, calls on freshly faulted
        memory ran several times slower. Warm-up inputs repeat on purpose (they are never
        timed); the outputs of each arm's first warm-up batch are checked. Returns the median
        warm call time (ns).
        """
        first: dict[str, Batch] = {}
        last: list[int] = []
        for arm in ARMS:
            batches = 0
            while batches < MAX_WARMUP_BATCHES:
                batches += 1
                b = self._batch(arm, w, inputs, counted=False, skip=0 if batches == 1 else None)
                first.setdefault(arm, b)
                if b.faults is None or b.faults <= WARMUP_FAULT_LIMIT:
                    break
            acc.warmup_batches.append(batches)
            last += b.cpu
        self._answer(inputs)
        for arm, b in first.items():
            self._check(arm, w, inputs, b, counted_from=len(inputs))
        return median(last)

    def _round(
        self, r: int, wi: int, w: Workload, warm: list[TimedInput], acc: WorkloadSamples
    ) -> None:
        """ABBA or BAAB (alternating): A and B get input set 1, then set 2 in mirrored order.

        Each slot starts with a call on a warm-up input whose time is dropped (the first call
        after the worker has been receiving data is consistently slower); every counted call
        gets a fresh input that no arm has seen before. A set's outputs are checked once both
        arms have answered it.
        """
        k = acc.calls_per_slot
        order = self.orders[(r + self.first_order) % 2]
        for half in (0, 1):
            inputs = [warm[half % len(warm)], *self._inputs(wi, w, r, half, k)]
            done = []
            for arm in order[2 * half : 2 * half + 2]:
                b = self._batch(arm, w, inputs, counted=True, skip=SLOT_WARMUP)
                acc.wall[arm] += b.wall[SLOT_WARMUP:]
                acc.cpu[arm] += b.cpu[SLOT_WARMUP:]
                done.append((arm, b))
            self._answer(inputs[SLOT_WARMUP:])
            for arm, b in done:
                self._check(arm, w, inputs, b, counted_from=SLOT_WARMUP)
        acc.orders.append(order.upper())

    def _batch(
        self, arm: str, w: Workload, inputs: list[TimedInput], counted: bool, skip: int | None
    ) -> Batch:
        """One batch on one arm: the reply, validated as data, and what the OS saw of it.

        `skip` leading outputs are not sent back (None: none at all); a `counted` batch is
        recorded for the OS-accounting cross-check.
        """
        worker = self.workers[arm]
        calls = [{"args": i.args, "kwargs": i.kwargs} for i in inputs]
        msg = {"op": "time", "calls": calls, "skip_outputs": len(calls) if skip is None else skip}
        pid = worker.proc.pid
        faults0, (cpu0, source) = minor_faults(pid), cpu_time_ns(pid)
        t0 = time.perf_counter_ns()
        try:
            reply = worker.request(msg, timeout=self.call_timeout_s * len(inputs) + 5.0)
        except WorkerError as e:
            raise ArmFailure(arm, fail("timed_call", e.code, e.detail), w.name) from None
        wall = time.perf_counter_ns() - t0
        (cpu1, _), faults1 = cpu_time_ns(pid), minor_faults(pid)
        for finding in guard_findings(reply):
            raise ArmFailure(arm, finding, w.name)
        if not reply.get("ok"):
            detail = f"timed call {reply.get('call')}: {reply.get('error')}"
            raise ArmFailure(arm, fail("timed_call", str(reply.get("code")), detail), w.name)
        problem = reply_problem(reply, len(inputs))
        if problem is not None:
            raise ArmFailure(arm, problem, w.name)
        b = Batch(reply, reply["elapsed_ns"], reply["cpu_ns"], None)
        if faults0 is not None and faults1 is not None:
            b.faults = faults1 - faults0
        if counted:
            self.cpu_source = source
            os_cpu = None if cpu0 is None or cpu1 is None else cpu1 - cpu0
            obs = BatchObservation(len(inputs), sum(b.wall), sum(b.cpu), wall, os_cpu)
            self.batches.setdefault((arm, w.name), []).append(obs)
        return b

    def _check(
        self, arm: str, w: Workload, inputs: list[TimedInput], b: Batch, counted_from: int
    ) -> None:
        """Every returned output against the oracle; counted ones also against replays."""
        dtype = expected_dtype(w, inputs[0].arrays)
        earlier = self.earlier.setdefault((arm, w.name), set())
        tol = self.task.spec.tolerance
        for i, inp in enumerate(inputs):
            if b.reply["outputs"][i] is None and i < counted_from:
                continue  # a warm-up output that was not sent back
            bad = first_failure(b.reply, i, inp, dtype, tol, earlier if i >= counted_from else None)
            if bad is not None:
                raise ArmFailure(arm, bad, w.name)
