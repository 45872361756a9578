"""The agent-runner interface every runner (claude, codex, command, replay) implements.

One protocol: `run(context, prompt, limits) -> AgentOutcome`. The context is immutable and
says everything about the trial a runner may use: its paths (`TrialPaths`), extra environment,
how to contain the agent, and the trial's metering proxy. A runner never writes the ledger; it
returns what it knows and the trial records it. What runners are given and return
(`AgentLimits`, `AgentOutcome`, ...) are records (`optarena.records`).

Metering is one mechanism for every runner (`optarena.agents.run_metered`): a runner that
talks to a model API says where its calls should go (`upstream`), the trial starts the proxy,
and the runner points the agent at `context.proxy_url`.

Tools are declared capabilities: a runner whose agent takes MCP servers says how in its own
terms (`takes_mcp`, `mcp_args`: the servers as `--agent-arg` options), and one whose agent
discovers skills as files says where (`skills_dir`). Hooks and commands that offer tools ask
the runner class, never the agent's name; a runner that declares neither refuses them.
"""

from __future__ import annotations

import shutil
from abc import ABC, abstractmethod
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from types import MappingProxyType
from typing import Any, ClassVar

from optarena.errors import AgentNotInstalledError, OptarenaError
from optarena.proxy import Upstreams
from optarena.records import AgentLimits, AgentOutcome, TrialPaths, Usage
from optarena.sandbox import AgentSandbox, AgentSandboxPolicy


@dataclass(frozen=True)
class McpServer:
    """An MCP server offered to an agent: its name, the command the agent's CLI starts (the
    relay to a `RelayHost`), the tools the agent may call (allowed by name) and how long one
    call may take."""

    name: str
    command: tuple[str, ...]
    tools: tuple[str, ...]
    tool_timeout_s: float


@dataclass(frozen=True)
class SandboxSpec:
    """How the trial contains its agent; a runner adds what only it knows (its executable,
    its config home, the proxy's port) through `RunContext.agent_sandbox`."""

    policy: AgentSandboxPolicy = field(default_factory=AgentSandboxPolicy)
    hidden: tuple[Path, ...] = ()  # the ledger directory, other trials' workspaces
    home: Path | None = None  # the agent's private HOME, writable


@dataclass(frozen=True)
class RunContext:
    """What the trial tells a runner for one `run`: which trial, where its files go, extra
    environment for the agent's processes, how to contain them, and the metering proxy.

    `env` is how a trial hook (started before the agent) reaches it: runners add it to the
    environment of every process they start. `sandbox` says how to contain the agent (None:
    not at all, as in a runner's unit test). `proxy_url` is the trial's metering proxy (None:
    no proxy runs); `proxy_ports` are host loopback ports opened for the agent (inside the
    sandbox's network namespace nothing else on the host is reachable). `metered` reads what
    the proxy has metered so far (a runner that prices its own report uses it).

    `resume` is an agent session to continue instead of starting a fresh one (a follow-up
    turn, e.g. the harness loop's reflection after an attempt): the session id the runner
    returned (`AgentOutcome.session_id`), with the same `paths` (workspace and config home) as
    the run that made it. Only a runner with `can_resume` accepts one.
    """

    trial_id: str
    task_id: str
    paths: TrialPaths
    env: Mapping[str, str] = field(default_factory=dict)
    sandbox: SandboxSpec | None = None
    proxy_url: str | None = None
    proxy_ports: tuple[int, ...] = ()
    metered: Callable[[], Usage] | None = None
    resume: str | None = None

    def __post_init__(self) -> None:
        object.__setattr__(self, "env", MappingProxyType(dict(self.env)))
        object.__setattr__(self, "proxy_ports", tuple(self.proxy_ports))

    @classmethod
    def bare(cls, workspace: Path, logs: Path, trial_id: str = "", task_id: str = "") -> RunContext:
        """A context outside any trial (a runner's unit test, a one-off run): no sandbox, no
        proxy; the work directory is the parent of `logs`."""
        work = logs.parent
        paths = TrialPaths(
            work=work,
            workspace=workspace,
            logs=logs,
            home=work / "home",
            candidate=work / "candidate",
            shadow=work / "shadow.git",
        )
        return cls(trial_id, task_id, paths)

    @property
    def workspace(self) -> Path:
        return self.paths.workspace

    @property
    def logs_dir(self) -> Path:
        return self.paths.logs

    def agent_sandbox(
        self,
        writable: list[Path],
        readable: list[Path] | None = None,
        ports: list[int] | None = None,
    ) -> AgentSandbox | None:
        """The sandbox for one agent process: `writable` (the workspace first) plus the
        private home; None when the trial runs the agent uncontained."""
        spec = self.sandbox
        if spec is None or not spec.policy.enabled:
            return None
        dirs = [*writable, *([spec.home] if spec.home else [])]
        for d in dirs:
            d.mkdir(parents=True, exist_ok=True)
        return AgentSandbox(
            spec.policy,
            writable=dirs,
            readable=readable or [],
            hidden=spec.hidden,
            ports=[*(ports or []), *self.proxy_ports],
            home=spec.home,
        )


