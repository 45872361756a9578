"""The lazy runner registry: names, `module:Class`, missing modules and binaries."""

from __future__ import annotations

from pathlib import Path

import pytest

from optarena.agents import AgentRunner, create_runner, known_runners, runner_class, runner_ref
from optarena.agents.command import CommandRunner
from optarena.agents.replay import ReplayRunner
from optarena.errors import AgentNotInstalledError, OptarenaError, UnknownNameError
from optarena.records import AgentLimits, AgentOutcome


class EchoRunner(AgentRunner):
    """A user's own runner, found by `module:Class`."""

    name = "echo"
    binary = "definitely-not-installed-optarena-agent"
    install_hint = "pip install echo-agent"

    def __init__(self, greeting: str = "hi") -> None:
        self.greeting = greeting

    def version(self) -> str | None:
        return "1.0"

    def run(
        self, workspace: Path, prompt: str, limits: AgentLimits, logs_dir: Path
    ) -> AgentOutcome:
        return AgentOutcome(status="completed", detail=self.greeting)


def test_builtin_names_resolve_lazily() -> None:
    assert {"claude", "codex", "command", "replay"} <= set(known_runners())
    assert runner_class("command") is CommandRunner
    assert runner_class("replay") is ReplayRunner
    assert runner_ref(CommandRunner) == "optarena.agents.command:CommandRunner"


def test_unknown_name_lists_the_known_ones() -> None:
    with pytest.raises(UnknownNameError) as e:
        runner_class("gpt-agent")
    assert "unknown agent 'gpt-agent'" in str(e.value)
    for name in ("claude", "codex", "command", "replay"):
        assert name in str(e.value)


def test_module_class_reference_and_agent_args() -> None:
    ref = f"{__name__}:EchoRunner"
    runner = create_runner(ref, {"greeting": "hello"})
    assert isinstance(runner, EchoRunner) and runner.greeting == "hello"
    with pytest.raises(OptarenaError, match=r"unknown --agent-arg colour \(known: greeting"):
        create_runner(ref, {"colour": "red"})


def test_bad_module_class_references() -> None:
    with pytest.raises(OptarenaError, match="not available"):
        runner_class("no_such_pkg.agent:Runner")
    with pytest.raises(OptarenaError, match="not an AgentRunner"):
        runner_class("pathlib:Path")


def test_a_missing_binary_names_it_and_how_to_install() -> None:
    with pytest.raises(AgentNotInstalledError) as e:
        EchoRunner().check_available()
    msg = str(e.value)
    assert "definitely-not-installed-optarena-agent" in msg
    assert "pip install echo-agent" in msg


def test_replay_is_labelled_not_an_agent(tmp_path: Path) -> None:
    runner = create_runner("replay", {"source": str(tmp_path)})
    assert runner.is_agent is False
    assert runner.label == "replay (not an agent)"
    assert CommandRunner("true").label == "command"
