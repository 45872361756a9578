"""Running a plan: every scheduled trial into the ledger, resumable after any interruption.

Each trial is tagged (labels) with the experiment, its plan hash, its cell's hash, condition,
repetition and key; resuming reads those tags back (`optarena.experiments._state`): a key with
a complete trial is kept, an interrupted one stays on record and its key runs again, so
nothing is lost and nothing is duplicated. A trial during which optarena raised (whatever
the agent or candidate did to cause it) is recorded as interrupted by `run_trial` and its key
retried up to the plan's `retries`, then counted as failed: one trial never stops the others.
Agents may run in parallel (`max_parallel`), judging never does: timed measurements on a
shared machine would disturb each other.
"""

from __future__ import annotations

import dataclasses
import shlex
import threading
from collections.abc import Callable
from concurrent.futures import FIRST_COMPLETED, Future, ThreadPoolExecutor, wait
from pathlib import Path
from typing import TYPE_CHECKING, Literal

from optarena.agents import RunContext
from optarena.errors import OptarenaError
from optarena.experiments._plan import LoadedPlan
from optarena.experiments._schedule import ScheduledTrial, artifacts_sha256
from optarena.experiments._state import (
    CELL_LABEL,
    EXPERIMENT_LABEL,
    KEY_LABEL,
    LABEL_DIGITS,
    PLAN_LABEL,
    ExperimentState,
    experiment_state,
)
from optarena.judge import JudgeOptions, JudgeResult, judge
from optarena.ledger import Ledger
from optarena.records import AgentLimits, TrialRecord
from optarena.tasks import Task
from optarena.trials import TrialConfig, TrialHook, run_trial

if TYPE_CHECKING:
    from optarena.experiments._ray import RayOptions

# The agent's processes see their trial's key (task/condition/repetition): a scripted agent can
# seed itself from it and behave the same when an experiment is re-run.
KEY_ENV = "OPTARENA_EXPERIMENT_KEY"


class _Env(TrialHook):
    """A condition's extra environment for the agent's processes."""

    def __init__(self, env: dict[str, str]) -> None:
        self.env = env

    def before_agent(self, context: RunContext) -> RunContext:
        return dataclasses.replace(context, env={**context.env, **self.env})


def trial_config(plan: LoadedPlan, s: ScheduledTrial, cells: dict[str, str]) -> TrialConfig:
    p = plan.plan
    c = plan.condition(s.condition)
    args = dict(c.agent_args)
    if c.command is not None:
        args["command"] = c.command
    if "command" in args:  # {plan_dir}: where the plan's own files (agent scripts) are
        args["command"] = args["command"].replace("{plan_dir}", shlex.quote(str(plan.path.parent)))
    labels = {
        **c.labels,
        EXPERIMENT_LABEL: plan.name,
        KEY_LABEL: s.key,
        "condition": c.name,
        "repetition": str(s.repetition),
        PLAN_LABEL: plan.sha256[:LABEL_DIGITS],
        CELL_LABEL: cells[s.cell][:LABEL_DIGITS],
    }
    art = artifacts_sha256(plan.artifacts[c.name])
    if art is not None:
        labels["artifacts_sha256"] = art[:16]
    limits = AgentLimits(
        wall_s=p.limits.timeout_s,
        max_tokens=p.limits.max_tokens,
        max_cost_usd=p.limits.max_cost_usd,
        max_calls=p.limits.max_calls,
    )
    return TrialConfig(
        task=plan.tasks[s.task],
        agent=c.agent,
        agent_args=args,
        limits=limits,
        labels=labels,
        measure=p.judge.measure,
        budget_s=p.judge.budget_s,
        min_effect=p.judge.min_effect,
        artifacts=plan.artifacts[c.name],
    )


Event = Callable[[str, ScheduledTrial, TrialRecord | None, str], None]
# kinds: "start"; "end" (a complete record); "error" (the attempt raised: message), then
# "retry" or "failed" (no attempt left: the key counts as a failure)


