"""Runners by name, imported lazily so one runner's optional dependencies never burden another.

A name is either a registered one (`optarena agents` lists them) or a user's own
`package.module:Class`, a subclass of `AgentRunner`.
"""

from __future__ import annotations

import importlib
from collections.abc import Mapping

from optarena.agents._base import AgentRunner
from optarena.errors import OptarenaError, UnknownNameError

RUNNERS: dict[str, str] = {
    "claude": "optarena.agents.claude:ClaudeRunner",
    "codex": "optarena.agents.codex:CodexRunner",
    "command": "optarena.agents.command:CommandRunner",
    "replay": "optarena.agents.replay:ReplayRunner",
}


def known_runners() -> list[str]:
    return sorted(RUNNERS)


def _import(ref: str, shown: str) -> type[AgentRunner]:
    module_name, _, attr = ref.partition(":")
    try:
        module = importlib.import_module(module_name)
    except ModuleNotFoundError as e:
        if e.name is not None and module_name.startswith(e.name):
            raise OptarenaError(
                f"agent '{shown}': module '{module_name}' is not available in this installation"
            ) from None
        raise OptarenaError(f"agent '{shown}': importing {module_name} failed: {e}") from None
    cls = getattr(module, attr, None)
    if not (isinstance(cls, type) and issubclass(cls, AgentRunner)):
        raise OptarenaError(f"agent '{shown}': {ref} is not an AgentRunner subclass")
    return cls


def runner_class(name: str) -> type[AgentRunner]:
    """The runner class for a registered name or a `module:Class` reference."""
    if name in RUNNERS:
        return _import(RUNNERS[name], name)
    if ":" in name:
        return _import(name, name)
    raise UnknownNameError("agent", name, known_runners())


def runner_ref(cls: type[AgentRunner]) -> str:
    """`module:Class` of a runner class, as the ledger records it."""
    return f"{cls.__module__}:{cls.__qualname__}"


def mcp_runners() -> list[str]:
    """The registered runners whose agents take MCP servers (`AgentRunner.takes_mcp`)."""
    return [name for name in known_runners() if runner_class(name).takes_mcp]


def skill_dirs() -> list[str]:
    """Where the registered runners' agents discover skills (`AgentRunner.skills_dir`,
    relative to the workspace), each once, in the order of the runners' names."""
    out: list[str] = []
    for name in known_runners():
        where = runner_class(name).skills_dir
        if where is not None and where not in out:
            out.append(where)
    return out


def create_runner(name: str, args: Mapping[str, str] | None = None) -> AgentRunner:
    """Build a runner from its name and `--agent-arg key=value` pairs."""
    return runner_class(name).from_args(dict(args or {}))
