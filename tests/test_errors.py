"""Errors by cause: bad input, a broken task package, a missing prerequisite; each typed, each
one line on stderr with exit code 2 from the CLI, never a traceback."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest

from optarena.cli import main
from optarena.errors import (
    AgentNotInstalledError,
    LedgerError,
    MissingPrerequisiteError,
    OptarenaError,
    RecordError,
    TaskPackageError,
)
from optarena.judge import JudgeOptions, judge
from optarena.ledger import Ledger
from optarena.tasks import Task, load_task
from optarena.trials import TrialConfig, run_trial


def test_each_cause_is_its_own_type() -> None:
    assert issubclass(AgentNotInstalledError, MissingPrerequisiteError)
    assert issubclass(RecordError, LedgerError)
    for cls in (MissingPrerequisiteError, TaskPackageError, LedgerError):
        assert issubclass(cls, OptarenaError)
    assert not issubclass(TaskPackageError, MissingPrerequisiteError)


def _needs_numpy_999(task_copy: Callable[..., Task]) -> Task:
    task = task_copy("rmsnorm")
    toml = task.root / "task.toml"
    text = toml.read_text()
    assert 'packages = ["numpy>=1.26"]' in text
    toml.write_text(text.replace('packages = ["numpy>=1.26"]', 'packages = ["numpy>=999"]'))
    return load_task(task.root)


def test_an_unmet_requirement_is_a_missing_prerequisite_and_records_nothing(
    task_copy: Callable[..., Task], tmp_path: Path
) -> None:
    task = _needs_numpy_999(task_copy)
    with Ledger(tmp_path / "L") as ledger:
        config = TrialConfig(task=task, agent="command", agent_args={"command": "true"})
        with pytest.raises(MissingPrerequisiteError, match=r"cannot run here: .*numpy>=999"):
            run_trial(config, ledger)
        assert ledger.trials() == []
    with pytest.raises(MissingPrerequisiteError, match="cannot be judged on this machine"):
        judge(task, task.baseline_dir, JudgeOptions(measure=False))


def test_the_cli_prints_one_line_and_exits_2(
    task_copy: Callable[..., Task], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    task = _needs_numpy_999(task_copy)
    args = ["run", "--task", str(task.root), "--command", "true", "--ledger", str(tmp_path / "L")]
    assert main(args) == 2
    err = capsys.readouterr().err
    assert err.startswith("error: task rmsnorm cannot run here") and "Traceback" not in err
    missing = ["run", "--task", "rmsnorm", "--command", "no-such-agent-binary-x"]
    assert main([*missing, "--ledger", str(tmp_path / "L")]) == 2
    assert "needs 'no-such-agent-binary-x'" in capsys.readouterr().err


def test_a_baseline_that_fails_while_timed_is_the_task_packages_fault(
    task_copy: Callable[..., Task],
) -> None:
    task = task_copy("rmsnorm")
    good = task.root / "controls" / "optimized"
    (task.baseline_dir / "solution.py").write_text(
        "def rmsnorm(*args, **kwargs):\n    raise RuntimeError('broken baseline')\n"
    )
    with pytest.raises(TaskPackageError, match="the baseline went wrong while being timed"):
        judge(task, good, JudgeOptions(measure=True, budget_s=5.0))
