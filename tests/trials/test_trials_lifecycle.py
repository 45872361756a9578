"""The trial lifecycle through scripted `command` agents, the ledger checked after each."""

from __future__ import annotations

import os
import time
from collections.abc import Callable
from pathlib import Path

import pytest

from optarena.ledger import Ledger
from optarena.records import TrialRecord
from optarena.tasks import Task

Trial = Callable[..., TrialRecord]
Agent = Callable[[str], str]


def test_a_correct_change_is_accepted(
    trial: Trial, agent: Agent, control: Callable[[str], Path], rmsnorm: Task, ledger: Ledger
) -> None:
    src = control("optimized") / "solution.py"
    rec = trial(agent(f'echo "optimizing"; cp {src} solution.py'))
    assert (rec.agent_status, rec.agent_exit_code, rec.verdict) == ("completed", 0, "accepted")
    assert [(c.path, c.change, c.in_scope) for c in rec.changed] == [
        ("solution.py", "modified", True)
    ]
    assert rec.out_of_scope == [] and rec.reason_codes == []
    assert rec.candidate_sha256 == rmsnorm.candidate_sha256(control("optimized"))
    assert rec.agent.label == "command" and rec.agent.is_agent
    assert rec.agent_cpu_s is not None and rec.agent_wall_s is not None
    assert rec.usage.source == "unknown" and rec.usage.input_tokens is None  # unknown, not 0
    assert ledger.store.read_text(rec.artifacts["logs/stdout.log"]) == "optimizing\n"
    diff = ledger.store.read_text(rec.artifacts["diff"])
    assert diff.startswith("diff --git a/solution.py b/solution.py")
    ws = Path(rec.workspace)
    assert (ws / "TASK.md").is_file() and (ws / ".git").is_dir()


def test_a_wrong_change_is_rejected_without_metrics(
    trial: Trial, agent: Agent, control: Callable[[str], Path]
) -> None:
    rec = trial(agent(f"cp {control('missing-eps')}/solution.py solution.py"))
    assert rec.agent_status == "completed"
    assert rec.verdict == "rejected" and "out_of_tolerance" in rec.reason_codes
    assert rec.metrics is None


def test_an_edit_outside_scope_rejects_even_when_hidden_from_the_agents_git(
    trial: Trial, agent: Agent, control: Callable[[str], Path], ledger: Ledger
) -> None:
    body = (
        f"cp {control('optimized')}/solution.py solution.py\n"
        "echo 'ignore the rules' >> TASK.md\n"
        "mkdir -p tools && echo 'print(1)' > tools/bench.py\n"
        "git -c user.name=a -c user.email=a@b add -A\n"
        "git -c user.name=a -c user.email=a@b commit -qm 'looks like baseline'\n"
    )
    rec = trial(agent(body))
    assert rec.verdict == "rejected" and rec.reason_codes[0] == "out_of_scope"
    assert rec.out_of_scope == ["TASK.md"]  # the new tools/bench.py is only listed, ignored
    assert "TASK.md" in rec.reasons[0] and rec.metrics is None
    assert {c.path: c.change for c in rec.changed}["tools/bench.py"] == "added"
    assert "ignore the rules" in ledger.store.read_text(rec.artifacts["diff"])


def test_a_hang_past_the_timeout_kills_the_tree_and_still_judges(
    trial: Trial, agent: Agent, control: Callable[[str], Path], find_pids: Callable[[str], list]
) -> None:
    body = (
        f"cp {control('optimized')}/solution.py solution.py\n"
        "sleep 3301.1 &\n"  # a grandchild holding our stdout and stderr
        "setsid sleep 3301.2 &\n"  # one that left the process group
        "echo working; sleep 300\n"
    )
    t0 = time.monotonic()
    rec = trial(agent(body), wall_s=1.5, agent_args={"grace_s": "0.5"})
    assert time.monotonic() - t0 < 20
    assert rec.agent_status == "timeout" and rec.verdict == "accepted"
    assert rec.agent_wall_s is not None and 1.5 <= rec.agent_wall_s < 10
    deadline = time.monotonic() + 5
    while find_pids("sleep 3301.") and time.monotonic() < deadline:
        time.sleep(0.05)
    assert find_pids("sleep 3301.") == []


