"""The driver: the one process that writes the ledger while a cluster runs the trials.

Each pending key is one attempt at a time (`_Attempts`, the local executor's own retry rules),
submitted as a Ray task that asks for an agent slot. When its node says it began, the driver
inserts the trial's row as `running` on that node (with the driver's own process as its
owner, so that a `kill -9` of the driver leaves a row the next start reconciles); when the
shipment has arrived and every artifact hashes to its name, the driver finishes the row in one
transaction. A trial's id is derived from (cell, key, attempt): the same attempt can never be
recorded twice. A node lost mid-trial, a worker killed, an object lost: the row is finished as
`interrupted` with Ray's error, and the key runs again under the plan's `retries` (a node an
agent can kill must not give it unlimited tries).
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import secrets
import socket
import threading
from collections.abc import Iterator
from dataclasses import dataclass, replace
from pathlib import Path
from types import ModuleType
from typing import Any

from optarena.errors import OptarenaError
from optarena.experiments._execute import KEY_ENV, Event, _Attempts, _run_parallel, trial_config
from optarena.experiments._plan import LoadedPlan
from optarena.experiments._ray._checks import Expectation, expectation
from optarena.experiments._ray._cluster import (
    AGENT_RESOURCE,
    JUDGE_RESOURCE,
    PROBE_TIMEOUT_S,
    JudgeNodes,
    RayNode,
    connect,
    layout_problems,
    nodes_of,
)
from optarena.experiments._ray._transfer import (
    MAX_TRANSFER_MB,
    Begun,
    Chunk,
    Lost,
    Message,
    Receiver,
    Refused,
    Shipment,
    TransferError,
    import_trial,
)
from optarena.experiments._ray._worker import AgentJob
from optarena.experiments._schedule import ScheduledTrial
from optarena.experiments._state import KEY_LABEL, ExperimentState
from optarena.files import printable
from optarena.ledger import Ledger
from optarena.processes import start_ticks
from optarena.records import TrialRecord, evolve, load_trial
from optarena.tasks import Task
from optarena.tasks.external import FrozenExternal
from optarena.trials import sigterm_interrupts

USER_STOP = "during ray: KeyboardInterrupt: the experiment run was stopped (Ctrl-C or SIGTERM)"
MAX_STARTS = 3  # submissions of one attempt lost before it began, then the run stops
CANCEL_WAIT_S = 60.0  # the longest wait for a cancelled attempt's task to end


@dataclass(frozen=True)
class RayOptions:
    """How an experiment runs on a Ray cluster (`experiment run --executor ray`)."""

    address: str | None = None  # None: $RAY_ADDRESS, else the cluster started on this machine
    judge_nodes: JudgeNodes = "dedicated"
    agent_cpus: float = 1.0
    agent_memory_mb: int | None = None
    max_parallel: int | None = None  # None: every agent slot the cluster offers
    transfer_limit_mb: float = MAX_TRANSFER_MB


class _Stopped(Exception):
    """The run is stopping (Ctrl-C, SIGTERM): this attempt ends now."""


def attempt_id(home: Path, cell_sha256: str, key: str, attempt: int) -> str:
    """The trial id of one attempt at a key in the ledger at `home`: the same attempt always
    gets the same id, so the ledger's primary key refuses recording it twice."""
    blob = f"{home}\0{cell_sha256}\0{key}\0{attempt}".encode()
    return hashlib.sha256(blob).hexdigest()[:10]


def _needs_gpu(task: Task | FrozenExternal) -> bool:
    return isinstance(task, Task) and task.spec.requirements.device == "cuda"


