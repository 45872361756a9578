"""The real Claude Code and Codex with `--task-tools`, against the scripted model server: the
script calls check_correctness and measure over MCP (Codex defers MCP tools behind its
`tool_search` tool, so for Codex the script searches first: the Responses API's client-executed
tool search, then calls in the `mcp__optarena` namespace Codex loaded); the calls reach
optarena's server (outside the agent's sandbox, behind the relay), telemetry in the ledger
matches the script, and the trial's verdict is the judge's own, whatever the agent claims."""

from __future__ import annotations

import json

import pytest

# private: what `trial show` prints of the tool calls, checked on a real trial
from optarena.cli._trials import tool_call_lines
from optarena.fakemodel import FakeModelServer, OptimizeScript, TaskToolsScript
from optarena.ledger import Ledger
from optarena.mcp import TaskToolsHook
from optarena.records import AgentLimits, ToolCallRecord, TrialRecord, calls_of
from optarena.tasks import resolve_task
from optarena.trials import TrialConfig, run_trial

pytestmark = pytest.mark.e2e

TASK = resolve_task("rmsnorm")
BASE = (TASK.baseline_dir / "solution.py").read_text()
WRONG = "import numpy as np\n\n\ndef rmsnorm(x, weight, *, eps):\n    return np.zeros_like(x)\n"


MODELS = {"claude": "claude-sonnet-4-5", "codex": "gpt-5.5"}


def _trial(
    bins: dict[str, str], ledger: Ledger, new: str, agent: str = "claude"
) -> tuple[TrialRecord, TaskToolsScript]:
    script = TaskToolsScript(OptimizeScript("solution.py", BASE, new, marker="def rmsnorm"))
    hook = TaskToolsHook("rmsnorm", max_budget_s=3.0)  # the trial enters it
    with FakeModelServer(script) as fake:
        args = {
            "bin": bins[agent],
            "upstream": fake.url,
            "model": MODELS[agent],
            "max_retries": "0",
        }
        config = TrialConfig(
            task=TASK,
            agent=agent,
            agent_args=args,
            limits=AgentLimits(wall_s=180.0),
            measure=False,
        )
        record = run_trial(config, ledger, hooks=[hook])
    assert hook.host is None  # closed when the trial ended
    # the server as the runner's own option, recorded with its flags
    assert {"claude": "mcp_config", "codex": "mcp_servers"}[agent] in record.agent.flags
    return record, script


def _telemetry(ledger: Ledger, record: TrialRecord) -> list[ToolCallRecord]:
    sha = record.artifacts["logs/tool_calls.jsonl"]
    text = ledger.store.read_text(sha)
    return calls_of(ToolCallRecord.model_validate_json(x) for x in text.splitlines() if x.strip())


def test_claude_calls_the_task_tools_the_calls_are_recorded_and_the_judge_decides(
    agent_bins: dict[str, str], ledger: Ledger
) -> None:
    """One trial: the agent writes a wrong file, asks the tools (which say rejected), and
    claims success anyway; the telemetry matches the script and the verdict is the judge's."""
    record, script = _trial(agent_bins, ledger, WRONG)
    assert script.called == ["mcp__optarena__check_correctness", "mcp__optarena__measure"]
    calls = _telemetry(ledger, record)
    assert [c.tool for c in calls] == ["check_correctness", "measure"]
    assert all(c.status == "ok" for c in calls)
    assert [c.verdict for c in calls] == ["rejected", "rejected"]
    assert record.verdict == "rejected" and "out_of_tolerance" in record.reason_codes
    outcome = json.loads(ledger.store.read_text(record.artifacts["outcome"]))
    assert outcome["status"] == "completed"  # the agent claimed success; the judge decided


def test_codex_finds_and_calls_the_task_tools_the_calls_are_recorded_and_the_judge_decides(
    agent_bins: dict[str, str], ledger: Ledger
) -> None:
    """One trial: the agent writes a wrong file, finds the tools with tool_search, asks them
    (they say rejected) and claims success anyway; telemetry matches the script and the
    verdict is the judge's."""
    record, script = _trial(agent_bins, ledger, WRONG, agent="codex")
    assert script.searches == 1
    assert script.called == ["mcp__optarena__check_correctness", "mcp__optarena__measure"]
    calls = _telemetry(ledger, record)
    assert [c.tool for c in calls] == ["check_correctness", "measure"]
    assert all(c.status == "ok" for c in calls)
    assert [c.verdict for c in calls] == ["rejected", "rejected"]
    assert record.verdict == "rejected" and "out_of_tolerance" in record.reason_codes
    outcome = json.loads(ledger.store.read_text(record.artifacts["outcome"]))
    assert outcome["status"] == "completed"  # the agent claimed success; the judge decided
    # Codex's own account: both calls ran (approved, not refused under approval `never`).
    codex_calls = outcome["extra"]["codex"]["mcp_calls"]
    assert [(c["tool"], c["status"]) for c in codex_calls] == [
        ("check_correctness", "completed"),
        ("measure", "completed"),
    ]
    shown = "\n".join(tool_call_lines(ledger, record))  # what `trial show` prints
    assert "task-tool calls: 2" in shown and "check_correctness" in shown
    assert shown.count("-> rejected") == 2
