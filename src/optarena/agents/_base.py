"""The agent-runner interface: what every runner (claude, codex, command, replay) returns.

Unknown is None, never zero: a runner that cannot tell how many tokens were used leaves the
field None, and reports and sums treat None as unknown.
"""

from __future__ import annotations

import shutil
from abc import ABC, abstractmethod
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, ClassVar, Literal

from pydantic import BaseModel, ConfigDict, Field

from optarena.errors import AgentNotInstalledError, OptarenaError
from optarena.sandbox import AgentSandbox, AgentSandboxPolicy

if TYPE_CHECKING:
    from optarena.ledger import Ledger

AgentStatus = Literal["completed", "failed", "timeout", "budget_exceeded", "crashed"]


class Usage(BaseModel):
    """Tokens, cost and activity of one agent run. Every field None when unknown."""

    model_config = ConfigDict(extra="forbid")

    source: str = Field(
        default="unknown",
        description="where the numbers come from: agent-reported | metered | usage-file | unknown",
    )
    input_tokens: int | None = Field(default=None, description="uncached input tokens")
    output_tokens: int | None = Field(default=None, description="output tokens, reasoning incl.")
    cache_read_tokens: int | None = None
    cache_write_tokens: int | None = None
    reasoning_tokens: int | None = Field(default=None, description="part of output_tokens")
    cost_usd: float | None = None
    calls: int | None = Field(default=None, description="model API calls")
    turns: int | None = None
    tool_calls: dict[str, int] | None = Field(default=None, description="tool name -> count")
    models: dict[str, dict[str, Any]] | None = Field(default=None, description="per-model usage")


class AgentLimits(BaseModel):
    """What a run may spend. None means no limit of that kind."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    wall_s: float = Field(default=1800.0, gt=0, description="wall time; the tree is killed after")
    max_turns: int | None = Field(default=None, ge=1)
    max_cost_usd: float | None = Field(default=None, gt=0)
    max_tokens: int | None = Field(default=None, ge=1)
    max_calls: int | None = Field(default=None, ge=1)
    max_processes: int | None = Field(
        default=None,
        ge=8,
        description="processes and threads of the agent's whole tree at once (its sandbox's "
        "pids.max and RLIMIT_NPROC); None: the sandbox's default",
    )


class AgentOutcome(BaseModel):
    """How the agent's run ended. Separate from the judge's verdict on what it delivered."""

    model_config = ConfigDict(extra="forbid")

    status: AgentStatus
    exit_code: int | None = None
    logs: dict[str, str] = Field(default_factory=dict, description="log name -> file path")
    session_id: str | None = None
    usage: Usage = Field(default_factory=Usage)
    metered_usage: Usage | None = Field(
        default=None, description="measured by optarena's metering proxy; None: no proxy ran"
    )
    wall_s: float | None = None
    cpu_s: float | None = Field(default=None, description="the agent tree's CPU time, from the OS")
    detail: str = ""
    sandbox: dict[str, Any] | None = Field(
        default=None,
        description="containment measures active for the agent's processes (AgentSandbox "
        "report); None: the runner started no process in an agent sandbox",
    )
    extra: dict[str, Any] = Field(default_factory=dict)


@dataclass(frozen=True)
class SandboxSpec:
    """How the trial contains its agent; a runner adds what only it knows (its executable,
    its config home, the proxy's port) through `RunContext.agent_sandbox`."""

    policy: AgentSandboxPolicy = field(default_factory=AgentSandboxPolicy)
    hidden: tuple[Path, ...] = ()  # the ledger directory, other trials' workspaces
    home: Path | None = None  # the agent's private HOME, writable


@dataclass
class RunContext:
    """What the trial lifecycle tells a runner before `run`: which trial this is, where it
    records, and extra environment for the agent's processes.

    `env` is how a trial hook (e.g. a metering proxy started before the agent) reaches the
    agent: runners add it to the environment of every process they start. `ledger` lets a
    runner record per-call data (e.g. rows of an `api_calls` table) against `trial_id`.
    `sandbox` says how to contain the agent (None: not at all, as in a runner's unit test);
    `proxy_ports` are host loopback ports a hook opened for the agent (inside the sandbox's
    network namespace, nothing else on the host is reachable).
    """

    trial_id: str
    task_id: str
    workspace: Path
    logs_dir: Path
    env: dict[str, str] = field(default_factory=dict)
    ledger: Ledger | None = None
    data: dict[str, Any] = field(default_factory=dict)
    sandbox: SandboxSpec | None = None
    proxy_ports: list[int] = field(default_factory=list)

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

    context: RunContext | None = None

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

    def prepare(self, context: RunContext) -> None:
        """Called once before `run` with the trial's context; keep it for `run`."""
        self.context = context

    @abstractmethod
    def version(self) -> str | None:
        """The agent's own version string, or None when it cannot be known."""

    @abstractmethod
    def run(
        self, workspace: Path, prompt: str, limits: AgentLimits, logs_dir: Path
    ) -> AgentOutcome:
        """Work in `workspace` on `prompt`; write logs under `logs_dir`; never raise for the
        agent's own failures (they are an outcome), only for bad configuration."""


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
