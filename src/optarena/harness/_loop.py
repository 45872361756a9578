"""The harness-improvement loop: attempt, judge, reflect, build, vet, repair, quarantine,
register, activate; N times.

- attempt: a fresh agent session on the task, an ordinary contained trial in the ledger, with
  the qualified artifacts activated (skills as files, MCP servers through recording relays);
- score: the trial's own judgement of the delivered files (the agent's claims, a result file
  it wrote included, are never read);
- reflect, build, repair: follow-up turns in the attempt's session (`_session.follow_up`);
- vet: every new or changed artifact in the workspace's `.harness/` in a clean replay
  workspace (the task's starter files, nothing the agent left); what still fails after the
  repairs is quarantined by content hash and never activated;
- task state: `continue` carries the delivered files into the next attempt; `reset` starts
  each attempt from the baseline (artifacts are kept either way).

The run directory (`<ledger>/harness/<id>/` by default, out of every agent's reach) holds
`run.json`, `registry.json`, `snapshots/` (each artifact version as vetted), `it<N>/`
(activation directories and phase logs) and `best/` (the best judged candidate, restored).
Both files are rewritten after every phase: an interrupted run keeps what it did.
"""

from __future__ import annotations

import json
import secrets
import shutil
import tempfile
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path

from optarena.agents import AgentRunner, create_runner, runner_class
from optarena.errors import OptarenaError
from optarena.files import copy_entry
from optarena.harness._activate import export_artifacts
from optarena.harness._hook import TELEMETRY_LOG, ActiveServer, HarnessHook
from optarena.harness._prompts import build_prompt, judge_summary, reflect_prompt, repair_prompt
from optarena.harness._record import (
    ArtifactRef,
    HarnessRun,
    IterationRecord,
    PhaseName,
    PhaseRecord,
    RunSettings,
    save_run,
)
from optarena.harness._registry import (
    ArtifactEntry,
    Registry,
    load_registry,
    save_registry,
)
from optarena.harness._scan import area_status, scan_area
from optarena.harness._score import better, count_calls, score_of, stop_reason
from optarena.harness._session import follow_up
from optarena.ledger import Ledger, utc_now
from optarena.records import AgentLimits, TrialRecord, evolve
from optarena.tasks import Task
from optarena.trials import TrialConfig, agent_sandbox_spec, run_trial, trial_task, write_starter

HarnessProgress = Callable[[str], None]


@dataclass(frozen=True)
class HarnessConfig:
    """Everything a harness run is asked to do, fixed before it starts."""

    task: Task
    agent: str
    agent_args: Mapping[str, str] = field(default_factory=dict)
    iterations: int = 2
    task_state: str = "continue"  # or "reset"
    attempt: AgentLimits = field(default_factory=AgentLimits)
    reflection_timeout_s: float = 600.0
    build_timeout_s: float = 1200.0
    repair_attempts: int = 1
    stop_when: str | None = None  # "improved" or a speed-up such as "1.2"
    measure: bool = True
    budget_s: float | None = None
    run_dir: Path | None = None  # default: <ledger>/harness/<run id>
    registry: Path | None = None  # start from this registry's qualified artifacts
    agent_sandbox: bool = True
    final_build: bool = True  # False: no reflection or build after the last attempt (what it
    # would build serves only an export, never this run)


def check_config(config: HarnessConfig) -> AgentRunner:
    """Bad input before anything runs; the runner the attempts will use."""
    if config.iterations < 1:
        raise OptarenaError(f"--iterations {config.iterations}: expected at least 1")
    if config.task_state not in ("continue", "reset"):
        raise OptarenaError(f"--task-state '{config.task_state}': expected continue or reset")
    if config.repair_attempts < 0:
        raise OptarenaError(f"--repair-attempts {config.repair_attempts}: expected 0 or more")
    stop_reason(None, config.stop_when)  # validates the value
    if not runner_class(config.agent).can_resume:
        raise OptarenaError(
            f"agent '{config.agent}' cannot resume a session (reflection and build continue "
            "the attempt's session): use claude or codex"
        )
    runner = create_runner(config.agent, config.agent_args)
    runner.check_available()
    return runner


def _run_dir(config: HarnessConfig, ledger: Ledger, run_id: str) -> Path:
    run_dir = (config.run_dir or ledger.home / "harness" / run_id).absolute()
    if run_dir.exists() and any(run_dir.iterdir()):
        raise OptarenaError(f"run directory {run_dir} is not empty")
    try:
        run_dir.mkdir(parents=True, exist_ok=True)
        probe = run_dir / ".write-test"
        probe.write_text("")
        probe.unlink()
    except OSError as e:
        raise OptarenaError(f"run directory {run_dir} is not writable: {e.strerror or e}") from None
    return run_dir


