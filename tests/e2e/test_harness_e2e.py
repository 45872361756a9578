"""The harness loop with the real agent CLIs against the scripted model server.

Claude Code, two iterations, task state reset, one repair: the first attempt writes a wrong
file and a result.json claiming success (the judge rejects it); reflection and build resume
the attempt's session and build two MCP servers, `bench` (its self-test calls a tool with bad
arguments) and `idle` (its self-test calls no tool); the repair, given the exact reports, fixes
`bench`; `idle` stays quarantined and is never offered. The second attempt starts from the
baseline files, is offered only `bench`'s tool, calls it (the relay's telemetry in the ledger
shows the call), writes the optimized file and is accepted; it is restored as the best.

Codex, two iterations, task state continue: the build (in the resumed session) writes a skill
and an MCP server, which pass vetting; the second, fresh session starts from the first delivery,
sees the skill, finds the server's tool through Codex's tool search and calls it (approved by
name: `codex exec` refuses an MCP call that needs approval), and the relay records the call.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

from harness_example import BENCH_SERVER
from optarena.fakemodel import CLAIM_FILE, FakeModelServer, HarnessPlan, HarnessScript
from optarena.harness import HarnessConfig, read_telemetry, run_harness
from optarena.ledger import Ledger
from optarena.records import AgentLimits, ToolCallRecord
from optarena.tasks import resolve_task

pytestmark = [pytest.mark.e2e, pytest.mark.slow]

TASK = resolve_task("rmsnorm")
BASE = (TASK.baseline_dir / "solution.py").read_text()
FAST = (TASK.root / "controls" / "optimized" / "solution.py").read_text()
WRONG = "import numpy as np\n\n\ndef rmsnorm(x, weight, *, eps):\n    return np.zeros_like(x)\n"


def _manifest(self_test: list[dict[str, object]]) -> str:
    return json.dumps({"command": [sys.executable, "server.py"], "self_test": self_test}) + "\n"


def _config(agent: str, bin_: str, url: str, **kw: object) -> HarnessConfig:
    model = {"claude": "claude-sonnet-4-5", "codex": "gpt-5.5"}[agent]
    args = {"bin": bin_, "upstream": url, "max_retries": "0", "model": model}
    return HarnessConfig(
        task=TASK,
        agent=agent,
        agent_args=args,
        attempt=AgentLimits(wall_s=180.0),
        reflection_timeout_s=120.0,
        build_timeout_s=120.0,
        measure=False,
        final_build=False,  # what the last iteration would build no attempt of the run uses
        **kw,  # type: ignore[arg-type]
    )


def _relayed(ledger: Ledger, trial_id: str | None) -> list[ToolCallRecord]:
    """The built servers' calls as the relay logged them, from the trial's ledger artifact."""
    trial = ledger.get(trial_id or "")
    return read_telemetry(ledger.store.read_text(trial.artifacts["logs/harness_tool_calls.jsonl"]))


def test_claude_builds_repairs_quarantines_activates_and_calls_a_tool(
    agent_bins: dict[str, str], ledger: Ledger
) -> None:
    plan = HarnessPlan(
        target="solution.py", baseline=BASE, first=WRONG, later=FAST, later_starts_from=BASE,
        marker="def rmsnorm", claim=True,
        build={
            ".harness/mcp/bench/server.py": BENCH_SERVER,
            ".harness/mcp/bench/manifest.json": _manifest(
                [{"tool": "probe", "arguments": {"n": "many"}}]
            ),
            ".harness/mcp/idle/server.py": BENCH_SERVER,
            ".harness/mcp/idle/manifest.json": _manifest([]),
        },
        repair={
            ".harness/mcp/bench/manifest.json": _manifest(
                [{"tool": "probe", "arguments": {"n": 3}}]
            )
        },
        tool_args={"probe": {"n": 7}},
    )  # fmt: skip
    script = HarnessScript(plan)
    with FakeModelServer(script) as fake:
        config = _config("claude", agent_bins["claude"], fake.url, iterations=2, task_state="reset")
        run, where = run_harness(config, ledger)

    assert run.status == "complete" and len(run.iterations) == 2
    one, two = run.iterations
    # the judge's verdict, not the agent's result file
    assert one.verdict == "rejected" and "out_of_tolerance" in one.reason_codes
    assert CLAIM_FILE in one.claimed_files
    assert [p.phase for p in one.phases] == ["attempt", "reflect", "build", "repair"]
    assert all(p.session_id == one.phases[0].session_id for p in one.phases)  # one session
    assert all(p.status == "completed" for p in one.phases)
    built = {(a.name, a.status) for a in one.built}
    assert built == {("bench", "quarantined"), ("idle", "quarantined"), ("bench", "qualified")}
    idle = next(a for a in one.built if a.name == "idle")
    assert "none given" in idle.report
    # reset: the second attempt read the baseline, not the first attempt's zeros
    assert script.read[-1].count("np.zeros_like") == 0 and "def rmsnorm" in script.read[-1]
    # only the qualified server is active and offered; its call is in the ledger's logs
    assert [(a.kind, a.name) for a in two.active] == [("mcp", "bench")]
    assert script.called == ["mcp__bench__probe"]
    calls = _relayed(ledger, two.trial_id)
    assert [(c.server, c.tool, c.status, c.arguments) for c in calls] == [
        ("bench", "probe", "ok", {"n": 7})
    ]
    assert "checked 7 rows" in calls[0].result
    assert two.verdict == "accepted" and [c.calls for c in two.tool_calls] == [1]
    # the best judged candidate is restored; every phase's cost is charged to the run
    assert run.best_iteration == 2
    assert (Path(run.best_dir or "") / "solution.py").read_text() == FAST
    assert [p.phase for p in two.phases] == ["attempt"]  # final_build=False
    totals = {t.phase: t for t in run.totals()}
    assert totals["repair"].count == 1 and totals["attempt"].count == 2
    assert all(t.tokens and t.tokens > 0 for t in totals.values())
    assert (where / "registry.json").is_file() and (where / "run.json").is_file()


def test_codex_resumes_its_session_and_gets_the_skill_and_tool_it_built(
    agent_bins: dict[str, str], ledger: Ledger
) -> None:
    skill = "---\nname: rmsnorm-one-pass\ndescription: normalize rows in one pass\n---\nUse it.\n"
    plan = HarnessPlan(
        target="solution.py", baseline=BASE, first=FAST, later=None, later_starts_from=FAST,
        marker="def rmsnorm",
        build={
            ".harness/skills/rmsnorm-one-pass/SKILL.md": skill,
            ".harness/mcp/bench/server.py": BENCH_SERVER,
            ".harness/mcp/bench/manifest.json": _manifest(
                [{"tool": "probe", "arguments": {"n": 3}}]
            ),
        },
        skills=("rmsnorm-one-pass",), tool_args={"probe": {"n": 5}},
    )  # fmt: skip
    script = HarnessScript(plan)
    with FakeModelServer(script) as fake:
        config = _config("codex", agent_bins["codex"], fake.url, iterations=2)
        run, _ = run_harness(config, ledger)
    one, two = run.iterations
    assert [p.phase for p in one.phases] == ["attempt", "reflect", "build"]
    assert all(p.status == "completed" for p in one.phases), [p.detail for p in one.phases]
    assert one.phases[1].session_id == one.phases[0].session_id  # codex exec resume
    assert sorted((a.kind, a.name, a.status) for a in one.built) == [
        ("mcp", "bench", "qualified"),
        ("skill", "rmsnorm-one-pass", "qualified"),
    ]
    assert sorted((a.kind, a.name) for a in two.active) == [
        ("mcp", "bench"),
        ("skill", "rmsnorm-one-pass"),
    ]
    assert script.saw_active[-1]  # the fresh session's request named the skill
    # Codex defers MCP tools: the fresh session searched, then called the built tool, approved
    # by name; the relay's telemetry in the ledger shows that call
    assert script.called == ["mcp__bench__probe"]
    calls = _relayed(ledger, two.trial_id)
    assert [(c.server, c.tool, c.status, c.arguments) for c in calls] == [
        ("bench", "probe", "ok", {"n": 5})
    ]
    assert "checked 5 rows" in calls[0].result
    # continue: the second attempt wrote nothing and still delivered the first's file
    assert two.started_from == f"trial {one.trial_id}"
    assert two.verdict == "accepted" and two.candidate_sha256 == one.candidate_sha256
