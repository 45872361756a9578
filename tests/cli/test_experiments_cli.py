"""The experiment commands as a user meets them: the ledger every other command uses
($OPTARENA_LEDGER), hints that name it, bad input as one line and exit 2 (never a traceback,
never a silently created ledger), and Ctrl-C saying once what was recorded."""

from __future__ import annotations

import signal
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

import pytest

from optarena.cli import main
from optarena.experiments import freeze, load_plan

PLAN = """
[experiment]
name = "cli"
repetitions = 1
tasks = ["rmsnorm"]

[judge]
measure = false

[[conditions]]
name = "a"
agent = "command"
command = "COMMAND"
"""


def _plan(tmp_path: Path, command: str = "true", text: str = PLAN) -> Path:
    path = tmp_path / "plan.toml"
    path.write_text(text.replace("COMMAND", command))
    return path


def test_experiment_commands_use_the_ledger_every_command_uses(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    env_ledger, user_data = tmp_path / "from-env", tmp_path / "xdg"
    monkeypatch.setenv("OPTARENA_LEDGER", str(env_ledger))
    monkeypatch.setenv("XDG_DATA_HOME", str(user_data))  # where the default would be
    path = _plan(tmp_path)
    assert main(["experiment", "freeze", str(path)]) == 0
    assert main(["experiment", "run", str(path)]) == 0
    assert (env_ledger / "ledger.db").is_file() and not user_data.exists()
    capsys.readouterr()
    assert main(["experiment", "status", str(path)]) == 0
    assert "1/1 complete" in capsys.readouterr().out
    assert main(["trials"]) == 0
    assert "rmsnorm" in capsys.readouterr().out  # `trials` sees the experiment's trial


def test_hints_name_the_ledger_given(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = _plan(tmp_path)
    freeze(load_plan(path))
    ledger = tmp_path / "my ledger"
    assert main(["trials", "--ledger", str(ledger)]) == 0  # an empty ledger, made on purpose
    capsys.readouterr()
    assert main(["experiment", "status", str(path), "--ledger", str(ledger)]) == 0
    out = capsys.readouterr().out
    assert f"optarena experiment run {path} --ledger '{ledger}'" in out


def _one_line_exit_2(argv: list[str], expected: str, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(argv) == 2, argv
    err = capsys.readouterr().err
    assert expected in err and "Traceback" not in err, err
    assert len(err.strip().splitlines()) == 1, err


def _ran(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> tuple[Path, Path]:
    """A frozen plan run to the end: (plan, ledger)."""
    path = _plan(tmp_path)
    freeze(load_plan(path))
    ledger = tmp_path / "ledger"
    assert main(["experiment", "run", str(path), "--ledger", str(ledger)]) == 0
    capsys.readouterr()
    return path, ledger


def test_bad_input_is_one_line_and_exit_2(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path, ledger = _ran(tmp_path, capsys)
    a_file = tmp_path / "a-file"
    a_file.write_text("")
    led = ["--ledger", str(ledger)]
    cases = [
        (["report", str(path), "-o", str(tmp_path / "missing" / "r.html"), *led], "does not exist"),
        (["report", str(path), "-o", str(a_file / "r.html"), *led], "does not exist"),
        (["report", str(path), "-o", str(tmp_path), *led], "is a directory"),
        (["report", "missing.toml", "-o", str(tmp_path / "r.html"), *led], "no such plan file"),
        (["report", "./missing", "-o", str(tmp_path / "r.html"), *led], "no such plan file"),
        (["task", "init", "rmsnorm", str(a_file / "ws")], "cannot write the workspace"),
        (["experiment", "status", str(path), "--ledger", str(tmp_path / "TYPO")], "no ledger at"),
        (["experiment", "compare", str(path), "--ledger", str(tmp_path / "TYPO")], "no ledger at"),
        (["report", str(path), "-o", str(tmp_path / "r.html"), "--ledger", str(tmp_path / "TYPO")],
         "no ledger at"),
    ]  # fmt: skip
    for argv, expected in cases:
        _one_line_exit_2(argv, expected, capsys)
    assert not (tmp_path / "TYPO").exists()  # a read-only command created nothing


def test_writes_into_a_read_only_filesystem_are_refused(
    tmp_path: Path, tmpfs: Callable[[str], Path], capsys: pytest.CaptureFixture[str]
) -> None:
    path, ledger = _ran(tmp_path, capsys)
    read_only_dir = tmpfs("ro,size=1m")
    out = str(read_only_dir / "r.html")
    _one_line_exit_2(
        ["report", str(path), "-o", out, "--ledger", str(ledger)], "cannot write", capsys
    )
    ws = str(read_only_dir / "ws")
    _one_line_exit_2(["task", "init", "rmsnorm", ws], "cannot write the workspace", capsys)


def test_an_unknown_agent_and_an_edited_plan_name_their_fields(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    bad = _plan(tmp_path, text=PLAN.replace('agent = "command"', 'agent = "cluade"'))
    _one_line_exit_2(["experiment", "freeze", str(bad)], "conditions.0.agent", capsys)
    path = _plan(tmp_path)
    freeze(load_plan(path))
    path.write_text(path.read_text().replace("repetitions = 1", "repetitions = 2"))
    _one_line_exit_2(
        ["experiment", "run", str(path), "--ledger", str(tmp_path / "l")],
        "plan.experiment.repetitions: 1 -> 2",
        capsys,
    )


@pytest.mark.slow
def test_ctrl_c_of_experiment_run_says_once_what_was_recorded(
    tmp_path: Path, from_a_terminal: Callable[[list[str]], subprocess.Popen[str]]
) -> None:
    path = _plan(tmp_path, "sh -c 'touch {logs_dir}/started; sleep 60'")
    freeze(load_plan(path))
    ledger = tmp_path / "ledger"
    cmd = [
        sys.executable,
        "-m",
        "optarena",
        "experiment",
        "run",
        str(path),
        "--ledger",
        str(ledger),
    ]
    proc = from_a_terminal(cmd)
    deadline = time.monotonic() + 60
    while not list(ledger.glob("work/*/logs/started")) and time.monotonic() < deadline:
        time.sleep(0.1)
    assert list(ledger.glob("work/*/logs/started"))  # the agent runs: Ctrl-C now
    proc.send_signal(signal.SIGINT)
    _, err = proc.communicate(timeout=120)
    assert proc.returncode == 130
    assert err.count("interrupted:") == 1 and "nothing was recorded" not in err, err
    assert f"--ledger {ledger}" in err and "Traceback" not in err
