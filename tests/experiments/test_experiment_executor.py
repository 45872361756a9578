"""Where trials run is not what they are: `[experiment] executor` and `--executor` are recorded
in the lock's run record, outside every trial's identity; a cluster option given to the local
executor, an unknown executor and a missing Ray are bad input (exit 2, one line)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from optarena.cli import main
from optarena.experiments import drift, freeze, load_plan, lock_path, plan_identity

PLAN = """
[experiment]
name = "where"
repetitions = 1
tasks = ["rmsnorm"]
{executor}
[judge]
measure = false

[[conditions]]
name = "a"
agent = "command"
command = "true"
"""


def _plan(tmp_path: Path, executor: str | None = None) -> Path:
    path = tmp_path / "plan.toml"
    line = "" if executor is None else f'executor = "{executor}"\n'
    path.write_text(PLAN.format(executor=line))
    return path


def test_the_executor_is_in_the_lock_run_record_not_in_any_identity(tmp_path: Path) -> None:
    local = load_plan(_plan(tmp_path))
    lock = json.loads(freeze(local).read_text())
    assert lock["run"] == {"executor": "local"}
    assert "executor" not in lock["plan"]["experiment"]
    cells = plan_identity(local).cells
    (tmp_path / "ray").mkdir()
    on_ray = load_plan(_plan(tmp_path / "ray", "ray"))
    assert plan_identity(on_ray).cells == cells  # same trials, wherever they run
    assert json.loads(freeze(on_ray).read_text())["run"] == {"executor": "ray"}


def test_changing_the_executor_is_named_as_such_and_a_lock_before_it_runs_locally(
    tmp_path: Path,
) -> None:
    path = _plan(tmp_path)
    freeze(load_plan(path))
    lock = json.loads(lock_path(path).read_text())
    del lock["run"]  # a lock written before the run record existed
    lock_path(path).write_text(json.dumps(lock))
    assert drift(load_plan(path)) == []
    _plan(tmp_path, "ray")
    assert drift(load_plan(path)) == ["run.executor: local -> ray"]


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--ray-address", "127.0.0.1:6379"], "--ray-address: only for --executor ray"),
        (["--agent-cpus", "2", "--judge-nodes", "shared"], "--judge-nodes, --agent-cpus: only"),
        (["--executor", "slurm"], "--executor slurm: expected local or ray"),
        (["--executor", "ray", "--judge-nodes", "all"], "--judge-nodes all: expected dedicated"),
    ],
)
def test_executor_options_that_do_not_fit_are_refused(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], args: list[str], message: str
) -> None:
    path = _plan(tmp_path)
    freeze(load_plan(path))
    assert main(["experiment", "run", str(path), *args]) == 2
    err = capsys.readouterr().err
    assert message in err and "Traceback" not in err
    assert not (tmp_path / "ledger").exists()


def test_without_ray_the_ray_executor_says_how_to_install_it(tmp_path: Path) -> None:
    path = _plan(tmp_path)
    freeze(load_plan(path))
    blocked = (
        "import sys; sys.modules['ray'] = None; from optarena.cli import main; "
        "sys.exit(main(sys.argv[1:]))"
    )
    done = subprocess.run(
        [sys.executable, "-c", blocked, "experiment", "run", str(path), "--executor", "ray",
         "--ledger", str(tmp_path / "ledger")],
        capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    assert done.returncode == 2
    lines = [line for line in done.stderr.splitlines() if line.strip()]
    assert len(lines) == 1 and "pip install 'optarena[ray]'" in lines[0], done.stderr
    assert not (tmp_path / "ledger").exists()