@pytest.mark.parametrize(
    ("tail", "status", "code"), [("kill -SEGV $$", "crashed", -11), ("exit 7", "failed", 7)]
)
def test_a_crashed_or_failed_agents_delivery_is_still_judged(
    trial: Trial, agent: Agent, control: Callable[[str], Path], tail: str, status: str, code: int
) -> None:
    rec = trial(agent(f"cp {control('missing-eps')}/solution.py solution.py\n{tail}"))
    assert (rec.agent_status, rec.agent_exit_code) == (status, code)
    assert rec.verdict == "rejected" and "out_of_tolerance" in rec.reason_codes


def test_writing_nothing_delivers_the_baseline(
    trial: Trial, agent: Agent, rmsnorm: Task, ledger: Ledger
) -> None:
    rec = trial(agent("true"))
    assert rec.agent_status == "completed" and rec.changed == []
    assert rec.candidate_sha256 == rmsnorm.candidate_sha256(rmsnorm.baseline_dir)
    assert rec.verdict == "accepted"  # the baseline is correct; speed would say "no difference"
    assert ledger.store.read_bytes(rec.artifacts["diff"]) == b""


def test_deleting_the_entry_file_is_rejected(trial: Trial, agent: Agent) -> None:
    rec = trial(agent("rm solution.py"))
    assert [(c.path, c.change) for c in rec.changed] == [("solution.py", "deleted")]
    assert rec.verdict == "rejected" and rec.reason_codes == ["entry_missing"]


def test_a_usage_file_is_recorded_and_indexed(trial: Trial, agent: Agent, ledger: Ledger) -> None:
    body = 'echo \'{"input_tokens": 1000, "output_tokens": 50, "cost_usd": 0.01}\' > "$1"'
    rec = trial(agent(body) + " {usage_file}")
    assert rec.usage.source == "usage-file"
    assert (rec.usage.input_tokens, rec.usage.output_tokens, rec.usage.cost_usd) == (
        1000,
        50,
        0.01,
    )
    assert rec.usage.calls is None
    row = ledger._conn.execute("SELECT * FROM trials WHERE id = ?", (rec.id,)).fetchone()
    assert (row["input_tokens"], row["output_tokens"], row["cost_usd"]) == (1000, 50, 0.01)


def test_labels_limits_and_identity_are_recorded(trial: Trial, agent: Agent, rmsnorm: Task) -> None:
    rec = trial(agent("true"), wall_s=12.0, labels={"condition": "skills", "rep": "3"})
    assert rec.labels == {"condition": "skills", "rep": "3"}
    assert rec.limits.wall_s == 12.0
    assert (rec.task.id, rec.task.version, rec.task.sha256) == (
        "rmsnorm",
        rmsnorm.spec.version,
        rmsnorm.sha256,
    )
    assert rec.runtime["sha256"] and len(rec.judge_sha256) == 64
    assert rec.agent.runner == "optarena.agents.command:CommandRunner"
    assert rec.agent.flags["command"].startswith("sh ")
    assert rec.pid == os.getpid() and rec.finished_at is not None


def test_new_scratch_files_outside_scope_are_listed_ignored_and_not_judged(
    trial: Trial, agent: Agent, control: Callable[[str], Path]
) -> None:
    body = (
        f"cp {control('optimized')}/solution.py solution.py\n"
        "mkdir -p scratch && echo 'import solution' > scratch/bench.py\n"
        "echo 'tried blocking; slower' > NOTES.md\n"
        "echo 'raise SystemExit(3)' > numpy.py\n"  # would break the judge if it were judged
    )
    rec = trial(agent(body))
    assert rec.verdict == "accepted" and rec.reason_codes == [] and rec.out_of_scope == []
    kinds = {c.path: (c.change, c.in_scope) for c in rec.changed}
    assert kinds == {
        "solution.py": ("modified", True),
        "scratch/bench.py": ("added", False),
        "NOTES.md": ("added", False),
        "numpy.py": ("added", False),
    }


def test_deleting_a_tracked_file_outside_scope_is_still_out_of_scope(
    trial: Trial, agent: Agent
) -> None:
    rec = trial(agent("rm TASK.md"))
    assert rec.verdict == "rejected" and rec.reason_codes == ["out_of_scope"]
    assert rec.out_of_scope == ["TASK.md"]