class _Loop:
    def __init__(
        self, config: HarnessConfig, ledger: Ledger, progress: HarnessProgress | None
    ) -> None:
        self.config, self.ledger = config, ledger
        self.task_hidden = trial_task(config.task).hidden()  # as the attempts' trials hide
        # Artifacts the agent built run contained whatever --no-agent-sandbox says: as an
        # agent would be, no workspace of the ledger's their own.
        self.artifact_spec = agent_sandbox_spec(
            ledger, workspace=None, home=None, limits=config.attempt, task_hidden=self.task_hidden
        )
        self.say = progress or (lambda _m: None)
        self.runner = check_config(config)
        start_registry = load_registry(config.registry) if config.registry else None
        run_id = secrets.token_hex(5)
        self.dir = _run_dir(config, ledger, run_id)
        self.registry = Registry(run=run_id)
        self.snapshots = self.dir / "snapshots"
        if start_registry is not None:
            assert config.registry is not None
            self._adopt(start_registry, config.registry.parent / "snapshots")
        self.run = HarnessRun(id=run_id, created_at=utc_now(), settings=self._settings())
        self.best: IterationRecord | None = None
        self.save()

    def _settings(self) -> RunSettings:
        c = self.config
        return RunSettings(
            task=c.task.id, agent=c.agent, agent_args=sorted(c.agent_args),
            iterations=c.iterations, task_state=c.task_state,  # type: ignore[arg-type]
            attempt=c.attempt, reflection_timeout_s=c.reflection_timeout_s,
            build_timeout_s=c.build_timeout_s, repair_attempts=c.repair_attempts,
            stop_when=c.stop_when, measure=c.measure, budget_s=c.budget_s,
            final_build=c.final_build,
        )  # fmt: skip

    def _adopt(self, other: Registry, snapshots: Path) -> None:
        """A previous run's qualified artifacts, as iteration 0 of this one."""
        for a in other.qualified():
            src = snapshots / a.path
            if not src.exists():
                raise OptarenaError(f"{src}: the registry names a snapshot that is not there")
            dest = self.snapshots / a.path
            dest.parent.mkdir(parents=True, exist_ok=True)
            copy_entry(src, dest)
            self.registry.add(evolve(a, iteration=0))

    def save(self) -> None:
        save_registry(self.registry, self.dir / "registry.json")
        save_run(self.run, self.dir / "run.json")

    # ---- one iteration -------------------------------------------------------------------

    def iteration(self, i: int, carry: TrialRecord | None) -> TrialRecord | None:
        carried = carry is not None and self.config.task_state == "continue"
        start = f"trial {carry.id}" if carry is not None and carried else "baseline"
        it = IterationRecord(iteration=i, started_from=start)
        self.run.iterations.append(it)
        record = self._attempt(it, carry)
        self.save()
        if record is None:
            return carry  # a crashed attempt: recorded; the lineage goes on from before
        if self.best is None or better(it, self.best):
            self.best = it
        reason = stop_reason(it, self.config.stop_when)
        if reason is not None:
            self.run.stopped_because = reason
            return record
        if i == self.config.iterations and not self.config.final_build:
            return record
        if not record.session_id:
            it.error = "the attempt recorded no agent session: no reflection or build"
            self.save()
            return record
        self._improve(it, record)
        return record

    def _activation(self, i: int) -> tuple[Path | None, list[ActiveServer], list[ArtifactRef]]:
        active = self.registry.qualified()
        if not active:
            return None, [], []
        dest = self.dir / f"it{i}" / "active"
        dest.parent.mkdir(parents=True, exist_ok=True)
        export_artifacts(self.registry, self.snapshots, dest)
        servers = []
        for a in active:
            if a.kind == "mcp":
                snap = self.snapshots / a.path
                manifest = json.loads((snap / "manifest.json").read_text())
                tools = sorted({str(c["tool"]) for c in manifest["self_test"]})
                servers.append(ActiveServer(a.name, snap, list(manifest["command"]), tools))
        return dest, servers, [_ref(a) for a in active]

    def _attempt(self, it: IterationRecord, carry: TrialRecord | None) -> TrialRecord | None:
        c = self.config
        artifacts, servers, refs = self._activation(it.iteration)
        it.active = refs
        carried = None
        if carry is not None and c.task_state == "continue":
            carried = self.ledger.work_dir(carry.id) / "candidate"
        hook = HarnessHook(servers, carried, self.artifact_spec)  # the trial enters it
        self.say(f"iteration {it.iteration}: attempt ({len(refs)} artifact(s) active)")
        try:
            config = TrialConfig(
                task=c.task,
                agent=c.agent,
                agent_args=dict(c.agent_args),
                limits=c.attempt,
                labels={"harness_run": self.run.id, "harness_iteration": str(it.iteration)},
                measure=c.measure,
                budget_s=c.budget_s,
                agent_sandbox=c.agent_sandbox,
                artifacts=artifacts,
            )
            record = run_trial(config, self.ledger, hooks=[hook])
        except Exception as e:  # recorded (the trial row too); the loop goes on
            it.error = f"the attempt crashed: {type(e).__name__}: {e}"[:2000]
            it.phases.append(PhaseRecord(phase="attempt", status="crashed", detail=it.error))
            self.say(f"iteration {it.iteration}: {it.error}")
            return None
        score_of(it, record)
        it.tool_calls = count_calls(self._telemetry(record))
        it.phases.append(_attempt_phase(record))
        self.say(f"iteration {it.iteration}: trial {record.id} judged {record.verdict}")
        return record

    def _telemetry(self, record: TrialRecord) -> str:
        sha = record.artifacts.get(f"logs/{TELEMETRY_LOG}")
        return self.ledger.store.read_text(sha) if sha else ""

    def _turn(
        self, it: IterationRecord, record: TrialRecord, phase: PhaseName, prompt: str, n: int = 0
    ) -> PhaseRecord:
        c = self.config
        wall = c.reflection_timeout_s if phase == "reflect" else c.build_timeout_s
        limits = evolve(c.attempt, wall_s=wall)
        logs = self.dir / f"it{it.iteration}" / (f"{phase}{n}" if n else phase)
        self.say(f"iteration {it.iteration}: {phase}{f' {n}' if n else ''}")
        p = follow_up(self.runner, self.ledger, record, phase, prompt, limits, logs,
                      contained=c.agent_sandbox, task_hidden=self.task_hidden)  # fmt: skip
        it.phases.append(p)
        self.save()
        return p

    def _improve(self, it: IterationRecord, record: TrialRecord) -> None:
        self._turn(it, record, "reflect", reflect_prompt(judge_summary(record)))
        self._turn(it, record, "build", build_prompt())
        failing = self._vet(it, record)
        for n in range(1, self.config.repair_attempts + 1):
            if not failing:
                break
            reports = [(f"{a.kind} {a.name}", a.report) for a in failing]
            self._turn(it, record, "repair", repair_prompt(reports), n)
            failing = self._vet(it, record)
        self.save()

    def _vet(self, it: IterationRecord, record: TrialRecord) -> list[ArtifactEntry]:
        """Scan the workspace's `.harness/`; what currently fails there."""
        area = Path(record.workspace) / ".harness"
        with tempfile.TemporaryDirectory(prefix="optarena-starter-") as tmp:
            write_starter(self.config.task, Path(tmp))  # the clean replay workspace's files
            added = scan_area(
                self.registry, area, self.snapshots, it.iteration, Path(tmp), self.artifact_spec
            )
        it.built += [_ref(a) for a in added]
        for a in added:
            self.say(f"  {a.status} {a.kind} {a.name} ({a.sha256[:12]}): {a.report[:200]}")
        self.save()
        return [a for a in area_status(self.registry, area) if a.status == "quarantined"]

    # ---- the end -------------------------------------------------------------------------

    def restore_best(self) -> None:
        """The best judged candidate's files into `best/`; none when nothing was accepted."""
        best = self.best
        if best is None or best.verdict != "accepted" or best.trial_id is None:
            return
        src = self.ledger.work_dir(best.trial_id) / "candidate"
        dest = self.dir / "best"
        shutil.copytree(src, dest)
        self.run.best_iteration = best.iteration
        self.run.best_dir = str(dest)


