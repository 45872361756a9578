"""Trial hooks (how a metering proxy plugs in; entered and left by the trial, their MCP servers
offered through the runner) and re-judging a recorded trial."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import replace
from pathlib import Path

import pytest

from optarena.agents import McpServer, RunContext
from optarena.agents.command import CommandRunner
from optarena.errors import OptarenaError
from optarena.judge import JudgeOptions, JudgeResult
from optarena.ledger import Ledger
from optarena.records import AgentLimits, AgentOutcome, TrialRecord, Usage
from optarena.tasks import Task, load_task
from optarena.trials import TrialConfig, TrialHook, rejudge, run_trial


class FakeMeter(TrialHook):
    """Stands in for a metering proxy: an address for the agent, usage folded in after."""

    def __init__(self) -> None:
        self.seen: RunContext | None = None

    def before_agent(self, context: RunContext) -> RunContext:
        self.seen = replace(
            context, env={**context.env, "OPENAI_BASE_URL": "http://127.0.0.1:9/v1"}
        )
        return self.seen

    def after_agent(self, context: RunContext, outcome: AgentOutcome) -> AgentOutcome:
        metered = Usage(source="metered", calls=3, input_tokens=1200)
        return outcome.model_copy(update={"metered_usage": metered})


def test_a_hook_reaches_the_agent_and_reports_metered_usage(
    ledger: Ledger, rmsnorm: Task, agent: Callable[[str], str]
) -> None:
    meter = FakeMeter()
    command = agent('echo "$OPENAI_BASE_URL"')
    config = TrialConfig(
        task=rmsnorm, agent="command", agent_args={"command": command}, measure=False
    )
    rec = run_trial(config, ledger, hooks=[meter])
    assert meter.seen is not None and meter.seen.trial_id == rec.id
    assert meter.seen.paths.work == ledger.work_dir(rec.id)  # the trial's paths, documented
    stdout = ledger.store.read_text(rec.artifacts["logs/stdout.log"])
    assert stdout == "http://127.0.0.1:9/v1\n"
    assert rec.metered_usage is not None and rec.metered_usage.calls == 3
    assert rec.usage.source == "unknown" and rec.usage.calls is None  # reported: unknown
    assert ledger.get(rec.id).metered_usage == rec.metered_usage


class _TakesTools(CommandRunner):
    """A runner that takes MCP servers: their names become its command's arguments."""

    takes_mcp = True

    @classmethod
    def mcp_args(cls, servers: Sequence[McpServer], given: Mapping[str, str]) -> dict[str, str]:
        return {**given, "command": " ".join([given["command"], *(s.name for s in servers)])}


class _Servers(TrialHook):
    def __init__(self) -> None:
        self.events: list[str] = []

    def __enter__(self) -> _Servers:
        self.events.append("enter")
        return self

    def __exit__(self, *exc: object) -> None:
        self.events.append("exit")

    def mcp_servers(self) -> list[McpServer]:
        self.events.append("servers")
        return [McpServer("tools", ("relay",), ("probe",), 5.0)]


def test_the_trial_enters_its_hooks_and_offers_their_servers_through_the_runner(
    ledger: Ledger, rmsnorm: Task, agent: Callable[[str], str]
) -> None:
    hook = _Servers()
    args = {"command": agent('echo "$1"')}
    config = TrialConfig(task=rmsnorm, agent=f"{__name__}:_TakesTools", agent_args=args)
    rec = run_trial(replace(config, measure=False), ledger, hooks=[hook])
    assert hook.events == ["enter", "servers", "exit"]
    assert ledger.store.read_text(rec.artifacts["logs/stdout.log"]) == "tools\n"
    assert rec.agent.flags["command"].endswith(" tools")  # recorded with the runner's flags
    refused = _Servers()
    with pytest.raises(OptarenaError, match="agent 'command' takes no MCP servers"):
        run_trial(replace(config, agent="command"), ledger, hooks=[refused])
    assert refused.events == ["enter", "servers", "exit"]  # left, before anything was recorded
    assert [r.id for r in ledger.trials()] == [rec.id]


def _recorded(ledger: Ledger, task: Task, source: Path) -> TrialRecord:
    config = TrialConfig(
        task=task,
        agent="replay",
        agent_args={"source": str(source)},
        limits=AgentLimits(wall_s=30),
        measure=False,
    )
    return run_trial(config, ledger)


def test_rejudge_adds_a_judgement_and_keeps_the_first(
    ledger: Ledger, rmsnorm: Task, control: Callable[[str], Path]
) -> None:
    rec = _recorded(ledger, rmsnorm, control("optimized"))
    trial, judgement, notes = rejudge(ledger, rec.id[:6], changes={"measure": False})
    assert trial == rec and notes == []
    assert judgement.kind == "rejudge" and judgement.verdict == "accepted"
    assert judgement.candidate_sha256 == rec.candidate_sha256
    first, second = ledger.judgements(rec.id)
    assert (first.kind, second.kind) == ("trial", "rejudge")
    assert first.seed != second.seed  # a fresh secret seed: new inputs
    assert ledger.get(rec.id) == rec  # the trial row itself never changes


def test_rejudge_keeps_an_out_of_scope_trial_rejected(
    ledger: Ledger, rmsnorm: Task, control: Callable[[str], Path], tmp_path: Path
) -> None:
    src = tmp_path / "cand"
    src.mkdir()
    (src / "solution.py").write_bytes((control("optimized") / "solution.py").read_bytes())
    (src / "TASK.md").write_text("the rules changed\n")  # a tracked file outside the scope
    rec = _recorded(ledger, rmsnorm, src)
    assert rec.out_of_scope == ["TASK.md"]
    _, judgement, _ = rejudge(ledger, rec.id, changes={"measure": True})
    assert judgement.verdict == "rejected" and judgement.reason_codes == ["out_of_scope"]
    assert judgement.metrics is None


def test_rejudge_notes_a_changed_task_and_refuses_unfinished_trials(
    ledger: Ledger, task_copy: Callable[..., Task], control: Callable[[str], Path]
) -> None:
    task = task_copy("rmsnorm")
    rec = _recorded(ledger, task, control("optimized"))
    with (task.root / "TASK.md").open("a") as f:
        f.write("\nOne more rule.\n")
    _, judgement, notes = rejudge(ledger, rec.id, changes={"measure": False})
    assert "changed since the trial" in notes[0]
    assert judgement.task_sha256 != rec.task.sha256

    def interrupt(task: Task, cand: Path, options: JudgeOptions) -> JudgeResult:
        raise KeyboardInterrupt

    # loaded again: the old Task still carries the hash from before the edit, which the
    # check before judging would (rightly) refuse as judge_tampered
    task = load_task(task.root)
    config = TrialConfig(task=task, agent="command", agent_args={"command": "true"})
    with pytest.raises(KeyboardInterrupt):
        run_trial(config, ledger, judge_fn=interrupt)
    broken = ledger.trials(status="interrupted")[0]
    _, again, _ = rejudge(ledger, broken.id, changes={"measure": False})  # its delivery was kept
    assert again.verdict == "accepted" and again.kind == "rejudge"
    running = broken.model_copy(update={"id": "0123456789", "state": "running"})
    ledger.begin_trial(running)
    with pytest.raises(OptarenaError, match="still running: no delivered candidate"):
        rejudge(ledger, running.id)
