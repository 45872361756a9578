"""The trial lifecycle: fresh workspace -> agent -> delivery -> judge -> ledger.

The ledger row is inserted as `running` before anything happens, and finished exactly once:
`complete` in one transaction with everything (record, judgement, artifact references, the
metered model calls), or `interrupted` (the start record plus the error, and the calls the
proxy logged so far) when anything stops the trial, including Ctrl-C and SIGTERM. A `kill -9`
leaves the row `running` until the next command that runs trials recovers (`Ledger.reconcile`,
its first step), which finds its process gone and marks it interrupted. Every runner's model
calls are metered (`optarena.agents.run_metered`); the trial's files follow one documented
layout (`optarena.records.TrialPaths`).
The agent's status and the judge's verdict are separate: a timed-out or crashed agent's
delivered files are judged like any other.

The agent runs in an agent sandbox (`optarena.sandbox.AgentSandbox`, its spec from
`agent_sandbox_spec`) whose root holds only the system, the toolchain and its own directories
(no ledger, other trial or task package) and lets it write only its workspace and private
homes; what was active is the record's `agent_sandbox`. Before judging, optarena's own files
and the task package are checked against their references (`judge.verify_judge`): a
difference is recorded (`outside_changes`, reason `judge_tampered`) and nothing is judged.
"""

from __future__ import annotations

import contextlib
import dataclasses
import os
import secrets
import signal
import socket
import threading
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from types import FrameType, TracebackType
from typing import Any, Self

from optarena.agents import (
    AgentRunner,
    McpServer,
    RunContext,
    create_runner,
    run_metered,
    runner_class,
    runner_ref,
)
from optarena.errors import LedgerError, OptarenaError
from optarena.files import printable
from optarena.identity import code_references, judge_sha256, runtime_fingerprint
from optarena.judge import JudgeTamperedError
from optarena.ledger import Ledger, utc_now
from optarena.processes import start_ticks
from optarena.records import (
    AgentInfo,
    AgentLimits,
    AgentOutcome,
    Judgement,
    JudgeSettings,
    TrialPaths,
    TrialRecord,
    evolve,
)
from optarena.tasks import Task
from optarena.tasks.external import FrozenExternal
from optarena.trials._containment import agent_sandbox_spec
from optarena.trials._delivery import describe, refusal_judgement, store_delivery
from optarena.trials._judging import JudgeFn
from optarena.trials._sources import TrialTask, trial_task
from optarena.trials._workspace import (
    Delivery,
    DeliveryRefused,
    WorkspaceLimits,
    capture,
    check_workspace,
    clear_dir,
)

TrialProgress = Callable[[str, str, str], None]  # (phase, "start" | "end" | "info", message)


@dataclass(frozen=True)
class TrialConfig:
    """Everything a trial is asked to do, fixed before it starts."""

    task: Task | FrozenExternal  # a task package, or a frozen external project
    agent: str  # a registered runner name or 'module:Class'
    agent_args: Mapping[str, str] = field(default_factory=dict)
    limits: AgentLimits = field(default_factory=AgentLimits)
    labels: Mapping[str, str] = field(default_factory=dict)
    workspace: Path | None = None  # default: <ledger>/work/<trial id>/workspace
    overwrite: bool = False
    measure: bool = True
    budget_s: float | None = None
    min_effect: float | None = None  # None: the task's
    agent_sandbox: bool = True  # False: --no-agent-sandbox (debugging; recorded as such)
    artifacts: Path | None = None  # copied into the workspace before the baseline commit
    workspace_limits: WorkspaceLimits = field(default_factory=WorkspaceLimits)  # else refused