class RayAttempt:
    """One attempt at a key on the cluster; returns the complete record, or raises once the
    attempt is recorded as interrupted (`_Attempts` then decides on a retry). Raises
    OptarenaError with nothing recorded when a node refuses (bad input: the run stops)."""

    def __init__(
        self,
        ray: ModuleType,
        plan: LoadedPlan,
        home: Path,
        state: ExperimentState,
        options: RayOptions,
        expect: Expectation,
        emit: Event,
        stop: threading.Event,
        agent_task: Any,
    ) -> None:
        """`ray` and `agent_task` (the remote function) are Ray's own in a run, fakes in a
        test of the driver's decisions."""
        self.ray, self.plan, self.home, self.cells = ray, plan, home, state.cells
        self.options, self.expect, self.emit, self.stop = options, expect, emit, stop
        self.attempts = {s.key: len(state.rows.get(s.key, [])) for s in state.schedule}
        self.portable = {tid: ref.load() for tid, ref in expect.tasks.items()}
        self._lock = threading.Lock()
        self.run = secrets.token_hex(4)
        self.agent_task = agent_task

    def __call__(self, s: ScheduledTrial) -> TrialRecord:
        with self._lock:
            self.attempts[s.key] += 1
            n = self.attempts[s.key]
        for submission in range(MAX_STARTS):  # lost before it began: the same attempt again
            result = self._follow(s, self._job(s, n, submission))
            if result is not None:
                return result
        raise OptarenaError(
            f"{s.key}: lost {MAX_STARTS} times before it began on a node; is the cluster up?"
        )

    def _job(self, s: ScheduledTrial, n: int, submission: int) -> AgentJob:
        config = trial_config(self.plan, s, self.cells)
        config = replace(config, task=self.portable[s.task])
        env = {**self.plan.condition(s.condition).env, KEY_ENV: s.key}
        return AgentJob(
            trial_id=attempt_id(self.home, self.cells[s.cell], s.key, n),
            attempt=n,
            config=config,
            task=self.expect.tasks[s.task],
            env=env,
            expect=self.expect,
            hidden=(str(self.home),),
            transfer_limit_mb=self.options.transfer_limit_mb,
            run=f"{self.run}-{submission}",  # a resubmission never meets its lost staging
        )

    def _resources(self, task: Task | FrozenExternal) -> tuple[dict[str, Any], dict[str, Any]]:
        gpu = 1 if _needs_gpu(task) else 0
        agent: dict[str, Any] = {
            "num_cpus": self.options.agent_cpus,
            "resources": {AGENT_RESOURCE: 1},
            "num_gpus": gpu,
        }
        if self.options.agent_memory_mb:
            agent["memory"] = self.options.agent_memory_mb * (1 << 20)
        # num_cpus=0: a judge waits for no CPU an agent blocked on it holds; the judge slot
        # (one per node) is what keeps measurements apart
        judge = {"num_cpus": 0, "resources": {JUDGE_RESOURCE: 1}, "num_gpus": gpu}
        return agent, judge

    def _follow(self, s: ScheduledTrial, job: AgentJob) -> TrialRecord | None:
        """Submit and follow one attempt; None when it was lost before it began."""
        agent, judge = self._resources(self.portable[s.task])
        gen = self.agent_task.options(**agent, name=f"optarena {s.key}").remote(job, judge)
        begun = False
        try:
            receiver: Receiver | None = None
            with Ledger(self.home) as ledger:
                for msg in self._messages(gen):
                    if isinstance(msg, Refused):
                        raise OptarenaError(f"node {msg.node} refused {s.key}: {msg.reason}")
                    if isinstance(msg, Begun):
                        self._begin(ledger, s, job, msg)
                        begun = True
                    elif isinstance(msg, Lost):
                        raise TransferError(f"on node {msg.node}: {msg.error}")
                    elif isinstance(msg, Shipment) and begun and receiver is None:
                        receiver = Receiver(ledger.store, msg)
                    elif isinstance(msg, Chunk) and receiver is not None:
                        receiver.add(msg)
                    else:
                        raise TransferError(f"node sent {type(msg).__name__} out of turn")
                if receiver is None or not receiver.done:
                    raise TransferError("the node's stream ended before its shipment did")
                return import_trial(ledger, job.trial_id, (KEY_LABEL, s.key), receiver.shipment)
        except _Stopped:
            self._cancel(gen)
            if begun:
                self._interrupt(job.trial_id, USER_STOP)
            raise KeyboardInterrupt(USER_STOP) from None
        except OptarenaError as e:  # refused before it began: nothing to record
            self._cancel(gen)
            if begun:
                self._interrupt(job.trial_id, printable(f"during ray: {type(e).__name__}: {e}"))
            raise
        except Exception as e:  # Ray's errors: a node, a worker or an object lost
            self._cancel(gen)
            if not begun:
                return None
            self._interrupt(job.trial_id, printable(f"during ray: {type(e).__name__}: {e}"))
            raise

    def _cancel(self, gen: Any) -> None:
        """End the attempt's task wherever it still runs (its agent with it), and wait for it
        to end: Ray kills the worker on its own time, and a driver that exited first left the
        agent running a moment after the run said it had stopped (a loaded CI run), spending
        on a model with no one left to record it."""
        with contextlib.suppress(Exception):
            self.ray.cancel(gen, force=True)
        with contextlib.suppress(Exception):  # a task that never started or already ended
            self.ray.wait([gen.completed()], timeout=CANCEL_WAIT_S)

    def _messages(self, gen: Any) -> Iterator[Message]:
        while True:
            if self.stop.is_set():
                raise _Stopped
            ready, _ = self.ray.wait([gen], timeout=0.5)
            if not ready:
                continue
            try:
                ref = next(gen)
            except StopIteration:
                return
            yield self.ray.get(ref)

    def _begin(self, ledger: Ledger, s: ScheduledTrial, job: AgentJob, msg: Begun) -> None:
        """The row, as `running` on the node, owned by this driver process."""
        record = load_trial(msg.record, f"trial {job.trial_id} from node {msg.node}")
        if record.id != job.trial_id or record.labels.get(KEY_LABEL) != s.key:
            raise TransferError(f"node {msg.node} began trial {record.id}, not {job.trial_id}")
        pid = os.getpid()
        mine = {"host": socket.gethostname(), "pid": pid, "pid_start": start_ticks(pid)}
        ledger.begin_trial(evolve(record, state="running", **mine))
        self.emit("node", s, None, msg.node)

    def _interrupt(self, trial_id: str, error: str) -> None:
        with Ledger(self.home) as ledger:
            ledger.mark_interrupted(trial_id, error)


