"""Follow-up turns in an attempt's agent session: reflection, build and repair.

The turn resumes the session the attempt's trial recorded (`RunContext.resume`), in the same
workspace with the same config home (where the CLI keeps its sessions), contained like the
trial's agent (`trials.agent_sandbox_spec`: the same limits and hidden paths) and metered by its own
proxy. Its logs are stored in the ledger's artifact store; its time, tokens and cost are the
phase's record, charged to the harness run.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from optarena.agents import AgentRunner, RunContext, run_metered
from optarena.harness._record import PhaseName, PhaseRecord
from optarena.ledger import Ledger
from optarena.records import AgentLimits, TrialPaths, TrialRecord
from optarena.trials import agent_sandbox_spec


def follow_up(
    runner: AgentRunner,
    ledger: Ledger,
    trial: TrialRecord,
    phase: PhaseName,
    prompt: str,
    limits: AgentLimits,
    logs: Path,
    contained: bool = True,
    task_hidden: Sequence[Path] = (),
) -> PhaseRecord:
    """One turn resuming `trial`'s session, contained as the trial's agent was (`limits`, the
    task's `task_hidden` paths); never raises for the agent's own failures."""
    work = ledger.work_dir(trial.id)
    paths = TrialPaths(
        work=work,
        workspace=Path(trial.workspace),
        logs=logs,
        home=work / "home",
        candidate=work / "candidate",
        shadow=work / "shadow.git",
    )
    context = RunContext(
        trial.id,
        trial.task.id,
        paths,
        sandbox=agent_sandbox_spec(
            ledger,
            workspace=paths.workspace,
            home=paths.home,
            limits=limits,
            task_hidden=task_hidden,
            enabled=contained,
        ),
        resume=trial.session_id,
    )
    logs.mkdir(parents=True, exist_ok=True)
    outcome = run_metered(runner, context, prompt, limits)
    stored, left_out = ledger.store.put_untrusted_tree(logs)  # never through the agent's links
    notes = [f"log not kept: {w}" for w in left_out[:20]]
    detail = "; ".join(filter(None, [outcome.detail, *notes]))
    return PhaseRecord(
        phase=phase,
        status=outcome.status,
        detail=detail[:2000],
        session_id=outcome.session_id,
        wall_s=outcome.wall_s,
        cpu_s=outcome.cpu_s,
        usage=outcome.usage,
        metered_usage=outcome.metered_usage,
        logs=stored,
        trial_id=trial.id,
    )
