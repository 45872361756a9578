"""The cluster's views: the live table per node (what runs where, trials per hour, the ETA)
and `experiment status` saying where a running key runs."""

from __future__ import annotations

from pathlib import Path

from rich.console import Console

# private: the command line's Ray views, tested on built records
from optarena.cli._experiment_ray import NodeBoard, key_places
from optarena.experiments import ScheduledTrial, experiment_state, freeze, load_plan
from optarena.ledger import Ledger, utc_now
from optarena.records import AgentInfo, AgentLimits, JudgeSettings, TaskInfo, TrialRecord

PLAN = """
[experiment]
name = "views"
repetitions = 2
tasks = ["rmsnorm"]

[[conditions]]
name = "a"
agent = "command"
command = "true"
"""


def _text(board: NodeBoard) -> str:
    console = Console(width=200, record=True)
    console.print(board.table())
    return console.export_text()


def test_the_board_shows_each_node_s_keys_rate_and_the_eta() -> None:
    board = NodeBoard(remaining=3)
    one, two, three = (ScheduledTrial(i, "rmsnorm", "a", i) for i in range(3))
    assert board.eta() == "-" and "nodes (ETA -)" in _text(board)
    board.on_event("start", one, None, "")
    board.on_event("node", one, None, "vm/aaaa")
    board.on_event("node", two, None, "vm/bbbb")
    text = _text(board)
    assert "vm/aaaa" in text and "rmsnorm/a/0" in text and "rmsnorm/a/1" in text
    board.on_event("end", one, None, "")
    board.on_event("error", two, None, "NodeDiedError")  # lost with its node: not done
    board.on_event("node", three, None, "vm/aaaa")
    rows = {line.split()[1]: line for line in _text(board).splitlines() if " vm/" in line}
    assert "rmsnorm/a/2" in rows["vm/aaaa"] and " 1 " in rows["vm/aaaa"]
    assert "rmsnorm/a/1" not in rows["vm/bbbb"] and " 0 " in rows["vm/bbbb"]
    assert board.remaining == 2
    text = _text(board)  # the ETA moves with the clock: its shape, not its value
    assert board.eta().endswith(" s") and "nodes (ETA " in text and " s)" in text
    assert board.rate() > 0


def _running(key: str, node: str | None) -> TrialRecord:
    labels = {"experiment_key": key, **({"node": node} if node else {})}
    return TrialRecord(
        id="0123456789", state="running", created_at=utc_now(), host="vm", pid=42,
        task=TaskInfo(id="rmsnorm", version="1", sha256="0" * 64, root="/x"),
        agent=AgentInfo(name="command", label="command", is_agent=True, runner="m:C"),
        labels=labels, limits=AgentLimits(), judge_settings=JudgeSettings(measure=True),
        runtime={}, judge_sha256="0" * 64, workspace="/w",
    )  # fmt: skip


def test_status_names_the_node_of_a_running_key_and_every_key_on_request(tmp_path: Path) -> None:
    path = tmp_path / "plan.toml"
    path.write_text(PLAN)
    plan = load_plan(path)
    freeze(plan)
    with Ledger(tmp_path / "ledger") as led:
        state = experiment_state(plan, led)
    state.rows["rmsnorm/a/0"] = [_running("rmsnorm/a/0", "vm/c9c011a5")]
    state.rows["rmsnorm/a/1"] = [_running("rmsnorm/a/1", None)]
    lines = key_places(state, every=False)
    assert any(line.startswith("rmsnorm/a/0: running on vm/c9c011a5 since") for line in lines)
    assert any(line.startswith("rmsnorm/a/1: running on vm (pid 42)") for line in lines)
    assert len(lines) == 2
    assert len(key_places(state, every=True)) == 2  # both keys are running ones
