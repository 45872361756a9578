"""A follow-up turn is contained exactly as the trial it resumes: the same spec, from the one
builder (`trials.agent_sandbox_spec`), with the trial's process limit and the task's hidden paths
(a turn built its own spec and ran with the default limit and the package visible)."""

from __future__ import annotations

from pathlib import Path

from optarena.agents import RunContext, SandboxSpec
from optarena.agents.command import CommandRunner

# private: the session's follow-up turn, tested on literal outcomes
from optarena.harness._session import follow_up
from optarena.ledger import Ledger
from optarena.records import AgentLimits, AgentOutcome
from optarena.tasks import resolve_task
from optarena.trials import TrialConfig, run_trial


class Recording(CommandRunner):
    """The command runner, noting how each run was to be contained."""

    specs: list[SandboxSpec | None]

    def run(self, context: RunContext, *args: object, **kw: object) -> AgentOutcome:
        self.specs.append(context.sandbox)
        return super().run(context, *args, **kw)  # type: ignore[arg-type]


def test_a_follow_up_turn_is_contained_like_its_trial(tmp_path: Path) -> None:
    task = resolve_task("rmsnorm")
    limits = AgentLimits(wall_s=30, max_processes=48)
    runner = Recording(command="true")
    runner.specs = []
    with Ledger.open(tmp_path / "L") as ledger:
        other = run_trial(
            TrialConfig(task=task, agent="command", limits=limits, measure=False),
            ledger,
            runner=runner,
        )
        record = run_trial(
            TrialConfig(task=task, agent="command", limits=limits, measure=False),
            ledger,
            runner=runner,
        )
        follow_up(runner, ledger, record, "reflect", "why?", limits, tmp_path / "logs",
                  task_hidden=(task.root,))  # fmt: skip
    trial_spec, turn_spec = runner.specs[1], runner.specs[2]
    assert turn_spec == trial_spec
    assert turn_spec is not None and turn_spec.policy.max_processes == 48
    assert task.root in turn_spec.hidden and Path(other.workspace) in turn_spec.hidden
    assert Path(record.workspace) not in turn_spec.hidden
