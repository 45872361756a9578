"""Bad input is refused before anything is recorded; workspaces are never clobbered blindly."""

from __future__ import annotations

import subprocess
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from optarena.errors import AgentNotInstalledError, OptarenaError, UnknownNameError
from optarena.ledger import Ledger
from optarena.records import AgentLimits, TrialRecord
from optarena.tasks import Task
from optarena.trials import TrialConfig, run_trial


def _config(task: Task, command: str = "true", **kw: Any) -> TrialConfig:
    return TrialConfig(
        task=task, agent="command", agent_args={"command": command}, measure=False, **kw
    )


def test_unknown_agent_and_missing_binary_record_nothing(ledger: Ledger, rmsnorm: Task) -> None:
    with pytest.raises(UnknownNameError, match="known agents: claude, codex, command, replay"):
        run_trial(TrialConfig(task=rmsnorm, agent="nope"), ledger)
    with pytest.raises(AgentNotInstalledError, match="not-an-installed-agent"):
        run_trial(_config(rmsnorm, "not-an-installed-agent --go"), ledger)
    assert ledger.trials() == []


def test_a_non_empty_workspace_needs_overwrite(
    ledger: Ledger, rmsnorm: Task, tmp_path: Path, trial: Callable[..., TrialRecord]
) -> None:
    ws = tmp_path / "ws"
    ws.mkdir()
    (ws / "precious.txt").write_text("keep me")
    with pytest.raises(OptarenaError, match="not empty; pass --overwrite"):
        run_trial(_config(rmsnorm, workspace=ws), ledger)
    assert (ws / "precious.txt").read_text() == "keep me"
    assert ledger.trials() == []
    rec = trial("true", workspace=ws, overwrite=True)
    assert rec.workspace == str(ws.absolute()) and not (ws / "precious.txt").exists()
    again = trial("true", workspace=ws, overwrite=True)  # our own workspace: fine to reuse
    assert again.id != rec.id and len(ledger.trials()) == 2


def test_overwrite_never_clears_a_foreign_repo_or_the_current_directory(
    ledger: Ledger, rmsnorm: Task, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    repo = tmp_path / "project"
    repo.mkdir()
    subprocess.run(["git", "init", "-q", str(repo)], check=True)
    (repo / "main.py").write_text("x")
    with pytest.raises(OptarenaError, match="git repository optarena did not create"):
        run_trial(_config(rmsnorm, workspace=repo, overwrite=True), ledger)
    monkeypatch.chdir(repo / ".git")
    with pytest.raises(OptarenaError, match="it contains"):
        run_trial(_config(rmsnorm, workspace=repo, overwrite=True), ledger)
    assert (repo / "main.py").exists() and ledger.trials() == []


def test_a_file_as_workspace_is_refused(ledger: Ledger, rmsnorm: Task, tmp_path: Path) -> None:
    f = tmp_path / "file"
    f.write_text("x")
    with pytest.raises(OptarenaError, match="not a directory"):
        run_trial(_config(rmsnorm, workspace=f, limits=AgentLimits(wall_s=5)), ledger)
