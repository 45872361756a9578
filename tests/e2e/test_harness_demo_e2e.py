"""`optarena harness run --demo`: the loop offline in one command, with the pinned Claude Code
against the scripted model server (HarnessGym's users smoke-test this way); without the CLI, a
message naming the install command. (`harness run --agent replay|command` was refused with
"cannot resume" and no offline path.)"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from optarena.cli import main

pytestmark = [pytest.mark.e2e, pytest.mark.slow]


def test_the_demo_runs_the_loop_offline(
    agent_bins: dict[str, str],
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    monkeypatch.setenv("PATH", f"{Path(agent_bins['claude']).parent}:{os.environ['PATH']}")
    monkeypatch.delenv("ANTHROPIC_API_KEY")  # none needed: the scripted server answers
    ledger = tmp_path / "ledger"
    assert main(["harness", "run", "--demo", "--ledger", str(ledger)]) == 0
    out = capsys.readouterr().out
    assert "2 of 2 iteration(s)" in out and "status complete" in out
    assert "verdict rejected out_of_tolerance" in out  # the first attempt: wrong, claimed
    assert "ignored (never evidence): result.json" in out
    assert "qualified   skill rmsnorm-one-pass" in out and "active: skill:rmsnorm-one-pass" in out
    assert "verdict accepted" in out


def test_without_the_cli_the_demo_names_the_install_command(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv("OPTARENA_NPM_CACHE", str(tmp_path / "empty-cache"))
    monkeypatch.setenv("PATH", "/usr/bin:/bin")
    assert main(["harness", "run", "--demo", "--ledger", str(tmp_path / "l")]) == 2
    err = capsys.readouterr().err
    assert "npm install --prefix" in err and "@anthropic-ai/claude-code@" in err


def test_an_agent_that_cannot_resume_is_pointed_to_the_demo(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    argv = ["harness", "run", "--task", "rmsnorm", "--agent", "command", "--ledger", str(tmp_path)]
    assert main(argv) == 2
    assert "optarena harness run --demo" in capsys.readouterr().err