def run_experiment(
    plan: LoadedPlan,
    ledger_home: Path,
    *,
    max_parallel: int | None = None,
    on_event: Event | None = None,
    judge_fn: Callable[[Task, Path, JudgeOptions], JudgeResult] = judge,
    executor: Literal["local", "ray"] | None = None,
    ray: RayOptions | None = None,
) -> ExperimentState:
    """Run every pending key; returns the state afterwards. An interruption (Ctrl-C) is
    recorded by the trial it hit and re-raised; the next run resumes. Bad input found before a
    trial is recorded (an agent not installed) raises OptarenaError and stops the run.
    `executor` (default: the plan's) `ray` runs the trials on a Ray cluster (`ray`: how)."""
    with Ledger.open(ledger_home) as ledger:
        ledger.reconcile()  # recovery first: rows a killed run left `running`, its leftovers
        state = experiment_state(plan, ledger)
    if (executor or plan.plan.experiment.executor) == "ray":
        from optarena.experiments._ray import RayOptions, run_on_ray

        if judge_fn is not judge:  # it would not reach the judge nodes: never silently dropped
            raise OptarenaError("judge_fn: the Ray executor judges with the judge on judge nodes")

        run_on_ray(plan, ledger_home, state, ray or RayOptions(), on_event or (lambda *a: None))
        with Ledger.open(ledger_home) as ledger:
            return experiment_state(plan, ledger, state.cells)
    parallel = max(1, max_parallel or plan.plan.experiment.max_parallel)
    judging = threading.Lock()

    def locked_judge(task: Task, path: Path, options: JudgeOptions) -> JudgeResult:
        with judging:
            return judge_fn(task, path, options)

    def one(s: ScheduledTrial) -> TrialRecord:
        cond = plan.condition(s.condition)
        with Ledger.open(ledger_home) as ledger:  # one connection per thread
            return run_trial(
                trial_config(plan, s, state.cells),
                ledger,
                hooks=[_Env({**cond.env, KEY_ENV: s.key})],
                judge_fn=locked_judge,
            )

    attempt = _Attempts(plan, ledger_home, state, one, on_event or (lambda *a: None))
    if parallel == 1:
        for s in state.pending:
            while attempt(s):
                pass
    else:
        _run_parallel(state.pending, parallel, attempt)
    with Ledger.open(ledger_home) as ledger:
        return experiment_state(plan, ledger, state.cells)


class _Attempts:
    """One attempt at a key; returns True when the key should be tried again."""

    def __init__(
        self,
        plan: LoadedPlan,
        home: Path,
        state: ExperimentState,
        one: Callable[[ScheduledTrial], TrialRecord],
        emit: Event,
    ) -> None:
        self.plan, self.home, self.cells = plan, home, state.cells
        self.rows = {s.key: len(state.rows.get(s.key, [])) for s in state.schedule}
        self.tries = dict.fromkeys(self.rows, 0)  # failed here, whatever the rows say
        self.one, self.emit = one, emit

    def __call__(self, s: ScheduledTrial) -> bool:
        self.emit("start", s, None, "")
        try:
            record = self.one(s)
        except KeyboardInterrupt:
            raise
        except BaseException as e:  # whatever a trial raised, its row recorded it
            return self._failed(s, e)
        self.emit("end", s, record, "")
        return False

    def _failed(self, s: ScheduledTrial, error: BaseException) -> bool:
        with Ledger.open(self.home) as ledger:
            now = experiment_state(self.plan, ledger, self.cells)
        rows = len(now.rows.get(s.key, []))
        if rows == self.rows[s.key]:
            raise error  # nothing was recorded: bad input before the trial began
        self.rows[s.key] = rows
        self.tries[s.key] += 1
        self.emit("error", s, None, f"{type(error).__name__}: {error}")
        # A row its finish could not write (a full disk) stays `running` until the next
        # start reconciles it: this run's own count stops the retries all the same.
        if now.outcome(s.key) == "pending" and self.tries[s.key] <= now.retries:
            self.emit("retry", s, None, f"attempt {self.tries[s.key] + 1}")
            return True
        self.emit("failed", s, None, f"no result after {self.tries[s.key]} attempt(s) in this run")
        return False


def _run_parallel(
    pending: list[ScheduledTrial],
    parallel: int,
    attempt: Callable[[ScheduledTrial], bool],
    stop: threading.Event | None = None,
) -> None:
    """Keys in schedule order, `parallel` at once; on an error the queue is dropped and the
    attempts running finish. `stop` is set by Ctrl-C (an attempt on a cluster watches it and
    ends on record; a local one has its own interruption)."""
    queue = list(pending)
    running: dict[Future[bool], ScheduledTrial] = {}
    with ThreadPoolExecutor(max_workers=parallel) as pool:
        try:
            while queue or running:
                while queue and len(running) < parallel:
                    s = queue.pop(0)
                    running[pool.submit(attempt, s)] = s
                done, _ = wait(list(running), timeout=0.5, return_when=FIRST_COMPLETED)
                for f in done:
                    s = running.pop(f)
                    if f.result():
                        queue.append(s)
        except BaseException as e:
            if stop is not None and isinstance(e, KeyboardInterrupt):
                stop.set()
            queue.clear()
            for f in running:
                f.cancel()
            raise