class TrialHook:
    """Extension point around the agent phase. Override what you need. (Metering is not a
    hook: every runner's calls are metered by `optarena.agents.run_metered`.)

    A hook is a context manager: the trial enters it before its runner is made (a hook that
    runs something for the agent, an MCP server's host, starts it there) and leaves it when the
    trial ends, however it ends. `mcp_servers`, asked once entered, are offered to the agent
    through its runner's own options (`AgentRunner.mcp_args`, so recorded with its flags).
    `before_agent` may return a changed context (e.g. `dataclasses.replace(context, env=...)`:
    runners pass `env` to the agent; `proxy_ports` opens host ports to it); None keeps it.
    `after_agent` may return a changed outcome.
    """

    def __enter__(self) -> Self:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()

    def close(self) -> None:
        """What leaving the hook ends (its hosts, say); nothing unless overridden."""

    def mcp_servers(self) -> Sequence[McpServer]:
        return ()

    def before_agent(self, context: RunContext) -> RunContext | None:
        return None

    def after_agent(self, context: RunContext, outcome: AgentOutcome) -> AgentOutcome:
        return outcome


class TrialInterrupted(KeyboardInterrupt):
    """Ctrl-C or SIGTERM stopped a trial after its row was recorded as `interrupted`.

    `kept` says what of the trial the row holds (a delivery captured before the interruption
    is kept: candidate, diff, logs, agent times; `optarena trial rejudge` can judge it)."""

    def __init__(self, trial_id: str, error: str, kept: str, delivered: bool) -> None:
        super().__init__(error)
        self.trial_id = trial_id
        self.error = error
        self.kept = kept
        self.delivered = delivered  # the row holds a candidate `trial rejudge` can judge


def new_trial_id() -> str:
    """Ten random hex digits: short enough to type, unique without coordination (a clash is
    refused by the ledger's primary key, never overwritten). Time order is `created_at`."""
    return secrets.token_hex(5)


class _Phases:
    """Times the phases and reports them; remembers which one was running."""

    def __init__(self, progress: TrialProgress | None) -> None:
        self.times: dict[str, float] = {}
        self.current = "start"
        self._progress = progress

    def info(self, message: str) -> None:
        if self._progress:
            self._progress(self.current, "info", message)

    @contextlib.contextmanager
    def __call__(self, name: str) -> Iterator[dict[str, str]]:
        self.current = name
        note: dict[str, str] = {"message": ""}
        if self._progress:
            self._progress(name, "start", "")
        t0 = time.monotonic()
        yield note
        self.times[name] = round(time.monotonic() - t0, 4)
        if self._progress:
            self._progress(name, "end", note["message"])


