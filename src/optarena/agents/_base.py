"""The agent-runner interface: what every runner (claude, codex, command, replay) returns.

Unknown is None, never zero: a runner that cannot tell how many tokens were used leaves the
field None, and reports and sums treat None as unknown.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from pathlib import Path
from typing import Any, ClassVar, Literal

from pydantic import BaseModel, ConfigDict, Field

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


class AgentOutcome(BaseModel):
    """How the agent's run ended. Separate from the judge's verdict on what it delivered."""

    model_config = ConfigDict(extra="forbid")

    status: AgentStatus
    exit_code: int | None = None
    logs: dict[str, str] = Field(default_factory=dict, description="log name -> file path")
    session_id: str | None = None
    usage: Usage = Field(default_factory=Usage)
    wall_s: float | None = None
    cpu_s: float | None = Field(default=None, description="the agent tree's CPU time, from the OS")
    detail: str = ""
    extra: dict[str, Any] = Field(default_factory=dict)


class AgentRunner(ABC):
    """Runs one agent once in a prepared workspace. Constructed with its own frozen options."""

    name: ClassVar[str]
    is_agent: ClassVar[bool] = True  # False only for replay, which is not an agent

    @abstractmethod
    def version(self) -> str | None:
        """The agent's own version string, or None when it cannot be known."""

    @abstractmethod
    def run(
        self, workspace: Path, prompt: str, limits: AgentLimits, logs_dir: Path
    ) -> AgentOutcome:
        """Work in `workspace` on `prompt`; write logs under `logs_dir`; never raise for the
        agent's own failures (they are an outcome), only for bad configuration."""
