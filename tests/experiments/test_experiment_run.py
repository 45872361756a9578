"""Running a plan into a ledger: every trial tagged, artifacts in the workspace from the start,
and resuming after an interruption (Ctrl-C in-process, kill -9 of the CLI) keeps what was done,
keeps the interruption on record and duplicates nothing."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from optarena.experiments import compare_experiment, experiment_state, freeze, load_plan
from optarena.judge import JudgeOptions, JudgeResult, judge
from optarena.ledger import Ledger
from optarena.tasks import Task

AGENT = """
import os, sys
from pathlib import Path
ws, logs = Path(sys.argv[1]), Path(sys.argv[2])
key = os.environ["OPTARENA_EXPERIMENT_KEY"]
(logs / "seen.txt").write_text(key + " hint=" + str((ws / "HINT.md").is_file()))
if key.split("/")[1] == "wrong":
    (ws / "solution.py").write_text("def rmsnorm(x, weight, *, eps):\\n    return x * 0\\n")
"""

PLAN = """
[experiment]
name = "resume-test"
seed = 1
repetitions = 2
tasks = ["rmsnorm"]

[judge]
measure = false

[[conditions]]
name = "plain"
agent = "command"
command = "python3 {plan_dir}/agent.py {workspace} {logs_dir}"
agent_args = { meter = "false" }  # not metered: its cost stays unknown, never zero

[[conditions]]
name = "wrong"
agent = "command"
command = "python3 {plan_dir}/agent.py {workspace} {logs_dir}"
artifacts = "hint"

[compare]
baseline = "plain"
treatments = ["wrong"]
"""


def _plan(tmp_path: Path) -> Path:
    (tmp_path / "agent.py").write_text(AGENT)
    (tmp_path / "hint").mkdir()
    (tmp_path / "hint" / "HINT.md").write_text("a hint")
    path = tmp_path / "plan.toml"
    path.write_text(PLAN)
    freeze(load_plan(path))
    return path


def _rows(home: Path, plan_path: Path) -> dict[str, list[str]]:
    with Ledger.open(home) as led:
        state = experiment_state(load_plan(plan_path), led)
    return {k: [r.state for r in rs] for k, rs in state.rows.items()}


def test_interrupted_then_resumed_without_loss_or_duplicates(tmp_path: Path) -> None:
    from optarena.experiments import run_experiment

    path = _plan(tmp_path)
    home = tmp_path / "ledger"
    calls = []

    def interrupting(task: Task, cand: Path, options: JudgeOptions) -> JudgeResult:
        calls.append(cand)
        if len(calls) == 2:
            raise KeyboardInterrupt("Ctrl-C while judging")
        return judge(task, cand, options)

    with pytest.raises(KeyboardInterrupt):
        run_experiment(load_plan(path), home, judge_fn=interrupting)
    first = _rows(home, path)
    assert sorted(s for states in first.values() for s in states) == ["complete", "interrupted"]
    state = run_experiment(load_plan(path), home)
    rows = _rows(home, path)
    assert len(rows) == 4 and all(states.count("complete") == 1 for states in rows.values())
    assert sum(states.count("interrupted") for states in rows.values()) == 1
    assert state.counts()["pending"] == 0
    c = compare_experiment(state)
    by_name = {s.name: s for s in c.conditions}
    assert by_name["plain"].accepted == 2 and by_name["wrong"].accepted == 0
    # a correctness-only plan: no speed figure at all, never a confident 1.0
    assert by_name["wrong"].effective_median is None and not c.speed_measured
    assert c.comparisons[0].verdict == "not_measured"
    assert by_name["plain"].metered_cost_usd.value is None
    assert by_name["plain"].metered_cost_usd.unknown == 2
    assert c.comparisons[0].correctness_diff == -1.0
    with Ledger.open(home) as led:
        for r in led.trials(limit=None):
            assert r.labels["experiment"] == "resume-test"
            seen = (Path(r.workspace).parent / "logs" / "seen.txt").read_text()
            assert seen.startswith(r.labels["experiment_key"])
            assert seen.endswith("hint=" + str(r.labels["condition"] == "wrong"))
            assert r.out_of_scope == []  # the artifact is part of the starting state


@pytest.mark.slow
def test_a_kill_9_of_the_cli_resumes(tmp_path: Path) -> None:
    path = _plan(tmp_path)
    home = tmp_path / "ledger"
    cmd = [sys.executable, "-m", "optarena", "experiment", "run", str(path), "--ledger", str(home)]
    proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline:
        if home.exists() and any("complete" in states for states in _rows(home, path).values()):
            break
        time.sleep(0.2)
    os.kill(proc.pid, signal.SIGKILL)
    proc.wait()
    subprocess.run(cmd, check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    rows = _rows(home, path)
    assert len(rows) == 4 and all(states.count("complete") == 1 for states in rows.values())


def test_agents_run_in_parallel_but_judging_never_overlaps(tmp_path: Path) -> None:
    import itertools
    import threading

    from optarena.experiments import run_experiment

    path = _plan(tmp_path)
    spans: list[tuple[float, float]] = []
    lock = threading.Lock()

    def timed(task: Task, cand: Path, options: JudgeOptions) -> JudgeResult:
        t0 = time.monotonic()
        result = judge(task, cand, options)
        with lock:
            spans.append((t0, time.monotonic()))
        return result

    state = run_experiment(load_plan(path), tmp_path / "ledger", max_parallel=2, judge_fn=timed)
    assert state.counts()["complete"] == 4 and len(spans) == 4
    spans.sort()
    assert all(a_end <= b_start for (_, a_end), (b_start, _) in itertools.pairwise(spans))
    # reports of the plan and of one trial, from the same ledger
    from optarena.cli import main

    home, trial = tmp_path / "ledger", next(iter(state.rows.values()))[0]
    for fmt in ("html", "md", "json"):
        out = tmp_path / f"plan.{fmt}"
        assert (
            main(["report", str(path), "--ledger", str(home), "-o", str(out), "--format", fmt]) == 0
        )
        assert "resume-test" in out.read_text()
    out = tmp_path / "trial.md"
    assert (
        main(["report", trial.id[:6], "--ledger", str(home), "-o", str(out), "--format", "md"]) == 0
    )
    text = out.read_text()
    assert f"# Trial `{trial.id}`" in text and "| verdict |" in text and "## diff" in text
    assert main(["report", "no-such-trial", "--ledger", str(home), "-o", str(out)]) == 2
