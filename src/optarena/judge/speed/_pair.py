"""One process pair of a speed comparison: two fresh workers, identical inputs, ABBA/BAAB rounds.

The judge orchestrates and times; the workers only compute (pyperf's split, with the clocks on
the judge's side because the candidate shares the worker's process). Every call is one go frame
of a run (`WorkerClient.run_calls`, `worker/_run`):

- its inputs are written into the worker's sealed input area only after the previous call
  answered, so no input exists in the candidate's process before then (no look-ahead);
- the judge reads the kernel's CPU count of the worker's cgroup (all threads, exited threads and
  children) at every answer, in windows that tile the run, and its own clock from go to answer:
  neither can be edited from inside the candidate's process;
- the arms not being run are frozen the whole time, so they cannot slow the running one down;
- a third worker, the *null arm*, runs the same call path with the judge's null function (it
  returns a ready output of the right shape): its cost per call is the protocol's own, the same
  in both arms, and is subtracted from both before their ratio is taken (with its noise carried
  into the interval: each pair subtracts its own null), so the ratio is that of the candidate's
  work, not of work plus protocol;
- every call counts, warm-up calls and each slot's opening replay (an input that worker
  already answered: `_run_slot`) aside, and every output, warm-up, replay and timed, is
  checked against the float64 oracle once both arms have answered its input;
- each pair runs from fresh copies of the arms' files, pinned by a cpuset to its CPU, under the
  sandbox's seccomp filter, and ends with each arm's guard report (its namespaces compared).
"""

from __future__ import annotations

import contextlib
import math
import os
import random
import time
from pathlib import Path
from typing import Any

import numpy as np

from optarena.judge.client import (
    CallResult,
    WorkerClient,
    WorkerError,
    kept_heap,
    one_blas_thread,
)
from optarena.judge.correctness import (
    Finding,
    area_sizes,
    array_inputs,
    contract_findings,
    derive_seed,
    expected_dtype,
    fail,
    guard_findings,
    load_request,
    returned,
    stray_findings,
)
from optarena.judge.speed._checks import TimedInput, call_bytes, first_failure, prefault_mb
from optarena.judge.speed._samples import (
    ARMS,
    NULL,
    REPLAY_BELOW_NS,
    PairPlan,
    PairRecord,
    WorkloadSamples,
    round_factor,
    slot_call_cap,
    slot_calls,
)
from optarena.judge.speed._stats import median
from optarena.sandbox import SandboxPolicy
from optarena.tasks import Task, Workload

_MEASURE_TAG = 0x6D656173  # keeps measurement inputs apart from the correctness phase's


class ArmFailure(Exception):
    """An arm went wrong while being measured: a wrong output, a crash, a timeout."""

    def __init__(self, arm: str, finding: Finding, workload: str | None) -> None:
        self.arm = arm
        self.finding = finding
        self.workload = workload
        where = f"workload '{workload}' " if workload else ""
        super().__init__(f"{finding.code}: {where}{finding.detail}")


class DeadlineReached(Exception):
    """The judgement's total time limit arrived inside a pair; the pair does not count."""


class PairDiscarded(Exception):
    """The pair ran but is no evidence (an idle arm could not be frozen, a clock that went
    backwards or gave an arm's round no time); it does not count. `arm` is the arm whose
    worker or clock failed (None: the null arm's, the judge's own code): the comparison counts
    such a pair against that arm (`_stats.decide`, `Measurement._resisted`), since code that can
    fail its own pairs chooses which count."""

    def __init__(self, why: str, arm: str | None) -> None:
        super().__init__(why)
        self.arm = arm if arm in ARMS else None


def _unfrozen(workers: dict[str, WorkerClient]) -> PairDiscarded | None:
    """The pair's discard if a worker could not be frozen (the first, in arm order)."""
    for arm, worker in sorted(workers.items()):
        if worker.freeze_problem is not None:
            who = "the null arm's worker" if arm == NULL else f"arm {arm}'s worker"
            return PairDiscarded(f"{who} could not be frozen: {worker.freeze_problem}", arm)
    return None


