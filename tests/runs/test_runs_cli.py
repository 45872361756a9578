"""`optarena run | trials | trial show | trial rejudge | demo` through the real entry point."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path

import pytest

from optarena.cli import main
from optarena.ledger import Ledger
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
    command = agent("echo oops > notes.txt")
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
