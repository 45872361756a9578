"""A trial that is interrupted or crashes leaves a complete row or an `interrupted` one, never a
half-written one: in-process failures, SIGTERM, and a kill -9 of the optarena process."""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

import pytest

from optarena.agents import RunContext
from optarena.agents.command import CommandRunner
from optarena.errors import OptarenaError
from optarena.judge import JudgeOptions, JudgeResult
from optarena.ledger import Ledger
from optarena.processes import is_zombie, signal_same, start_ticks
from optarena.records import AgentOutcome, TrialRecord
from optarena.sandbox import probe

# private: where the sandbox keeps its sockets, to see that a crash left none
from optarena.sandbox._agent_sweep import socket_bases
from optarena.tasks import Task
from optarena.trials import TrialConfig, TrialInterrupted, rejudge, run_trial

CAPS = probe()


def _assert_interrupted(record: TrialRecord, during: str) -> None:
    assert record.state == "interrupted" and record.finished_at is not None
    assert record.error is not None and record.error.startswith(f"during {during}:")
    # nothing of the unfinished trial is presented as a result
    assert record.verdict is None and record.agent_status is None
    assert record.artifacts == {} and record.phases_s == {}


@pytest.mark.parametrize("exc", [KeyboardInterrupt(), RuntimeError("judge blew up")])
def test_a_failure_while_judging_keeps_the_delivery_and_marks_the_row_interrupted(
    ledger: Ledger, rmsnorm: Task, control: Callable[[str], Path], exc: BaseException
) -> None:
    def exploding_judge(task: Task, cand: Path, options: JudgeOptions) -> JudgeResult:
        raise exc

    source = control("optimized")
    config = TrialConfig(task=rmsnorm, agent="replay", agent_args={"source": str(source)})
    with pytest.raises(type(exc)) as raised:
        run_trial(config, ledger, judge_fn=exploding_judge)
    (record,) = ledger.trials()
    assert record.state == "interrupted" and record.finished_at is not None
    assert (record.error or "").startswith(f"during judge: {type(exc).__name__}")
    assert record.verdict is None and record.metrics is None  # no result is presented
    assert ledger.judgements(record.id) == []
    # ... but nothing the agent delivered is lost: candidate, diff, outcome, agent phase
    assert record.agent_status == "completed" and record.agent_wall_s is not None
    assert {"candidate", "diff", "outcome"} <= set(record.artifacts)
    assert [c.path for c in record.changed] == ["solution.py"]
    assert set(record.phases_s) == {"setup", "agent", "capture"}
    rows = ledger._conn.execute("SELECT name, sha256 FROM trial_artifacts").fetchall()
    assert {r["name"]: r["sha256"] for r in rows} == record.artifacts
    assert b"solution.py" in ledger.store.read_bytes(record.artifacts["diff"])
    if isinstance(exc, KeyboardInterrupt):
        assert isinstance(raised.value, TrialInterrupted)
        assert raised.value.trial_id == record.id and "candidate" in raised.value.kept
    # and it can be judged afterwards
    _, judgement, _ = rejudge(ledger, record.id, changes={"measure": False})
    assert judgement.verdict == "accepted"


def test_an_interrupted_agent_leaves_its_files_kept_and_judgeable(
    ledger: Ledger, rmsnorm: Task, control: Callable[[str], Path]
) -> None:
    optimized = (control("optimized") / "solution.py").read_bytes()

    class Stopped(CommandRunner):
        def run(self, context: RunContext, *args: object, **kw: object) -> AgentOutcome:
            (context.workspace / "solution.py").write_bytes(optimized)
            raise KeyboardInterrupt  # Ctrl-C while the agent works

    config = TrialConfig(task=rmsnorm, agent="command", agent_args={"command": "true"})
    with pytest.raises(TrialInterrupted) as raised:
        run_trial(config, ledger, runner=Stopped(command="true"))
    (record,) = ledger.trials()
    assert record.state == "interrupted" and (record.error or "").startswith("during agent:")
    assert record.verdict is None and record.agent_status is None  # it did not end by itself
    assert record.agent_detail == "stopped by Ctrl-C or SIGTERM"
    assert {"candidate", "diff", "outcome"} <= set(record.artifacts)
    assert [c.path for c in record.changed] == ["solution.py"]
    assert raised.value.delivered
    _, judgement, _ = rejudge(ledger, record.id, changes={"measure": False})
    assert judgement.verdict == "accepted"


