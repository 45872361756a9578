"""The CLI through its real entry point: exit codes 0/1/2, JSON shape, no tracebacks."""

from __future__ import annotations

import json
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
