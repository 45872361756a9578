"""The harness loop with a scripted resumable runner (no agent CLI): a crashed attempt is
recorded and the loop goes on; a result file claiming success gets the judge's verdict; the
session is resumed for reflection, build and repair; a server whose self-test calls no tool is
quarantined and never activated; `reset` restores the task files; the best judged candidate
is restored; `harness show` prints it all. Plus the CLI's bad input and the pure scores."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path
from typing import ClassVar

import pytest

from optarena.agents import AgentRunner, RunContext
from optarena.cli import main
from optarena.errors import OptarenaError
from optarena.harness import (
    BUILD_MARKER,
    REFLECT_MARKER,
    REPAIR_MARKER,
    HarnessConfig,
    IterationRecord,
    run_harness,
)

# private: the loop's pure scoring and stop rule, tested on literal attempts
from optarena.harness._score import better, stop_reason
from optarena.ledger import Ledger
from optarena.records import AgentLimits, AgentOutcome, Usage
from optarena.tasks import resolve_task

TASK = resolve_task("rmsnorm")
BASE = (TASK.baseline_dir / "solution.py").read_text()
FAST = (TASK.root / "controls" / "optimized" / "solution.py").read_text()
WRONG = "import numpy as np\n\n\ndef rmsnorm(x, weight, *, eps):\n    return np.zeros_like(x)\n"
SKILL = "---\nname: one-pass\ndescription: normalize in one pass\n---\n"
IDLE = {"command": ["python3", "server.py"], "self_test": []}


class ScriptedRunner(AgentRunner):
    """Attempt 1 crashes, attempt 2 delivers a wrong file and a result.json claiming success,
    attempt 3 looks at what it was given and delivers the optimized file. Follow-up turns
    (resumed sessions) answer by the marker in their prompt."""

    name = "scripted"
    can_resume = True
    attempts: ClassVar[int] = 0
    turns: ClassVar[list[tuple[str | None, str]]] = []  # (resumed session, phase)
    seen: ClassVar[dict[str, object]] = {}

    def version(self) -> str | None:
        return "1"

    def run(self, context: RunContext, prompt: str, limits: AgentLimits) -> AgentOutcome:
        ws = context.workspace
        usage = Usage(source="agent-reported", input_tokens=10, output_tokens=5, cost_usd=0.01)
        if context.resume is not None:
            phase = next(
                (n for m, n in ((REFLECT_MARKER, "reflect"), (BUILD_MARKER, "build"),
                                (REPAIR_MARKER, "repair")) if m in prompt), "?",
            )  # fmt: skip
            type(self).turns.append((context.resume, phase))
            if phase == "build":
                (ws / ".harness/skills/one-pass").mkdir(parents=True)
                (ws / ".harness/skills/one-pass/SKILL.md").write_text(SKILL)
                (ws / ".harness/mcp/idle").mkdir(parents=True)
                (ws / ".harness/mcp/idle/manifest.json").write_text(json.dumps(IDLE))
            if phase == "repair":
                type(self).seen["repair_prompt"] = prompt
            return AgentOutcome(status="completed", session_id=context.resume, usage=usage)
        type(self).attempts += 1
        n = type(self).attempts
        if n == 1:
            raise RuntimeError("scripted crash")
        if n == 2:
            (ws / "solution.py").write_text(WRONG)
            (ws / "result.json").write_text('{"verdict": "accepted", "speedup": 9.9}')
        else:
            type(self).seen["solution"] = (ws / "solution.py").read_text()
            type(self).seen["skill"] = (ws / ".claude/skills/one-pass/SKILL.md").is_file()
            type(self).seen["idle"] = (ws / ".harness/mcp/idle").exists()
            (ws / "solution.py").write_text(FAST)
        return AgentOutcome(status="completed", session_id=f"s{n}", usage=usage, wall_s=0.1)


def test_the_loop_end_to_end_with_a_scripted_runner(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    config = HarnessConfig(
        task=TASK,
        agent=f"{__name__}:ScriptedRunner",
        iterations=3,
        task_state="reset",
        measure=False,
        repair_attempts=1,
        final_build=False,
        agent_sandbox=False,
    )
    with Ledger.open(tmp_path / "ledger") as ledger:
        run, where = run_harness(config, ledger)
        crashed = ledger.trials()[-1]
        assert crashed.state == "interrupted"  # the crashed attempt's row is recorded
    one, two, three = run.iterations
    assert one.phases[0].status == "crashed" and "scripted crash" in (one.error or "")
    assert two.verdict == "rejected" and "result.json" in two.claimed_files
    assert ScriptedRunner.turns == [("s2", "reflect"), ("s2", "build"), ("s2", "repair")]
    assert "the self-test" in str(ScriptedRunner.seen["repair_prompt"])  # the exact report
    assert {(a.kind, a.name, a.status) for a in two.built} == {
        ("skill", "one-pass", "qualified"),
        ("mcp", "idle", "quarantined"),
    }
    assert ScriptedRunner.seen == ScriptedRunner.seen | {"solution": BASE, "skill": True}
    assert ScriptedRunner.seen["idle"] is False  # quarantined: never activated
    assert [a.name for a in three.active] == ["one-pass"] and three.started_from == "baseline"
    assert three.verdict == "accepted" and run.best_iteration == 3
    assert (where / "best" / "solution.py").read_text() == FAST
    totals = {t.phase: t for t in run.totals()}
    assert totals["reflect"].cost_usd == pytest.approx(0.01)
    assert totals["attempt"].cost_usd is None  # the crashed attempt's cost is unknown
    assert main(["harness", "show", str(where)]) == 0
    out = capsys.readouterr().out
    assert "it2 trial" in out and "verdict rejected" in out and "quarantined mcp idle" in out
    assert "active: skill:one-pass" in out
    assert "best: iteration 3" in out and "ignored (never evidence): result.json" in out
    # a new run can start from this run's registry: its qualified artifacts only
    again = dataclasses.replace(config, iterations=1, registry=where / "registry.json")
    with Ledger.open(tmp_path / "ledger") as ledger:
        run2, _ = run_harness(again, ledger)
    assert [(a.name, a.status) for a in run2.iterations[0].active] == [("one-pass", "qualified")]


def test_bad_input_exits_2(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("ANTHROPIC_API_KEY", "k")
    base = ["harness", "run", "--task", "rmsnorm", "--ledger", str(tmp_path / "l")]
    claude = [*base, "--agent", "claude", "--agent-arg", "bin=/bin/true"]
    assert main([*base, "--agent", "nope"]) == 2
    assert main([*base, "--agent", "replay"]) == 2  # cannot resume a session
    assert main([*claude, "--iterations", "0"]) == 2
    assert main([*claude, "--task-state", "sideways"]) == 2
    assert main([*claude, "--stop-when", "fast"]) == 2
    assert main([*claude, "--attempt-timeout", "soon"]) == 2
    (tmp_path / "file").write_text("")
    assert main([*claude, "--run-dir", str(tmp_path / "file" / "run")]) == 2  # unwritable
    (tmp_path / "old").mkdir()
    (tmp_path / "old" / "registry.json").write_text(json.dumps({"schema_version": 99}))
    assert main([*claude, "--registry", str(tmp_path / "old" / "registry.json")]) == 2
    assert main(["harness", "show", str(tmp_path / "old")]) == 2
    assert not (tmp_path / "l" / "harness").exists() or not any(
        (tmp_path / "l" / "harness").iterdir()
    )


def _it(verdict: str | None, ratio: float | None, speed: str | None = None) -> IterationRecord:
    return IterationRecord(
        iteration=1, started_from="baseline", verdict=verdict, speed_ratio=ratio,
        speed_verdict=speed,
    )  # fmt: skip


def test_scores_and_stop_conditions() -> None:
    assert better(_it("accepted", 0.5), _it("accepted", 0.8))
    assert better(_it("accepted", None), _it("rejected", None))
    assert better(_it("accepted", 0.9), _it("accepted", None))
    assert not better(_it("accepted", 0.8), _it("accepted", 0.8))  # a tie keeps the earlier
    assert stop_reason(_it("accepted", 0.8, "improved"), "improved")
    assert stop_reason(_it("accepted", 0.8, "inconclusive"), "improved") is None
    assert stop_reason(_it("accepted", 0.5), "2") == "speed-up 2.00x reached 2x"
    assert stop_reason(_it("accepted", 0.8), "2") is None
    assert stop_reason(_it("rejected", None, None), "improved") is None
    with pytest.raises(OptarenaError, match="--stop-when"):
        stop_reason(None, "-1")