class PairSession:
    """Runs one pair from spawn to exit; raises ArmFailure when either arm goes wrong and
    DeadlineReached when the judgement's time is up."""

    def __init__(
        self,
        task: Task,
        dirs: tuple[Path, Path, Path],
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
        # Per arm and workload: the last input it answered, replayed uncounted to open its next
        # slot (`_run_slot`).
        self.answered: dict[tuple[str, str], TimedInput] = {}
        self.cpu_source = "unavailable"
        self.out_bytes = 0  # the largest output a run may deliver (beyond: output_too_large)

    def run(self) -> PairRecord:
        """The pair, with the judge's measuring thread pinned to the workers' CPU.

        A wake-up across CPUs costs a virtual machine hundreds of microseconds, much of it
        charged to the woken worker; on the same CPU the judge blocks and the worker runs at
        once (measured here: 88 vs 284 us of worker CPU per empty request, and a quarter of the
        spread). Only one of the three ever runs at a time anyway.
        """
        own = _affinity()
        if self.cpu is not None and own is not None:
            with contextlib.suppress(OSError):
                os.sched_setaffinity(0, [self.cpu])
        try:
            # the outputs' reads between calls fault in no new pages; the oracle's products
            # leave no BLAS thread spinning on the worker's CPU
            with kept_heap(), one_blas_thread():
                return self._run()
        finally:
            if own is not None:
                with contextlib.suppress(OSError):
                    os.sched_setaffinity(0, own)

    def _run(self) -> PairRecord:
        t0 = time.monotonic()
        order = self.rng.choice(["ab", "ba"])
        timed = [w for w in self.task.spec.workloads if w.role == "timed"]
        least = self.plan.calls_per_slot
        samples = {w.name: WorkloadSamples() for w in timed}
        probe = {w.name: self._inputs(wi, w, -1, 0, 1)[0] for wi, w in enumerate(timed)}
        caps = {n: slot_call_cap(call_bytes([p]), least) for n, p in probe.items()}
        heap = max(call_bytes([probe[n]]) * caps[n] for n in probe)
        # Inputs have fixed shapes per timed workload; the margin covers layouts a generator
        # may vary (a strided view spans more bytes than its elements).
        ins, outs = area_sizes([p.arrays for p in probe.values()])
        self.out_bytes = outs
        try:
            self._start(order, prefault_mb(heap, self.task.spec.limits.memory_mb), 2 * ins)
            for wi, w in enumerate(timed):
                self._bind(wi, w, probe[w.name])
                acc = samples[w.name]
                per_call = self._warmup(wi, w, acc)
                acc.calls_per_slot = slot_calls(per_call, call_bytes([probe[w.name]]), least)
                acc.rounds = self.plan.rounds * round_factor(per_call)
                acc.replay = per_call < REPLAY_BELOW_NS
            for r in range(max(acc.rounds for acc in samples.values())):
                for wi, w in self.rng.sample(list(enumerate(timed)), len(timed)):
                    if r < samples[w.name].rounds:
                        self._round(r, wi, w, samples[w.name])
            self._settle()
            for arm in ARMS:
                for finding in stray_findings(self.workers[arm]):
                    raise ArmFailure(arm, finding, None)
            for name, acc in samples.items():
                bad = acc.unreadable()
                if bad is not None:
                    raise PairDiscarded(f"workload {name}: {bad[1]}", bad[0])
            freeze = _freeze_method(self.workers)
        finally:
            for worker in self.workers.values():
                worker.close()
        return PairRecord(
            self.index,
            self.cpu,
            order,
            samples,
            self.cpu_source,
            freeze,
            time.monotonic() - t0,
        )

    def _left(self) -> float:
        if self.plan.deadline is None:
            return math.inf
        left = self.plan.deadline - time.monotonic()
        if left <= 0:
            raise DeadlineReached()
        return left

    def _start(self, order: str, prefault: int, in_bytes: int) -> None:
        """Start the workers (the arms in `order`, the null arm at a random place among them),
        then greet and load each, their start-ups overlapping.

        `hello` pins each worker to the pair's CPU (a cpuset holds it there where the machine
        has one), maps its input area and has it touch `prefault` MiB of heap, all before the
        candidate's code is imported. Each worker is frozen from then on except while it
        answers a request or runs calls.
        """
        limits, spec = self.task.spec.limits, self.task.spec
        spawn = list(order)
        spawn.insert(self.rng.randrange(3), NULL)
        for arm in spawn:
            log = self.log_dir / f"pair{self.index}-{arm}.log"
            workdir = self.dirs[(*ARMS, NULL).index(arm)]
            worker = WorkerClient(
                workdir,
                limits,
                log,
                policy=self.policy,
                protect=[self.task.root],
                arena_bytes=(in_bytes, mmap_page()),
                cpus=None if self.cpu is None else [self.cpu],
                reply_pipe_bytes=self.out_bytes + 4096,
            )
            self.workers[arm] = worker
            worker.start()
        hello: dict[str, Any] = {"op": "hello", "prefault_mb": prefault}
        if self.cpu is not None:
            hello["cpus"] = [self.cpu]
        load = load_request(spec, limits.load_timeout_s)
        for arm in spawn:
            timeout = min(limits.load_timeout_s, self._left())
            try:
                self.workers[arm].request(hello, timeout=timeout)
                loading = load if arm != NULL else {"op": "load", "null": True}
                loaded = self.workers[arm].request(loading, timeout=timeout)
            except WorkerError as e:
                self._left()  # the deadline, not the arm, if that is what cut it short
                raise ArmFailure(arm, fail("load", e.code, e.detail), None) from None
            for finding in guard_findings(loaded):
                raise ArmFailure(arm, finding, None)
            if not loaded.get("ok"):
                finding = fail("load", str(loaded.get("code")), str(loaded.get("error")))
                raise ArmFailure(arm, finding, None)
            self._no_strays(arm, None)
        for worker in self.workers.values():
            worker.freeze()

    def _no_strays(self, arm: str, workload: str | None) -> None:
        """A timed worker is one process: a process of its tree still there after the load or
        after a slot (stopped, daemonised, waiting to die while another arm runs) is
        `process_outlived_call`, at once, not only when the pair ends."""
        if arm == NULL:
            return
        for finding in stray_findings(self.workers[arm]):
            raise ArmFailure(arm, finding, workload)

    def _bind(self, wi: int, w: Workload, probe: TimedInput) -> None:
        """Describe workload `wi`'s calls to every worker (untimed); the null arm is told the
        shape and dtype of the output it is to deliver (the oracle's, on the probe input)."""
        ref = np.asarray(self.task.oracle(*probe.args, **probe.kwargs))
        null_output = (tuple(ref.shape), str(expected_dtype(w, probe.arrays).str))
        for arm, worker in self.workers.items():
            try:
                reply = worker.bind_request(
                    wi,
                    probe.args,
                    probe.kwargs,
                    min(self.call_timeout_s, self._left()),
                    null_output if arm == NULL else None,
                )
            except WorkerError as e:
                raise ArmFailure(arm, fail("timed_call", e.code, e.detail), w.name) from None
            for finding in guard_findings(reply):
                raise ArmFailure(arm, finding, w.name)
            if not reply.get("ok"):
                detail = f"the worker refused the call layout: {reply.get('error')}"
                raise ArmFailure(arm, fail("timed_call", "protocol_violation", detail), w.name)

    def _settle(self) -> None:
        """The end of the timed phase: each arm's guard report in full, its watched namespaces
        compared with their state before the candidate loaded (a timed worker replacing
        `time.perf_counter_ns` or `np.sqrt` is named, as in the correctness phase)."""
        for arm in ARMS:
            try:
                reply = self.workers[arm].request({"op": "settle", "delay_s": 0}, timeout=10)
            except WorkerError as e:
                raise ArmFailure(arm, fail("settle", e.code, e.detail), None) from None
            for finding in guard_findings(reply):
                raise ArmFailure(arm, finding, None)

    def _inputs(self, wi: int, w: Workload, r: int, slot: int, n: int) -> list[TimedInput]:
        out = []
        for c in range(n):
            seed = derive_seed(
                self.plan.seed, _MEASURE_TAG, self.plan.stream, self.index, wi, r + 1, slot, c
            )
            args, kwargs = self.task.generator(w, seed)
            out.append(TimedInput(args, kwargs, array_inputs(args, kwargs)))
        return out

    def _answer(self, inputs: list[TimedInput]) -> None:
        """The oracle's answers, once both arms have answered these inputs."""
        for inp in inputs:
            if inp.ref is None:
                inp.ref = np.asarray(self.task.oracle(*inp.args, **inp.kwargs), dtype=np.float64)

    def _warmup(self, wi: int, w: Workload, acc: WorkloadSamples) -> float:
        """Uncounted calls per arm on fresh inputs (their outputs are checked too).

        They can carry only input-independent work (loading code, filling caches): no later
        input exists yet. Returns the median warm call time (CPU where known, else wall).
        """
        n = max(self.plan.warmup_calls, 2)
        acc.warmup_calls = n
        inputs = self._inputs(wi, w, -1, 1, n)
        results = {arm: self._run_slot(arm, wi, w, inputs, replay=False) for arm in (*ARMS, NULL)}
        self._answer(inputs)
        for arm in ARMS:
            self._check(arm, w, inputs, results[arm], replay=False)
        last = [r.cpu_ns if r.cpu_ns is not None else r.wall_ns for r in results["a"][1:]]
        last += [r.cpu_ns if r.cpu_ns is not None else r.wall_ns for r in results["b"][1:]]
        return median(last)

    def _round(self, r: int, wi: int, w: Workload, acc: WorkloadSamples) -> None:
        """ABBA or BAAB (alternating): A and B get input set 1, then set 2 in mirrored order.

        Every call gets a fresh input that no arm has seen before, and every call counts. A
        set's outputs are checked once both arms have answered it.
        """
        k = acc.calls_per_slot
        order = self.orders[(r + self.first_order) % 2]
        for half in (0, 1):
            inputs = self._inputs(wi, w, r, half, k)
            done = []
            # The null arm's slots bracket the round (N A B | B A N): each half has one, at
            # its outer end, so its position relative to each arm is the same in every round.
            slots = order[2 * half : 2 * half + 2]
            slots = NULL + slots if half == 0 else slots + NULL
            for arm in slots:
                results = self._run_slot(arm, wi, w, inputs, acc.replay)
                acc.wall[arm] += [x.wall_ns for x in results]
                acc.call[arm] += [x.call_wall_ns or x.wall_ns for x in results]
                if all(x.cpu_ns is not None for x in results):
                    acc.cpu[arm] += [int(x.cpu_ns or 0) for x in results]
                if arm != NULL:
                    done.append((arm, results))
            self._answer(inputs)
            for arm, results in done:
                self._check(arm, w, inputs, results, replay=True)
        acc.orders.append(order.upper())

    def _run_slot(
        self, arm: str, wi: int, w: Workload, inputs: list[TimedInput], replay: bool
    ) -> list[CallResult]:
        """A slot's calls on one worker as one run (`WorkerClient.run_calls`): that worker is
        thawed for the slot, the others frozen throughout; failures that need no oracle raise
        here (the null arm runs the judge's own function: it cannot fail but by a bug).

        With `replay` (calls under REPLAY_BELOW_NS) the run opens with an uncounted *replay*:
        a call on the last input this worker already answered (its output checked again).
        Measured (docs/measurement.md, Benchmark): after another worker's slot and the judge's
        work, a worker's first calls ran up to twice as long as its later ones, its own code,
        heap and temporaries gone cold, a cost paid once per slot that dilutes every ratio
        toward 1 (the null function has no such state to lose). The replay restores that state
        on an input that carries nothing new: no call sees an input before its counted window
        (no look-ahead), every counted input is still one no arm has seen, and a candidate that
        remembers answers has nothing to remember for a counted call. Returns the counted
        calls' results."""
        limits: list[float] = []

        def timeout() -> float:
            limits.append(self._left())
            return min(self.call_timeout_s, limits[-1])

        again = self.answered.get((arm, w.name)) if replay else None
        run = [again] if again is not None else []
        self.answered[(arm, w.name)] = inputs[-1]
        calls = [(i.args, i.kwargs) for i in [*run, *inputs]]
        unfrozen = _unfrozen(self.workers)  # an idle worker that ran beside this slot
        if unfrozen is not None:
            raise unfrozen
        try:
            results = self.workers[arm].run_calls(wi, calls, timeout, self.out_bytes, len(run))
        except WorkerError as e:
            if e.code == "timeout" and limits and limits[-1] < self.call_timeout_s:
                raise DeadlineReached() from None
            if arm == NULL:
                raise RuntimeError(f"the null arm failed: {e}") from None
            raise ArmFailure(arm, fail("timed_call", e.code, e.detail), w.name) from None
        if arm == NULL:
            if len(results) != len(calls) or any(r.output is None for r in results):
                raise RuntimeError(f"the null arm failed: {results[-1].reply if results else []}")
            self.cpu_source = self.workers[arm].sandbox.cpu_source
            return results[len(run) :]
        accepted = [self._accept(arm, w, r) for r in results]
        self._no_strays(arm, w.name)
        if run:
            self._check(arm, w, run, accepted[:1], replay=False)
        return accepted[len(run) :]

    def _accept(self, arm: str, w: Workload, result: CallResult) -> CallResult:
        """A call's reply: its guard findings and a failed call end the arm here."""
        self.cpu_source = self.workers[arm].sandbox.cpu_source
        reply = result.reply
        for finding in guard_findings(reply):
            raise ArmFailure(arm, finding, w.name)
        if not reply.get("ok"):
            detail = f"timed call: {reply.get('error')}"
            raise ArmFailure(arm, fail("timed_call", str(reply.get("code")), detail), w.name)
        return result

    def _check(
        self,
        arm: str,
        w: Workload,
        inputs: list[TimedInput],
        results: list[CallResult],
        replay: bool,
    ) -> None:
        """Every returned output against the oracle; counted ones also against replays."""
        dtype = expected_dtype(w, inputs[0].arrays)
        earlier = self.earlier.setdefault((arm, w.name), set()) if replay else None
        tol = self.task.spec.tolerance
        for inp, result in zip(inputs, results, strict=True):
            out = returned(result, inp.expected().shape)
            contract = [f for f in contract_findings(result) if not f.passed]
            bad = out if isinstance(out, Finding) else first_failure(out, inp, dtype, tol, earlier)
            bad = bad or (contract[0] if contract else None)
            if bad is not None:
                raise ArmFailure(arm, bad, w.name)


def _affinity() -> set[int] | None:
    try:
        return os.sched_getaffinity(0)
    except (AttributeError, OSError):
        return None


def _freeze_method(workers: dict[str, WorkerClient]) -> str:
    """How the idle arms were kept from running, as the report says it. Every worker of the
    pair is asked (an arm that could not be frozen once would have run beside the others):
    such a pair is no evidence, and does not count."""
    unfrozen = _unfrozen(workers)
    if unfrozen is not None:
        raise unfrozen
    methods = {str(worker.sandbox.freeze_method) for worker in workers.values()}
    return " + ".join(sorted(methods)) or "none"


def mmap_page() -> int:
    """The output area of a timed worker: unused (outputs travel by `run_calls`), one page."""
    return 4096
