"""The CLI through its real entry point: exit codes 0/1/2, JSON shape, no tracebacks."""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

import pytest

import optarena
from optarena.cli import main

# private: a pure renderer of the command line, tested on literal values
from optarena.cli._render import brief
from optarena.tasks import BUILTIN_DIR, builtin_task_ids


def run_cli(*args: str) -> subprocess.CompletedProcess[str]:
    """A real subprocess, as a user would run it."""
    return subprocess.run(
        [sys.executable, "-m", "optarena", *args], capture_output=True, text=True, timeout=300
    )


def test_tasks_and_show(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["tasks", "--json"]) == 0
    rows = json.loads(capsys.readouterr().out)
    assert [r["id"] for r in rows] == builtin_task_ids()
    assert all(len(r["sha256"]) == 64 for r in rows)
    # Every built-in CPU task runs here (the suite's machine has a C compiler); a task this
    # machine cannot run says why.
    for r in rows:
        if r["device"] == "cpu":
            assert r["runnable"] and r["unmet"] == [], r
        else:
            assert r["runnable"] == (r["unmet"] == [])
    assert main(["task", "show", "rmsnorm"]) == 0
    out = capsys.readouterr().out
    assert "solution.py:rmsnorm" in out and "prefill" in out and "missing-eps" in out


def test_task_init_writes_workspace_and_refuses_non_empty(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    ws = tmp_path / "ws"
    assert main(["task", "init", "softmax", str(ws)]) == 0
    assert sorted(p.name for p in ws.iterdir()) == ["TASK.md", "solution.py"]
    assert (ws / "solution.py").read_text() == (
        BUILTIN_DIR / "softmax/baseline/solution.py"
    ).read_text()
    assert main(["task", "init", "softmax", str(ws)]) == 2
    assert "not empty" in capsys.readouterr().err
    assert main(["task", "init", "softmax", str(ws), "--force"]) == 0


def test_judge_exit_codes_and_json() -> None:
    good = run_cli(
        "judge",
        "rmsnorm",
        str(BUILTIN_DIR / "rmsnorm/controls/optimized"),
        "--json",
        "--no-measure",
    )
    assert good.returncode == 0, good.stderr
    doc = json.loads(good.stdout)
    for key in (
        "schema_version",
        "task",
        "judge",
        "candidate",
        "runtime",
        "seed",
        "verdict",
        "checks",
        "reasons",
        "metrics",
    ):
        assert key in doc
    assert doc["verdict"] == "accepted"
    assert set(doc["task"]) >= {"id", "version", "sha256"}
    assert set(doc["judge"]) >= {"version", "sha256"}
    assert set(doc["candidate"]) >= {"sha256", "files"}
    assert set(doc["checks"][0]) >= {"name", "workload", "passed", "detail"}

    bad = run_cli("judge", "rmsnorm", str(BUILTIN_DIR / "rmsnorm/controls/zeros"), "--json")
    assert bad.returncode == 1
    doc = json.loads(bad.stdout)
    assert doc["verdict"] == "rejected" and doc["metrics"] is None
    assert any(r.startswith("out_of_tolerance") for r in doc["reasons"])


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (
            ["judge", "nope", "."],
            "unknown task 'nope'; known tasks: " + ", ".join(builtin_task_ids()),
        ),
        (["judge", "rmsnorm", "/no/such/dir"], "does not exist"),
        (["task", "show", "nope"], "known tasks"),
        (  # a format spec asked Python for a 100 GB string: a MemoryError traceback
            ["run", "--task", "rmsnorm", "--command", "echo {workspace:>99999999999}"],
            "bad placeholder '{workspace:>99999999999}'",
        ),
        (["run", "--task", "rmsnorm", "--command", "echo {trial_id!r}"], "bad placeholder"),
    ],
)
def test_bad_input_is_one_line_exit_2(args: list[str], message: str) -> None:
    proc = run_cli(*args)
    assert proc.returncode == 2
    assert message in proc.stderr
    assert "Traceback" not in proc.stderr + proc.stdout


def test_malformed_task_toml_exit_2(tmp_path: Path) -> None:
    (tmp_path / "task.toml").write_text('id = "x"\nversion = "1"\n')
    proc = run_cli("task", "show", str(tmp_path))
    assert proc.returncode == 2
    assert str(tmp_path / "task.toml") in proc.stderr
    assert "field 'version'" in proc.stderr
    assert "Traceback" not in proc.stderr


def test_qualify_cli() -> None:
    proc = run_cli("task", "qualify", "softmax", "--aa-budget-s", "3")
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "qualified" in proc.stdout
    if "no interval" in proc.stdout:  # an A/A without an interval is not evidence of quiet
        assert "says nothing about the noise" in " ".join(proc.stdout.split())


def test_an_interrupt_says_what_was_recorded(
    from_a_terminal: Callable[[list[str]], subprocess.Popen[str]],
) -> None:
    """Ctrl-C of a command that records nothing: exit 130 and a line saying so, no traceback."""
    optimized = BUILTIN_DIR / "rmsnorm" / "controls" / "optimized"
    proc = from_a_terminal([sys.executable, "-m", "optarena", "judge", "rmsnorm", str(optimized)])
    time.sleep(2.0)  # importing, then judging (a full judgement takes far longer)
    proc.send_signal(signal.SIGINT)
    out, err = proc.communicate(timeout=60)
    assert proc.returncode == 130
    assert "interrupted: nothing was recorded" in err
    assert "Traceback" not in out + err


def _task_copy(tmp_path: Path, old: str, new: str) -> Path:
    """rmsnorm's package with one edit to its task.toml."""
    root = tmp_path / "task"
    shutil.copytree(BUILTIN_DIR / "rmsnorm", root)
    toml = root / "task.toml"
    text = toml.read_text()
    assert old in text
    toml.write_text(text.replace(old, new, 1))
    return root