def _ref(a: ArtifactEntry) -> ArtifactRef:
    return ArtifactRef(kind=a.kind, name=a.name, sha256=a.sha256, status=a.status, report=a.report)


def _attempt_phase(record: TrialRecord) -> PhaseRecord:
    status = record.agent_status or "crashed"
    return PhaseRecord(
        phase="attempt",
        status=status,
        detail=record.agent_detail[:2000],
        session_id=record.session_id,
        wall_s=record.agent_wall_s,
        cpu_s=record.agent_cpu_s,
        usage=record.usage,
        metered_usage=record.metered_usage,
        logs={k: v for k, v in record.artifacts.items() if k.startswith("logs/")},
        trial_id=record.id,
    )


def run_harness(
    config: HarnessConfig, ledger: Ledger, progress: HarnessProgress | None = None
) -> tuple[HarnessRun, Path]:
    """Run the loop and record it; returns the run and its directory. Bad input raises
    OptarenaError before anything runs; Ctrl-C leaves the run recorded as interrupted."""
    loop = _Loop(config, ledger, progress)
    carry: TrialRecord | None = None
    try:
        for i in range(1, config.iterations + 1):
            carry = loop.iteration(i, carry)
            if loop.run.stopped_because:
                break
        loop.run.status = "stopped" if loop.run.stopped_because else "complete"
    except BaseException as e:
        loop.run.status = "interrupted"
        loop.run.error = f"{type(e).__name__}: {e}"[:2000]
        raise
    finally:
        loop.restore_best()
        loop.run.finished_at = utc_now()
        loop.save()
    return loop.run, loop.dir
