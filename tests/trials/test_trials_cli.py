"""`optarena run | trials | trial show | trial rejudge | demo` through the real entry point."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import tempfile
from collections.abc import Callable
from pathlib import Path

import pytest

from optarena.cli import main
from optarena.ledger import Ledger
from optarena.report import speed_words
from optarena.tasks import builtin_task_ids

Capsys = pytest.CaptureFixture[str]


def test_run_list_show_rejudge(
    tmp_path: Path, capsys: Capsys, agent: Callable[[str], str], control: Callable[[str], Path]
) -> None:
    led = str(tmp_path / "L")
    command = agent(f"cp {control('optimized')}/solution.py solution.py")
    args = ["run", "--task", "rmsnorm", "--command", command, "--no-measure", "--ledger", led]
    assert main([*args, "--label", "cond=a", "--timeout", "60", "--json"]) == 0
    record = json.loads(capsys.readouterr().out)
    assert record["verdict"] == "accepted" and record["labels"] == {"cond": "a"}
    tid = record["id"]

    assert main(["trials", "--ledger", led, "--task", "rmsnorm", "--status", "completed"]) == 0
    out = capsys.readouterr().out
    assert tid in out and "accepted" in out and "command" in out
    assert main(["trials", "--ledger", led, "--agent", "replay"]) == 0
    assert "no trials match" in capsys.readouterr().out

    assert main(["trial", "show", tid[:5], "--ledger", led]) == 0
    out = capsys.readouterr().out
    assert "solution.py" in out and "logs/stdout.log" in out and "in ?" in out  # unknown usage
    assert main(["trial", "show", tid, "--ledger", led, "--json"]) == 0
    shown = json.loads(capsys.readouterr().out)
    assert shown["trial"]["id"] == tid and len(shown["judgements"]) == 1
    assert Path(shown["artifact_paths"]["diff"]).is_file()

    assert main(["trial", "rejudge", tid, "--no-measure", "--ledger", led]) == 0
    capsys.readouterr()
    with Ledger(Path(led)) as ledger:
        assert [j.kind for j in ledger.judgements(tid)] == ["trial", "rejudge"]


def test_a_rejected_run_exits_1(
    tmp_path: Path, capsys: Capsys, agent: Callable[[str], str]
) -> None:
    led = str(tmp_path / "L")
    command = agent("echo oops >> TASK.md")
    assert (
        main(["run", "--task", "rmsnorm", "--command", command, "--no-measure", "--ledger", led])
        == 1
    )
    out = capsys.readouterr().out
    assert "rejected" in out and "out_of_scope" in out


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--agent", "gpt-9"], "known agents: claude, codex, command, replay"),
        (["--command", "no-such-agent-binary {workspace}"], "no-such-agent-binary"),
        (["--agent", "replay", "--command", "x"], "--command is for the 'command' agent"),
        ([], "pass --agent NAME"),
        (["--agent", "command", "--agent-arg", "novalue"], "expected KEY=VALUE"),
        (["--command", "x {prompt}"], "bad placeholder"),
    ],
)
def test_bad_input_is_one_line_and_exit_2(
    tmp_path: Path, capsys: Capsys, args: list[str], message: str
) -> None:
    argv = ["run", "--task", "rmsnorm", *args, "--ledger", str(tmp_path / "L")]
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert message in err and "Traceback" not in err


def test_unknown_task_and_trial(tmp_path: Path, capsys: Capsys) -> None:
    led = str(tmp_path / "L")
    assert main(["run", "--task", "nope", "--agent", "replay", "--ledger", led]) == 2
    assert "known tasks: " + ", ".join(builtin_task_ids()) in capsys.readouterr().err
    assert main(["trial", "show", "abc", "--ledger", led]) == 2
    assert "no trial 'abc'" in capsys.readouterr().err


@pytest.mark.slow
def test_demo_by_default_writes_a_new_ledger_of_its_own_and_says_where(
    tmp_path: Path, capsys: Capsys, monkeypatch: pytest.MonkeyPatch
) -> None:
    users = tmp_path / "users-ledger"
    monkeypatch.setenv("OPTARENA_LEDGER", str(users))
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))
    assert main(["demo", "--budget-s", "0.5"]) == 0
    captured = capsys.readouterr()
    (demo,) = tmp_path.glob("optarena-demo-*")
    assert f"demo ledger: {demo}" in " ".join(captured.err.split())
    assert str(demo / "ledger.db") in captured.out.replace("\n", "")
    assert not users.exists()  # the user's ledger is untouched
    with Ledger(demo) as ledger:
        assert len(ledger.trials()) == 2


@pytest.mark.slow
def test_demo_records_two_replay_trials(tmp_path: Path, capsys: Capsys) -> None:
    led = tmp_path / "L"
    assert main(["demo", "--ledger", str(led), "--budget-s", "1"]) == 0
    out = capsys.readouterr().out
    assert "replay (not" in out and "accepted" in out and "rejected" in out
    with Ledger(led) as ledger:
        rows = ledger.trials()
        assert sorted((r.labels["demo"], r.verdict) for r in rows) == [
            ("missing-eps", "rejected"),
            ("optimized", "accepted"),
        ]
        assert all(not r.agent.is_agent for r in rows)
        assert all(r.judge_settings.measure for r in rows)


def test_no_agent_sandbox_warns_records_and_shows(
    tmp_path: Path, capsys: Capsys, agent: Callable[[str], str]
) -> None:
    led = str(tmp_path / "L")
    base = ["run", "--task", "rmsnorm", "--command", agent("true"), "--no-measure"]
    assert main([*base, "--ledger", led, "--json"]) == 0
    contained = json.loads(capsys.readouterr().out)
    assert contained["agent_sandbox"]["enabled"] is True
    assert main([*base, "--no-agent-sandbox", "--ledger", led, "--json"]) == 0
    captured = capsys.readouterr()
    assert "--no-agent-sandbox: the agent can change the installed judge" in captured.err
    loose = json.loads(captured.out)
    assert loose["agent_sandbox"]["enabled"] is False
    assert main(["trial", "show", loose["id"], "--ledger", led]) == 0
    assert "[not contained] --no-agent-sandbox" in capsys.readouterr().out
    assert main(["trial", "show", contained["id"], "--ledger", led]) == 0
    out = capsys.readouterr().out
    assert "contained  user " in out and "teardown" in out


SPEED = re.compile(
    r"speed: (\d+\.\d\dx (faster|slower)|no change \(1\.00x\)), "
    r"(\d+\.\d\dx( (faster|slower))?\.\.\d+\.\d\dx (faster|slower)|no interval), "
    r"(improved|regressed|no_difference|inconclusive)"
)


def _cli(*args: str) -> subprocess.CompletedProcess[str]:
    """A real `optarena` process on an 80-column terminal."""
    env = {**os.environ, "COLUMNS": "80"}
    argv = [sys.executable, "-m", "optarena", *args]
    return subprocess.run(argv, capture_output=True, text=True, timeout=300, env=env)


def test_the_speed_result_is_shown_wherever_a_trial_is(
    tmp_path: Path, control: Callable[[str], Path]
) -> None:
    led = str(tmp_path / "L")
    source = f"source={control('optimized')}"
    run = _cli("run", "--task", "rmsnorm", "--agent", "replay", "--agent-arg", source,
               "--budget-s", "1", "--label", "cond=a", "--ledger", led)  # fmt: skip
    assert run.returncode == 0, run.stderr
    assert SPEED.search(run.stdout), run.stdout
    wrong = f"source={control('missing-eps')}"
    bad = _cli("run", "--task", "rmsnorm", "--agent", "replay", "--agent-arg", wrong,
               "--ledger", led)  # fmt: skip
    assert bad.returncode == 1 and "speed: none (rejected)" in bad.stdout
    with Ledger(Path(led)) as ledger:
        accepted, rejected = sorted(ledger.trials(), key=lambda r: r.verdict or "")

    shown = _cli("trial", "show", accepted.id[:4], "--ledger", led)
    assert SPEED.search(shown.stdout.replace("speed      ", "speed: ")), shown.stdout
    assert "speed of b" in shown.stdout and "stopped:" in shown.stdout  # the comparison table
    assert "overall (H-L)" in shown.stdout and "geometric mean  " not in shown.stdout
    if accepted.metrics and accepted.metrics.overall.verdict == "inconclusive":
        assert "inconclusive: " in shown.stdout  # and why
    assert "metrics " not in shown.stdout  # no raw key: value dump

    listed = _cli("trials", "--ledger", led)
    speedup = accepted.metrics.overall.speedup if accepted.metrics else None
    assert speedup is not None and speed_words(speedup).split()[0] in listed.stdout
    assert "cond=a" in listed.stdout and accepted.created_at[5:10] in listed.stdout
    lines = listed.stdout.splitlines()
    assert all(len(line.rstrip()) <= 80 for line in lines), listed.stdout
    # cells wrap between words, never inside one
    words = {w.strip(",") for line in lines for w in line.split()}
    assert {"out_of_tolerance", "non_finite", rejected.id, accepted.id} <= words, listed.stdout

    again = _cli("trial", "rejudge", accepted.id, "--budget-s", "1", "--ledger", led)
    assert again.returncode == 0 and SPEED.search(again.stdout), again.stdout


def test_what_an_agent_names_cannot_rewrite_the_terminal(
    tmp_path: Path, capsys: Capsys, agent: Callable[[str], str]
) -> None:
    """A file name is the agent's choice: one carrying `ESC [1A ESC [2K` (up a line, erase it)
    and a fake verdict, or rich markup, is printed inert, its control characters as \\xNN."""
    led = str(tmp_path / "L")
    evil = "notes\\033[1A\\033[2Kverdict accepted [red]x.txt"
    command = agent(f'printf x > "$(printf "{evil}")"')
    main(["run", "--task", "rmsnorm", "--command", command, "--no-measure", "--ledger", led])
    capsys.readouterr()
    with Ledger(Path(led)) as ledger:
        [rec] = ledger.trials()
    assert any("\x1b" in c.path for c in rec.changed)  # the name as the agent made it
    assert main(["trial", "show", rec.id, "--ledger", led]) == 0
    out = capsys.readouterr().out
    assert "\x1b" not in out
    assert "notes\\x1b[1A\\x1b[2Kverdict accepted [red]x.txt" in out


def test_a_workspace_nested_past_the_recursion_limit_is_still_recorded(
    tmp_path: Path, capsys: Capsys, agent: Callable[[str], str]
) -> None:
    """An agent nesting directories 1,500 deep in its workspace: the sandbox's hand-back of
    the files, the survey and the logs walk it without recursion (os.walk and rglob recurse,
    and raised RecursionError inside optarena), and the trial is recorded: rejected unread,
    since what lies below the survey's depth could not be bounded before git read it."""
    import subprocess

    led = tmp_path / "L"
    command = agent('mkdir -p "$(python3 -c \'print("d/" * 1500)\')" && echo deep > d/top.txt')
    try:
        code = main(
            ["run", "--task", "rmsnorm", "--command", command, "--no-measure", "--ledger", str(led)]
        )
        out = capsys.readouterr().out
        assert code == 1, out
        with Ledger(led) as ledger:
            [rec] = ledger.trials()
        assert rec.state == "complete" and rec.agent_status == "completed"
        assert rec.verdict == "rejected" and rec.reason_codes == ["nested_too_deep"]
    finally:
        subprocess.run(["rm", "-rf", str(led / "work")], check=False)  # rmtree recurses