class AgentRunner(ABC):
    """Runs one agent once in a prepared workspace. Constructed with its own frozen options."""

    name: ClassVar[str]
    is_agent: ClassVar[bool] = True  # False only for replay, which is not an agent
    binary: ClassVar[str | None] = None  # the executable the runner needs on PATH, if any
    install_hint: ClassVar[str | None] = None  # how to install `binary`, shown when missing
    can_resume: ClassVar[bool] = False  # continues a session given as `RunContext.resume`
    takes_mcp: ClassVar[bool] = False  # offers MCP servers to its agent (`mcp_args`)
    # where its agent discovers skills (a directory per skill), relative to the workspace;
    # None: it takes none
    skills_dir: ClassVar[str | None] = None

    @classmethod
    def from_args(cls, args: Mapping[str, str]) -> AgentRunner:
        """Build from `--agent-arg key=value` pairs; runners with typed options override."""
        try:
            return cls(**dict(args))
        except TypeError as e:
            raise OptarenaError(f"agent '{cls.name}': {_arg_problem(cls, args, e)}") from None

    @property
    def label(self) -> str:
        """How records name this runner; a replay says it is not an agent."""
        return self.name if self.is_agent else f"{self.name} (not an agent)"

    @classmethod
    def mcp_args(cls, servers: Sequence[McpServer], given: Mapping[str, str]) -> dict[str, str]:
        """`given` (`--agent-arg` pairs) with `servers` offered to the agent in its CLI's own
        options, each server's tools allowed by name; what the user gave is kept, merged where
        the option holds many. Only a runner with `takes_mcp` offers any; the rest refuse."""
        raise OptarenaError(f"agent '{cls.name}' takes no MCP servers")

    def check_available(self) -> None:
        """Raise AgentNotInstalledError when the runner's executable is missing."""
        if self.binary and shutil.which(self.binary) is None:
            raise AgentNotInstalledError(self.name, self.binary, self.install_hint)

    def model(self) -> str | None:
        """The model the agent is told to use, or None when it is the agent's default."""
        return None

    def flags(self) -> dict[str, Any]:
        """The options this runner was built with, as recorded in the ledger."""
        return {}

    def upstream(self, env: Mapping[str, str]) -> Upstreams | None:
        """Where the metering proxy forwards this runner's model calls: one base URL, or one
        per provider (`env`: the agent's environment before the proxy); None: no proxy (the
        runner calls no model, or metering was turned off). Default: None."""
        return None

    @abstractmethod
    def version(self) -> str | None:
        """The agent's own version string, or None when it cannot be known."""

    @abstractmethod
    def run(self, context: RunContext, prompt: str, limits: AgentLimits) -> AgentOutcome:
        """Work in `context.workspace` on `prompt`; write logs under `context.logs_dir`; never
        raise for the agent's own failures (they are an outcome), only for bad configuration."""


def _arg_problem(cls: type, args: Mapping[str, str], error: TypeError) -> str:
    """What is wrong with `--agent-arg`s, in the CLI's words (not the constructor's)."""
    import inspect

    try:
        params = inspect.signature(cls).parameters.values()
    except (TypeError, ValueError):
        return f"bad --agent-arg ({error})"
    named = [p for p in params if p.kind in (p.POSITIONAL_OR_KEYWORD, p.KEYWORD_ONLY)]
    missing = [p.name for p in named if p.default is p.empty and p.name not in args]
    if missing:
        return "needs " + ", ".join(f"--agent-arg {m}=..." for m in missing)
    unknown = sorted(set(args) - {p.name for p in named})
    if unknown and not any(p.kind == p.VAR_KEYWORD for p in params):
        known = ", ".join(p.name for p in named) or "none"
        return f"unknown --agent-arg {', '.join(unknown)} (known: {known})"
    return f"bad --agent-arg ({error})"
