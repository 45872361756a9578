"""No failure vanishes from an experiment: a trial during which optarena raises, dies or hangs is
recorded, retried up to the plan's `retries` and then counted as a failure; the other trials run
on; and a comparison with trials still pending says so instead of reading the missing ones as
absent (a sabotaged trial left pending read "cheat 1/1 accepted" against "plain 1/2")."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

import pytest

from optarena.cli import main
from optarena.experiments import compare_experiment, experiment_state, freeze, load_plan
from optarena.experiments import run_experiment as run
from optarena.ledger import Ledger

HERE = Path(__file__).resolve().parent

HONEST = """
import sys
from pathlib import Path
ws = Path(sys.argv[1])
"""

PLAN = """
[experiment]
name = "failures"
seed = 2
repetitions = 2
retries = 1
tasks = ["rmsnorm"]

[judge]
measure = false

[[conditions]]
name = "plain"
agent = "command"
command = "python3 {plan_dir}/honest.py {workspace}"
agent_args = { meter = "false" }

[[conditions]]
name = "cheat"
agent = "AGENT"

[compare]
baseline = "plain"
treatments = ["cheat"]
"""


def _plan(tmp_path: Path, agent: str, text: str = PLAN) -> Path:
    (tmp_path / "honest.py").write_text(HONEST)
    path = tmp_path / "plan.toml"
    path.write_text(text.replace("AGENT", agent))
    freeze(load_plan(path))
    return path


@pytest.fixture
def hostile(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.syspath_prepend(str(HERE))


def test_a_trial_that_raises_is_retried_then_counted_as_a_failure(
    tmp_path: Path, hostile: None
) -> None:
    path = _plan(tmp_path, "hostile_runners:RaisingRunner")
    home = tmp_path / "ledger"
    events: list[tuple[str, str]] = []
    state = run(load_plan(path), home, on_event=lambda k, s, r, m: events.append((k, s.key)))
    # the honest trials all ran, whatever the hostile ones did
    assert state.counts() == {
        "scheduled": 4, "complete": 2, "failed": 2, "pending": 0, "interrupted_rows": 4,
    }  # fmt: skip
    for rep in (0, 1):
        key = f"rmsnorm/cheat/{rep}"
        kinds = [k for k, s in events if s == key]
        assert kinds == ["start", "error", "retry", "start", "error", "failed"]
        assert state.outcome(key) == "failed" and len(state.failed_attempts(key)) == 2
        assert all("sabotage" in (r.error or "") for r in state.rows[key])
    c = compare_experiment(state)
    by_name = {s.name: s for s in c.conditions}
    assert (by_name["cheat"].trials, by_name["cheat"].failed, by_name["cheat"].accepted) == (
        2,
        2,
        0,
    )
    assert by_name["cheat"].correctness_rate == 0.0  # a failure, never dropped
    assert by_name["plain"].accepted == 2
    failed = [r for r in c.trials if r.condition == "cheat"]
    assert all(r.outcome == "failed" and r.attempts == 2 and r.verdict is None for r in failed)
    assert c.comparisons[0].pairs == 2 and c.comparisons[0].correctness_diff == -1.0
    # nothing left to run: a second run starts no trial
    again = run(load_plan(path), home, on_event=lambda k, s, r, m: events.append((k, s.key)))
    assert again.counts() == state.counts() and len(events) == 16


def test_a_user_interrupt_uses_no_retry_and_compare_flags_what_is_pending(
    tmp_path: Path, hostile: None, capsys: pytest.CaptureFixture[str]
) -> None:
    path = _plan(tmp_path, "command", PLAN.replace('agent = "AGENT"', COMMAND_CHEAT))
    home = tmp_path / "ledger"
    started: list[str] = []

    def stop_on_cheat(kind: str, s: object, r: object, m: str) -> None:
        key = getattr(s, "key", "")
        if kind == "start":
            started.append(key)
            if "/cheat/" in key:
                raise KeyboardInterrupt  # the user's Ctrl-C, as the cheat's trial starts

    with pytest.raises(KeyboardInterrupt):
        run(load_plan(path), home, on_event=stop_on_cheat)
    with Ledger.open(home) as led:
        state = experiment_state(load_plan(path), led)
    assert state.counts()["pending"] >= 3  # the first cheat key and everything after it
    c = compare_experiment(state)
    assert c.pending and c.comparisons[0].verdict == "undecided"
    assert c.comparisons[0].why.startswith("incomplete: ")
    assert {s.name: s.pending for s in c.conditions}["cheat"] == 2
    assert main(["experiment", "compare", str(path), "--ledger", str(home)]) == 0
    assert "incomplete:" in capsys.readouterr().err
    # the stopped attempt (if its row was begun) is on record and used no retry
    state = run(load_plan(path), home)
    assert state.counts()["complete"] == 4 and state.counts()["failed"] == 0


COMMAND_CHEAT = 'agent = "command"\ncommand = "python3 {plan_dir}/honest.py {workspace}"'


def test_a_user_stopped_row_is_told_apart_from_a_failed_one(tmp_path: Path) -> None:
    """The wording `run_trial` gives a Ctrl-C'd trial is what `stopped_by_user` reads."""
    # private: the run's record of a user's stop, checked after one
    from optarena.experiments._state import stopped_by_user
    from optarena.judge import JudgeOptions, JudgeResult
    from optarena.tasks import Task

    path = _plan(tmp_path, "command", PLAN.replace('agent = "AGENT"', COMMAND_CHEAT))
    home = tmp_path / "ledger"

    def ctrl_c(task: Task, cand: Path, options: JudgeOptions) -> JudgeResult:
        raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):
        run(load_plan(path), home, judge_fn=ctrl_c)
    with Ledger.open(home) as led:
        state = experiment_state(load_plan(path), led)
    (row,) = [r for rs in state.rows.values() for r in rs]
    assert row.state == "interrupted" and stopped_by_user(row)
    assert state.failed_attempts(row.labels["experiment_key"]) == []