@contextlib.contextmanager
def sigterm_interrupts() -> Iterator[None]:
    """SIGTERM ends the trial like Ctrl-C: agent tree killed, row marked interrupted (and a
    cluster's driver: every attempt in flight recorded as stopped)."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return

    def handler(signum: int, frame: FrameType | None) -> None:
        raise KeyboardInterrupt(f"signal {signum}")

    old = signal.signal(signal.SIGTERM, handler)
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, old)


def start_record(
    trial_id: str, config: TrialConfig, runner: AgentRunner, workspace: Path
) -> TrialRecord:
    """The row a trial begins with (`running`): who runs what where, nothing of its result."""
    return TrialRecord(
        id=trial_id,
        state="running",
        created_at=utc_now(),
        host=socket.gethostname(),
        pid=os.getpid(),
        pid_start=start_ticks(os.getpid()),
        task=trial_task(config.task).info,
        agent=AgentInfo(
            name=config.agent,
            label=runner.label,
            is_agent=runner.is_agent,
            runner=runner_ref(type(runner)),
            version=runner.version(),
            model=runner.model(),
            flags=runner.flags(),
        ),
        labels=dict(config.labels),
        limits=config.limits,
        judge_settings=JudgeSettings(
            measure=config.measure, budget_s=config.budget_s, min_effect=config.min_effect
        ),
        runtime=runtime_fingerprint(),
        judge_sha256=judge_sha256(),
        workspace=str(workspace),
    )


def run_trial(
    config: TrialConfig,
    ledger: Ledger,
    *,
    runner: AgentRunner | None = None,
    hooks: Sequence[TrialHook] = (),
    progress: TrialProgress | None = None,
    judge_fn: JudgeFn | None = None,
    trial_id: str | None = None,
    source: TrialTask | None = None,
) -> TrialRecord:
    """Run one trial and record it; returns the completed record. Bad input raises
    OptarenaError before anything is recorded; an interruption is recorded, then re-raised.
    The hooks are entered first and left last (`TrialHook`).

    `trial_id` is given by a caller that numbers attempts itself (a Ray worker runs the trial
    its driver already knows by that id); `source` replaces the task as the lifecycle uses it
    (a Ray worker's judges it on a judge node)."""
    source = source or trial_task(config.task)
    source.check_runnable()
    if isinstance(config.task, FrozenExternal) and config.budget_s is not None:
        raise OptarenaError(
            f"{config.task.path}: an external task's benchmark budget is frozen in its spec "
            "([measurement] budget_s); --budget-s does not apply"
        )
    code_references()  # the reference judging checks against, fixed before any agent runs
    with contextlib.ExitStack() as entered:
        for hook in hooks:
            entered.enter_context(hook)
        servers = [s for hook in hooks for s in hook.mcp_servers()]
        if servers:
            if runner is not None:
                raise OptarenaError("a trial given its runner cannot offer it MCP servers")
            args = runner_class(config.agent).mcp_args(servers, config.agent_args)
            config = dataclasses.replace(config, agent_args=args)
        return _run_entered(config, ledger, runner, hooks, progress, judge_fn, trial_id, source)


def _run_entered(
    config: TrialConfig,
    ledger: Ledger,
    runner: AgentRunner | None,
    hooks: Sequence[TrialHook],
    progress: TrialProgress | None,
    judge_fn: JudgeFn | None,
    trial_id: str | None,
    source: TrialTask,
) -> TrialRecord:
    """`run_trial` once its hooks are entered."""
    runner = runner or create_runner(config.agent, config.agent_args)
    runner.check_available()
    trial_id = trial_id or new_trial_id()
    work = ledger.work_dir(trial_id)
    workspace = (config.workspace or work / "workspace").absolute()
    check_workspace(workspace, config.overwrite, [ledger.home])
    record = start_record(trial_id, config, runner, workspace)
    ledger.begin_trial(record)
    phases = _Phases(progress)
    delivered: list[TrialRecord] = []  # the record as far as it got, once the delivery is stored
    try:
        with sigterm_interrupts():
            return _execute(
                config, source, ledger, runner, record, work, phases, hooks, judge_fn, delivered
            )
    except BaseException as e:
        error = printable(f"during {phases.current}: {type(e).__name__}: {e}")
        kept = _record_interruption(ledger, trial_id, delivered, error)
        if isinstance(e, KeyboardInterrupt) and not isinstance(e, TrialInterrupted):
            raise TrialInterrupted(trial_id, error, kept, kept == _KEPT_DELIVERY) from e
        raise


def _record_interruption(
    ledger: Ledger, trial_id: str, delivered: list[TrialRecord], error: str
) -> str:
    """Finish the row as `interrupted`: with the stored delivery when there is one (nothing
    the agent delivered is lost), else the start record. Returns what the row keeps."""
    start_only = "the start record only (no delivery was captured)"
    if not delivered:
        ledger.mark_interrupted(trial_id, error)
        return start_only
    calls, notes = ledger.logged_calls(trial_id)  # what the proxy saw until the interruption
    why = "; ".join([error, *notes])
    try:
        kept = evolve(delivered[-1], state="interrupted", finished_at=utc_now(), error=why)
        ledger.finish_trial(kept, calls=calls)
    except LedgerError:
        return "the record as finished before"  # already finished (a refused judgement)
    except Exception as e:  # the delivery itself cannot be recorded: the row never stays running
        ledger.mark_interrupted(trial_id, printable(f"{error}; its delivery not recorded: {e}"))
        return start_only
    return _KEPT_DELIVERY


_KEPT_DELIVERY = "the delivery (candidate, diff, logs, agent times), no verdict"


def _execute(
    config: TrialConfig,
    task: TrialTask,
    ledger: Ledger,
    runner: AgentRunner,
    record: TrialRecord,
    work: Path,
    phases: _Phases,
    hooks: Sequence[TrialHook],
    judge_fn: JudgeFn | None,
    delivered: list[TrialRecord],
) -> TrialRecord:
    paths = TrialPaths.of(work, Path(record.workspace))
    workspace, logs_dir, shadow = paths.workspace, paths.logs, paths.shadow
    with phases("setup") as note:
        workspace.mkdir(parents=True, exist_ok=True)
        clear_dir(workspace)  # empty unless --overwrite was given (checked before the row)
        logs_dir.mkdir(parents=True, exist_ok=True)
        prepared = task.prepare(workspace, shadow, config.artifacts)
        baseline, prompt = prepared.baseline, prepared.prompt
        note["message"] = f"{workspace}: {', '.join(prepared.starter)}"
    with phases("agent") as note:
        t_agent = time.monotonic()
        try:
            outcome = _run_agent(runner, record, paths, prompt, config, ledger, hooks, task)
        except KeyboardInterrupt:
            # the agent's process tree is gone; what it left in the workspace is its delivery
            took = round(time.monotonic() - t_agent, 3)
            stopped = AgentOutcome(
                status="failed", wall_s=took, detail="stopped by Ctrl-C or SIGTERM"
            )
            limits = config.workspace_limits
            _keep_delivery(task, ledger, record, work, baseline, stopped, limits, phases, delivered)
            raise
        note["message"] = f"{outcome.status}: {outcome.detail}"
    record = evolve(record, agent_sandbox=_sandbox_record(config, runner, outcome))
    with phases("capture") as note:
        delivery = _capture(task, paths, baseline, config.workspace_limits)
        kept = None if isinstance(delivery, DeliveryRefused) else delivery
        artifacts, outcome = store_delivery(ledger, kept, paths, outcome)
        note["message"] = describe(kept) if kept is not None else f"refused: {delivery}"
    if isinstance(delivery, DeliveryRefused):  # recorded rejected, never judged
        judgement = refusal_judgement(record, delivery)
        final = _final_record(record, outcome, None, judgement, baseline, artifacts, phases)
        ledger.finish_trial(final, judgement, outcome.calls)
        return final
    delivered.append(_final_record(record, outcome, delivery, None, baseline, artifacts, phases))
    with phases("judge") as note:
        try:
            task.verify(record.task.sha256)
        except JudgeTamperedError as e:
            refused = _final_record(record, outcome, delivery, None, baseline, artifacts, phases)
            ledger.finish_trial(_refused(refused, e), calls=outcome.calls)
            raise
        judgement = task.judge(
            paths.candidate,
            delivery.diff,
            delivery.out_of_scope,
            trial_id=record.id,
            kind="trial",
            settings=record.judge_settings,
            store=ledger.store,
            judge_fn=judge_fn,
            progress=lambda msg, _frac: phases.info(msg),
        )
        note["message"] = judgement.verdict
    final = _final_record(record, outcome, delivery, judgement, baseline, artifacts, phases)
    ledger.finish_trial(final, judgement, outcome.calls)
    return final


def _capture(
    task: TrialTask, paths: TrialPaths, baseline: str, limits: WorkspaceLimits
) -> Delivery | DeliveryRefused:
    """The delivery, or why it was refused unread (the agent's doing, never an error)."""
    try:
        return capture(task, paths.workspace, paths.shadow, baseline, paths.candidate, limits)
    except DeliveryRefused as refused:
        return refused


def _keep_delivery(
    task: TrialTask,
    ledger: Ledger,
    record: TrialRecord,
    work: Path,
    baseline: str,
    stopped: AgentOutcome,
    limits: WorkspaceLimits,
    phases: _Phases,
    delivered: list[TrialRecord],
) -> None:
    """After an interrupted agent: capture and store what it left (diff, editable files, logs),
    for the interrupted row to keep; no agent status (the agent did not end by itself)."""
    paths = TrialPaths.of(work, Path(record.workspace))
    try:
        delivery = capture(task, paths.workspace, paths.shadow, baseline, paths.candidate, limits)
        artifacts, stopped = store_delivery(ledger, delivery, paths, stopped)
    except Exception:  # capturing is best effort here (a refused one too): the start record
        return
    kept = _final_record(record, stopped, delivery, None, baseline, artifacts, phases)
    delivered.append(evolve(kept, agent_status=None))


def _run_agent(
    runner: AgentRunner,
    record: TrialRecord,
    paths: TrialPaths,
    prompt: str,
    config: TrialConfig,
    ledger: Ledger,
    hooks: Sequence[TrialHook],
    task: TrialTask,
) -> AgentOutcome:
    context = RunContext(
        record.id,
        record.task.id,
        paths,
        sandbox=agent_sandbox_spec(
            ledger,
            workspace=paths.workspace,
            home=paths.home,
            limits=config.limits,
            task_hidden=task.hidden(),
            enabled=config.agent_sandbox,
        ),
    )
    for hook in hooks:
        context = hook.before_agent(context) or context
    outcome = run_metered(runner, context, prompt, config.limits)
    for hook in hooks:
        outcome = hook.after_agent(context, outcome)
    return outcome


def _sandbox_record(
    config: TrialConfig, runner: AgentRunner, outcome: AgentOutcome
) -> dict[str, Any]:
    """`agent_sandbox` of the record: the sandbox's own report, or why there was none."""
    if outcome.sandbox is not None:
        return outcome.sandbox
    if not config.agent_sandbox:
        why = (
            f"--no-agent-sandbox: the agent ran as uid {os.getuid()} with everything that user "
            "may do (the installed judge, the ledger, other trials, the network)"
        )
    elif not runner.is_agent:
        why = f"{runner.label}: no agent process was started"
    else:
        why = f"runner {runner.label} started no process in the agent sandbox"
    return {"enabled": False, "notes": [why]}


def _refused(record: TrialRecord, error: JudgeTamperedError) -> TrialRecord:
    """The trial as recorded when the judge refused to judge: no verdict, what changed."""
    return evolve(
        record,
        state="interrupted",
        verdict=None,
        error=str(error),
        reason_codes=[error.code],
        reasons=[str(error)],
        outside_changes=error.changes,
    )


def _final_record(
    record: TrialRecord,
    outcome: AgentOutcome,
    delivery: Delivery | None,
    judgement: Judgement | None,
    baseline: str,
    artifacts: dict[str, str],
    phases: _Phases,
) -> TrialRecord:
    update: dict[str, Any] = {
        "state": "complete",
        "finished_at": utc_now(),
        "agent_status": outcome.status,
        "agent_exit_code": outcome.exit_code,
        "agent_detail": outcome.detail,
        "session_id": outcome.session_id,
        "usage": outcome.usage,
        "metered_usage": outcome.metered_usage,
        "agent_wall_s": outcome.wall_s,
        "agent_cpu_s": outcome.cpu_s,
        "baseline_commit": baseline,
        "changed": delivery.changed if delivery else [],
        "out_of_scope": delivery.out_of_scope if delivery else [],
        "phases_s": dict(phases.times),
        "artifacts": artifacts,
    }
    if judgement is not None:
        update |= {
            "candidate_sha256": judgement.candidate_sha256,
            "verdict": judgement.verdict,
            "reasons": judgement.reasons,
            "reason_codes": judgement.reason_codes,
            "metrics": judgement.metrics,
        }
        if judgement.judge_json:
            update["artifacts"] = {**artifacts, "judge": judgement.judge_json}
    return evolve(record, **update)