def probe(ray: ModuleType, nodes: list[RayNode], expect: Expectation) -> list[str]:
    """Every node that offers a slot, checked where it is (`_checks.node_problems`)."""
    from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy

    from optarena.experiments._ray._tasks import probe_node

    working = [n for n in nodes if n.agent_slots or n.judge_slots]
    refs = {
        n.name: probe_node.options(
            scheduling_strategy=NodeAffinitySchedulingStrategy(n.node_id, soft=False)
        ).remote(expect, bool(n.agent_slots))
        for n in working
    }
    ready, _ = ray.wait(list(refs.values()), num_returns=len(refs), timeout=PROBE_TIMEOUT_S)
    out = []
    for name, ref in refs.items():
        if ref not in ready:
            out.append(f"node {name}: no answer to its check within {PROBE_TIMEOUT_S:g} s")
            continue
        try:
            _node, problems = ray.get(ref)
        except Exception as e:
            out.append(f"node {name}: its check failed: {type(e).__name__}: {e}")
            continue
        out += [f"node {name}: {p}" for p in problems]
    return out


def run_on_ray(
    plan: LoadedPlan, home: Path, state: ExperimentState, options: RayOptions, emit: Event
) -> None:
    """Run every pending key of `state` on the cluster; the ledger at `home` is written by
    this process only. Raises OptarenaError (nothing run) for a cluster or a node that cannot
    keep the guarantees, KeyboardInterrupt after recording what a Ctrl-C stopped."""
    ray = connect(options.address)
    try:
        nodes = nodes_of(ray.nodes())
        problems = layout_problems(nodes, options.judge_nodes)
        if not problems:
            expect = expectation(plan)
            problems = probe(ray, nodes, expect)
        if problems:
            raise OptarenaError(
                "the Ray cluster cannot run this experiment: " + "; ".join(problems)
            )
        slots = int(sum(n.agent_slots for n in nodes))
        parallel = max(1, min(slots, options.max_parallel or slots))
        from optarena.experiments._ray._tasks import agent_task

        stop = threading.Event()
        one = RayAttempt(ray, plan, home, state, options, expect, emit, stop, agent_task)
        attempt = _Attempts(plan, home, state, one, emit)
        with sigterm_interrupts():
            _run_parallel(state.pending, parallel, attempt, stop)
    finally:
        ray.shutdown()