def _cli(path: Path, home: Path) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(HERE), *sys.path])}
    cmd = [sys.executable, "-m", "optarena", "experiment", "run", str(path), "--ledger", str(home)]
    return subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=300)


@pytest.mark.slow
def test_a_trial_that_kills_the_runner_is_counted_after_its_retries(
    tmp_path: Path, hostile: None
) -> None:
    """SIGSEGV of `experiment run` mid-trial: the next run finds the row (reconciled as
    interrupted), counts it as an attempt, and after the retries the key is a failure: the
    experiment finishes instead of crashing on the same key for ever."""
    path = _plan(
        tmp_path,
        "hostile_runners:SegfaultRunner",
        PLAN.replace("repetitions = 2", "repetitions = 1"),
    )
    home = tmp_path / "ledger"
    codes = []
    for _ in range(4):
        out = _cli(path, home)
        codes.append(out.returncode)
        if out.returncode == 0:
            break
    assert codes[:2] == [-11, -11] and codes[-1] == 0, codes
    with Ledger.open(home) as led:
        state = experiment_state(load_plan(path), led)
    assert state.outcome("rmsnorm/cheat/0") == "failed"
    assert state.outcome("rmsnorm/plain/0") == "complete"
    assert all("ended without finishing" in (r.error or "") for r in state.rows["rmsnorm/cheat/0"])
    c = compare_experiment(state)
    plain = state.done("rmsnorm/plain/0")
    assert plain is not None and plain.verdict == "accepted", plain.reasons
    assert {s.name: (s.trials, s.accepted) for s in c.conditions} == {
        "plain": (1, 1), "cheat": (1, 0),
    }  # fmt: skip


HANG = """
import os, signal, subprocess, sys, time
signal.signal(signal.SIGTERM, signal.SIG_IGN)
subprocess.Popen(["sleep", "600"], start_new_session=True, stdout=sys.stdout)
if os.fork() == 0:
    os.setsid()
    signal.signal(signal.SIGTERM, signal.SIG_IGN)
    time.sleep(600)
time.sleep(600)
"""


@pytest.mark.slow
def test_an_agent_that_hangs_past_every_timeout_ends_recorded(tmp_path: Path) -> None:
    """SIGTERM ignored, a detached grandchild holding stdout, a forked daemon: the trial ends
    at its wall time as `timeout`, recorded, and the experiment goes on."""
    (tmp_path / "hang.py").write_text(HANG)
    text = PLAN.replace(
        'agent = "AGENT"', 'agent = "command"\ncommand = "python3 {plan_dir}/hang.py"'
    )
    text = text.replace("[judge]", "[limits]\ntimeout_s = 3\n\n[judge]")
    text = text.replace("repetitions = 2", "repetitions = 1")
    path = _plan(tmp_path, "", text)
    t0 = time.monotonic()
    state = run(load_plan(path), tmp_path / "ledger")
    assert time.monotonic() - t0 < 120
    assert state.counts()["complete"] == 2
    hung = state.done("rmsnorm/cheat/0")
    assert hung is not None and hung.agent_status == "timeout"


FLOOD = """
import sys
try:
    with open(sys.argv[1] + "/flood.log", "wb") as f:
        while True:
            f.write(b"x" * (1 << 20))
except OSError:
    pass
"""


@pytest.mark.slow
def test_an_agent_that_fills_the_disk_loses_no_trial(
    tmp_path: Path, tmpfs: Callable[[str], Path]
) -> None:
    """Logs written until the ledger's disk is full: the run stops with a clear error (exit 2,
    no traceback), what was recorded stays, and once space is freed the next runs count each
    flooding attempt, fail its key after the retries and finish the honest trials."""
    (tmp_path / "flood.py").write_text(FLOOD)
    text = PLAN.replace('agent = "AGENT"', FLOOD_AGENT).replace(
        "repetitions = 2", "repetitions = 1"
    )
    path = _plan(tmp_path, "", text)
    home = tmpfs("size=24m") / "ledger"  # a small disk for the ledger
    for _ in range(8):
        out = _cli(path, home)
        for log in home.glob("work/*/logs/flood.log"):
            log.unlink()  # the user frees the space
        if out.returncode == 0:
            break
        full = "disk is full" in out.stderr or "No space left" in out.stderr
        assert out.returncode == 2 and full, out.stderr[-2000:]
        assert "Traceback" not in out.stderr
    assert out.returncode == 0, out.stderr[-2000:]
    with Ledger.open(home) as led:
        state = experiment_state(load_plan(path), led)
    outcomes = {s.key: state.outcome(s.key) for s in state.schedule}
    assert outcomes == {"rmsnorm/plain/0": "complete", "rmsnorm/cheat/0": "failed"}
    assert len(state.failed_attempts("rmsnorm/cheat/0")) == 2  # 1 + retries, each on record
    c = compare_experiment(state)
    assert {s.name: (s.trials, s.failed) for s in c.conditions}["cheat"] == (1, 1)


FLOOD_AGENT = 'agent = "command"\ncommand = "python3 {plan_dir}/flood.py {logs_dir}"'