def test_bad_input_anywhere_is_one_line_and_exit_2(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    a_file = tmp_path / "a-file"
    a_file.write_text("")
    (tmp_path / "L" / "ledger.db").mkdir(parents=True)  # a database that cannot be opened
    optimized = str(BUILTIN_DIR / "rmsnorm" / "controls" / "optimized")
    big = _task_copy(tmp_path / "big", "shape = [16, 4096]", 'shape = "big"')
    bogus = _task_copy(tmp_path / "bogus", 'reason = "stale_output"', 'reason = "nope"')
    led = ["--ledger", str(tmp_path / "ok")]
    cases = [
        (["trials", "--ledger", str(a_file)], f"{a_file}: exists and is not a directory"),
        (["trials", "--ledger", str(tmp_path / "L")], str(tmp_path / "L")),
        (["judge", "rmsnorm", optimized, "--seed", "-5"], "'--seed'"),
        (["judge", str(big), optimized], "field 'workloads.0.params': workload 'decode'"),
        (["task", "show", str(bogus)], "unknown reason code 'nope'"),
        (["trials", "--verdict", "bogus", *led], "--verdict 'bogus': expected one of accepted"),
        (["trials", "--status", "bogus", *led], "--status 'bogus': expected one of completed"),
        (["run", "--task", "rmsnorm", "--agent", "replay", *led], "needs --agent-arg source="),
    ]
    for argv, message in cases:
        assert main(argv) == 2, argv
        captured = capsys.readouterr()
        err = " ".join((captured.err + captured.out).split())
        assert message in err, (argv, err)
        assert "Traceback" not in err and "__init__()" not in err


def test_an_import_failure_shows_the_candidates_end_of_the_traceback(tmp_path: Path) -> None:
    (tmp_path / "solution.py").write_text("def rmsnorm(x, weight, *, eps)\n    return x\n")
    proc = run_cli("judge", "rmsnorm", str(tmp_path))
    assert proc.returncode == 1
    assert "import_failed" in proc.stdout and "SyntaxError: expected ':'" in proc.stdout
    assert "solution.py" in proc.stdout
    assert "_loop.py" not in proc.stdout and "<frozen" not in proc.stdout  # the judge's frames


def test_brief_keeps_the_end_of_a_traceback_without_the_judges_frames() -> None:
    own = Path(optarena.__file__).resolve().parent / "judge" / "worker" / "_loop.py"
    tb = (
        "import_failed: Traceback (most recent call last):\n"
        f'  File "{own}", line 103, in op_load\n'
        "    spec.loader.exec_module(module)\n"
        '  File "<frozen importlib._bootstrap_external>", line 936, in exec_module\n'
        '  File "/w/cand/solution.py", line 3, in <module>\n'
        "    import helper\n"
        '  File "/w/cand/helper.py", line 1\n'
        "    x = (\n"
        "        ^\n"
        "SyntaxError: '(' was never closed\n"
    )
    out = brief(tb, 400)
    assert out.startswith("import_failed: ")
    assert out.endswith("SyntaxError: '(' was never closed")
    assert "solution.py" in out and "helper.py" in out
    assert "op_load" not in out and "<frozen" not in out
    short = brief(tb + "x" * 500, 200)  # too long: the end stays, the start goes
    assert short.startswith("import_failed: ...") and short.endswith("x" * 50)
    assert brief("plain detail") == "plain detail"


def test_version_and_help_wrapped_to_the_terminal() -> None:
    assert run_cli("--version").stdout.strip() == f"optarena {optarena.__version__}"
    env = {**os.environ, "COLUMNS": "80"}
    argv = [sys.executable, "-m", "optarena", "--help"]
    out = subprocess.run(argv, capture_output=True, text=True, timeout=60, env=env).stdout
    # the docstrings' own line breaks are gone: no sentence broken before its last word
    assert "accepted, 1 rejected, 2 bad input." in out, out
    assert "reference candidate and of a wrong control" in out, out
    assert not [line for line in out.splitlines() if line.strip(" │") == "input."]


def test_trials_json_lists_nothing_as_an_empty_list(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["trials", "--json", "--ledger", str(tmp_path / "L")]) == 0
    assert json.loads(capsys.readouterr().out) == []


def test_tasks_say_why_a_task_cannot_run_here(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """A task that needs a GPU (on a machine without one) is listed, marked not runnable, with
    the reason; the same reason is what the judge refuses with."""
    # private: monkeypatched (the GPU probe) where the loader and the command look it up
    import optarena.tasks._requirements as requirements
    from optarena.cli import _tasks
    from optarena.tasks import load_task

    root = tmp_path / "gpu-task"
    shutil.copytree(BUILTIN_DIR / "rmsnorm", root, ignore=shutil.ignore_patterns("__pycache__"))
    toml = root / "task.toml"
    toml.write_text(toml.read_text().replace('device = "cpu"', 'device = "cuda"'))
    monkeypatch.setattr(requirements, "cuda_available", lambda: False)
    monkeypatch.setattr(_tasks, "builtin_task_ids", lambda: ["rmsnorm"])
    monkeypatch.setattr(_tasks, "resolve_task", lambda _ref: load_task(root))
    assert main(["tasks", "--json"]) == 0
    (row,) = json.loads(capsys.readouterr().out)
    assert row["device"] == "cuda" and row["runnable"] is False
    assert row["unmet"] == [
        "needs a CUDA device: no NVIDIA GPU is visible (no /dev/nvidia0, no nvidia-smi)"
    ]
    assert main(["tasks"]) == 0
    table = capsys.readouterr().out  # cells wrap: look for the words
    assert "no:" in table and "CUDA" in table and "NVIDIA" in table