def test_when_nothing_can_be_captured_the_row_keeps_the_start_record_only(
    ledger: Ledger, rmsnorm: Task
) -> None:
    class Wrecking(CommandRunner):
        def run(self, context: RunContext, *args: object, **kw: object) -> AgentOutcome:
            shutil.rmtree(context.paths.shadow)  # capture cannot work
            raise KeyboardInterrupt

    config = TrialConfig(task=rmsnorm, agent="command", agent_args={"command": "true"})
    with pytest.raises(TrialInterrupted) as raised:
        run_trial(config, ledger, runner=Wrecking(command="true"))
    (record,) = ledger.trials()
    _assert_interrupted(record, "agent")
    assert "start record only" in raised.value.kept and not raised.value.delivered
    with pytest.raises(OptarenaError, match="interrupted before delivery"):
        rejudge(ledger, record.id)


def _start_cli_trial(
    tmp_path: Path, agent: Callable[[str], str], body: str = ""
) -> subprocess.Popen[bytes]:
    """`optarena run` with an agent that says it started in its logs directory (the agent
    sandbox lets it write nothing else outside its workspace) and becomes `sleep AGENT`;
    returns once it said so."""
    marker = '"$OPTARENA_LOGS_DIR/agent.pid"'
    command = agent(f"{body}\necho $$ > {marker}.tmp; mv {marker}.tmp {marker}; exec sleep {AGENT}")
    argv = [sys.executable, "-m", "optarena", "run", "--task", "rmsnorm", "--command", command]
    argv += ["--no-measure", "--ledger", str(tmp_path / "ledger")]
    proc = subprocess.Popen(argv, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    deadline = time.monotonic() + 60
    while not list((tmp_path / "ledger" / "work").glob("*/logs/agent.pid")):
        assert proc.poll() is None, proc.stderr.read() if proc.stderr else b""
        assert time.monotonic() < deadline, "the agent never started"
        time.sleep(0.05)
    return proc


# What the agent and its daemon sleep, found by it: apart per pytest process, so that these
# tests running at once on two xdist workers never find (and then kill) each other's.
AGENT, DAEMON_SLEEP = f"3303.{os.getpid()}", f"3304.{os.getpid()}"


Pids = Callable[[str], list[int]]


def _start_times(*pids: int) -> dict[int, int]:
    """pid -> start time, so that a test's cleanup kills only the processes it found (pids are
    reused, pid_max is 32768 here; a pid killed blindly seconds later was another test's)."""
    return {p: t for p in pids if (t := start_ticks(p)) is not None}


def _pid_of(find_pids: Pids, sleeping: str) -> int:
    """The host pid of the one process running `sleep SLEEPING` (`$$` inside names its PID
    namespace's pid), once it runs."""
    deadline = time.monotonic() + 10
    while not (found := find_pids(f"sleep {sleeping}")) and time.monotonic() < deadline:
        time.sleep(0.05)
    (pid,) = found
    return pid


def _dead(pid: int) -> bool:
    return is_zombie(pid)


DAEMON = f"""setsid sh -c 'echo $$ > "$OPTARENA_LOGS_DIR/daemon.pid"; exec sleep {DAEMON_SLEEP}' &
while [ ! -s "$OPTARENA_LOGS_DIR/daemon.pid" ]; do sleep 0.01; done"""


def _started_with_daemon(
    tmp_path: Path, agent: Callable[[str], str], find_pids: Pids
) -> tuple[subprocess.Popen[bytes], int, int]:
    """`optarena run` with an agent that started a detached daemon: it, and the host pids of
    the agent and the daemon."""
    proc = _start_cli_trial(tmp_path, agent, DAEMON)
    try:
        return proc, _pid_of(find_pids, AGENT), _pid_of(find_pids, DAEMON_SLEEP)
    except BaseException:
        proc.kill()  # its agent dies with it (parent-death signal); reconcile sweeps the rest
        raise


def _wait_dead(pid: int, timeout_s: float = 5.0) -> bool:
    deadline = time.monotonic() + timeout_s
    while not _dead(pid) and time.monotonic() < deadline:
        time.sleep(0.05)
    return _dead(pid)


def test_sigterm_mid_agent_kills_the_agent_and_records_interrupted(
    tmp_path: Path, agent: Callable[[str], str], find_pids: Pids
) -> None:
    proc, agent_pid, daemon_pid = _started_with_daemon(tmp_path, agent, find_pids)
    found = _start_times(agent_pid, daemon_pid)
    try:
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(timeout=30) == 130
        err = proc.stderr.read().decode() if proc.stderr else ""
        # not silent: what was recorded, where, and what to do next
        assert "interrupted: trial " in err and "recorded as interrupted (during agent" in err
        # one line each, never folded mid-word: the path and the command can be copied
        (line,) = [x for x in err.splitlines() if x.startswith("interrupted: trial ")]
        assert str(tmp_path / "ledger" / "ledger.db") in line
        assert "it keeps the delivery" in line and "`optarena trial rejudge " in line
        assert "Traceback" not in err
        assert _wait_dead(agent_pid)
        assert _wait_dead(daemon_pid)  # detached, in its own session: ended all the same
    finally:
        signal_same(found, signal.SIGKILL)
    with Ledger(tmp_path / "ledger") as ledger:
        (record,) = ledger.trials()
        assert record.state == "interrupted" and record.verdict is None
        assert (record.error or "").startswith("during agent: KeyboardInterrupt")
        assert {"candidate", "diff", "logs/stdout.log"} <= set(record.artifacts)  # kept


def test_kill_9_leaves_running_until_the_next_run_recovers_it_and_its_leftovers(
    tmp_path: Path, agent: Callable[[str], str], find_pids: Pids
) -> None:
    proc, agent_pid, daemon_pid = _started_with_daemon(tmp_path, agent, find_pids)
    found = _start_times(agent_pid, daemon_pid)
    try:
        proc.kill()
        # Not reaped yet: a zombie keeps its pid and start time, so to every sweep (another
        # xdist worker's reconcile included) its leftovers still have a live owner, and stay
        # for this test to see. Reaped just before this test's own reconcile.
        os.waitid(os.P_PID, proc.pid, os.WEXITED | os.WNOWAIT)
        assert _wait_dead(agent_pid)  # its parent-death signal
        sockets = [p for b in socket_bases() for p in b.glob(f"optarena-agent-{proc.pid}-*")]
        assert len(sockets) == 1 and list(sockets[0].glob("*.sock"))  # the bridge's, left
        with Ledger.open(tmp_path / "ledger") as raw:  # opening changes nothing
            (record,) = raw.trials()
            assert record.state == "running"  # the start record, untouched: not half-written
            assert record.verdict is None and record.artifacts == {}
            assert sockets[0].exists()
            proc.wait(timeout=30)
            assert raw.reconcile() == [record.id]  # what `run` does first
            (record,) = raw.trials()
            assert record.state == "interrupted"
            assert f"process {proc.pid} ended without finishing" in (record.error or "")
            # the daemon nobody waited for: ended with the agent's PID namespace, or found by
            # the dead optarena's cgroup (or uid)
            assert _wait_dead(daemon_pid, 2.0)
            assert raw.swept >= 1 or CAPS.pidns is None
            assert not sockets[0].exists()
    finally:
        signal_same(found, signal.SIGKILL)
