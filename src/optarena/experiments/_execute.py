"""Running a plan: every scheduled trial into the ledger, resumable after any interruption.

Each trial is tagged (labels) with the experiment, its plan hash, condition, repetition and
key; resuming reads those tags back: a trial with a complete row is kept, an interrupted one
stays on record and its key runs again, so nothing is lost and nothing is duplicated. Agents
may run in parallel (`max_parallel`), judging never does: timed measurements on a shared
machine would disturb each other.
"""

from __future__ import annotations

import dataclasses
import shlex
import threading
import time
from collections.abc import Callable
from concurrent.futures import FIRST_COMPLETED, Future, ThreadPoolExecutor, wait
from dataclasses import dataclass, field
from pathlib import Path

from optarena.agents import AgentLimits, RunContext
from optarena.errors import OptarenaError
from optarena.experiments._plan import LoadedPlan
from optarena.experiments._schedule import ScheduledTrial, artifacts_sha256, schedule
from optarena.judge import JudgeOptions, JudgeResult, judge
from optarena.ledger import Ledger, TrialRecord
from optarena.runs import TrialConfig, TrialHook, run_trial
from optarena.tasks import Task

EXPERIMENT_LABEL = "experiment"
KEY_LABEL = "experiment_key"
# The agent's processes see their trial's key (task/condition/repetition): a scripted agent can
# seed itself from it and behave the same when an experiment is re-run.
KEY_ENV = "OPTARENA_EXPERIMENT_KEY"


class _Env(TrialHook):
    """A condition's extra environment for the agent's processes."""

    def __init__(self, env: dict[str, str]) -> None:
        self.env = env

    def before_agent(self, context: RunContext) -> RunContext:
        return dataclasses.replace(context, env={**context.env, **self.env})


@dataclass
class ExperimentState:
    """Where a plan stands in a ledger: its trials by key, newest first."""

    plan: LoadedPlan
    schedule: list[ScheduledTrial]
    rows: dict[str, list[TrialRecord]] = field(default_factory=dict)

    def done(self, key: str) -> TrialRecord | None:
        return next((r for r in self.rows.get(key, []) if r.state == "complete"), None)

    @property
    def pending(self) -> list[ScheduledTrial]:
        return [s for s in self.schedule if self.done(s.key) is None]

    def counts(self) -> dict[str, int]:
        complete = sum(self.done(s.key) is not None for s in self.schedule)
        interrupted = sum(r.state == "interrupted" for rs in self.rows.values() for r in rs)
        return {
            "scheduled": len(self.schedule),
            "complete": complete,
            "pending": len(self.schedule) - complete,
            "interrupted_rows": interrupted,
        }


def experiment_state(plan: LoadedPlan, ledger: Ledger) -> ExperimentState:
    state = ExperimentState(plan, schedule(plan))
    for r in ledger.trials(limit=None):
        if r.labels.get(EXPERIMENT_LABEL) == plan.name and KEY_LABEL in r.labels:
            state.rows.setdefault(r.labels[KEY_LABEL], []).append(r)
    return state


def trial_config(plan: LoadedPlan, s: ScheduledTrial) -> TrialConfig:
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
        "plan_sha256": plan.sha256[:16],
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
        artifacts=plan.artifacts[c.name],
    )


Event = Callable[[str, ScheduledTrial, TrialRecord | None, str], None]


def run_experiment(
    plan: LoadedPlan,
    ledger_home: Path,
    *,
    max_parallel: int | None = None,
    on_event: Event | None = None,
    judge_fn: Callable[[Task, Path, JudgeOptions], JudgeResult] = judge,
) -> ExperimentState:
    """Run every pending trial; returns the state afterwards. An interruption (Ctrl-C) is
    recorded by the trial it hit and re-raised; the next run resumes."""
    with Ledger.open(ledger_home) as ledger:
        ledger.reconcile()
        state = experiment_state(plan, ledger)
    pending = state.pending
    parallel = max(1, max_parallel or plan.plan.experiment.max_parallel)
    judging = threading.Lock()
    min_effect = plan.plan.judge.min_effect

    def locked_judge(task: Task, path: Path, options: JudgeOptions) -> JudgeResult:
        if min_effect is not None:
            options = dataclasses.replace(options, min_effect=min_effect)
        with judging:
            return judge_fn(task, path, options)

    def one(s: ScheduledTrial) -> TrialRecord:
        cond = plan.condition(s.condition)
        with Ledger.open(ledger_home) as ledger:  # one connection per thread
            return run_trial(
                trial_config(plan, s),
                ledger,
                hooks=[_Env({**cond.env, KEY_ENV: s.key})],
                judge_fn=locked_judge,
            )

    emit = on_event or (lambda *a: None)
    if parallel == 1:
        for s in pending:
            emit("start", s, None, "")
            try:
                emit("end", s, one(s), "")
            except OptarenaError as e:
                emit("error", s, None, str(e))
                raise
    else:
        _run_parallel(pending, parallel, one, emit)
    with Ledger.open(ledger_home) as ledger:
        return experiment_state(plan, ledger)


def _run_parallel(
    pending: list[ScheduledTrial],
    parallel: int,
    one: Callable[[ScheduledTrial], TrialRecord],
    emit: Event,
) -> None:
    queue = list(pending)
    running: dict[Future[TrialRecord], ScheduledTrial] = {}
    with ThreadPoolExecutor(max_workers=parallel) as pool:
        try:
            while queue or running:
                while queue and len(running) < parallel:
                    s = queue.pop(0)
                    emit("start", s, None, "")
                    running[pool.submit(one, s)] = s
                done, _ = wait(list(running), timeout=0.5, return_when=FIRST_COMPLETED)
                for f in done:
                    s = running.pop(f)
                    try:
                        emit("end", s, f.result(), "")
                    except OptarenaError as e:
                        emit("error", s, None, str(e))
                        raise
        except BaseException:
            queue.clear()
            for f in running:
                f.cancel()
            raise


def elapsed_since(t0: float) -> float:
    return time.monotonic() - t0
