"""The CLI through its real entry point: exit codes 0/1/2, JSON shape, no tracebacks."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from optarena.cli import main
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
    # Every built-in task is a CPU task this machine can run; a machine that could not says why.
    assert all(r["device"] == "cpu" and r["runnable"] and r["unmet"] == [] for r in rows)
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
    proc = run_cli("task", "qualify", "softmax")
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "qualified" in proc.stdout


def test_tasks_say_why_a_task_cannot_run_here(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """A task that needs a GPU (on a machine without one) is listed, marked not runnable, with
    the reason; the same reason is what the judge refuses with."""
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
    assert row["unmet"] == ["device 'cuda' required, but no NVIDIA GPU is visible"]
    assert main(["tasks"]) == 0
    table = capsys.readouterr().out  # cells wrap: look for the words
    assert "no:" in table and "'cuda'" in table and "NVIDIA" in table
