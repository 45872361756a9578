"""What an agent run is given and what it returns: limits, usage, status, outcome.

Unknown is None, never zero: a runner that cannot tell how many tokens were used leaves the
field None, and reports and sums treat None as unknown.
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from optarena.records._calls import CallRecord

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
    tokens_at_least: int | None = Field(
        default=None,
        description="metered, when a count is unknown: every token the calls did report (a "
        "lower bound, never the count); None when the counts are known",
    )
    cost_usd_at_least: float | None = Field(
        default=None, description="metered, when the cost is unknown: a lower bound"
    )
    calls: int | None = Field(default=None, description="model API calls")
    turns: int | None = None
    tool_calls: dict[str, int] | None = Field(default=None, description="tool name -> count")
    models: dict[str, dict[str, Any]] | None = Field(default=None, description="per-model usage")

    def total_tokens(self) -> int | None:
        """Every token processed (input, cached or not, and output); None unless input and
        output are both known (a partial sum would be a small number passed off as the count)."""
        if self.input_tokens is None or self.output_tokens is None:
            return None
        cached = (self.cache_read_tokens or 0) + (self.cache_write_tokens or 0)
        return self.input_tokens + self.output_tokens + cached

    def cost_text(self, unknown: str = "?") -> str:
        """The cost as shown: `$0.0130`; unknown: `≥$0.0013` where a lower bound is known,
        else `unknown`."""
        if self.cost_usd is not None:
            return f"${self.cost_usd:.4f}"
        if self.cost_usd_at_least:
            return f"≥${self.cost_usd_at_least:.4f}"
        return unknown

    def tokens_text(self, unknown: str = "?") -> str:
        """Every token processed, as shown: `8200`; unknown: `≥1201`, else `unknown`."""
        total = self.total_tokens()
        if total is not None:
            return str(total)
        return f"≥{self.tokens_at_least}" if self.tokens_at_least else unknown


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
    calls: list[CallRecord] = Field(
        default_factory=list,
        description="every model call the trial's metering proxy saw, in arrival order "
        "(the ledger's `api_calls` rows of the trial); empty when no proxy ran",
    )
    extra: dict[str, Any] = Field(default_factory=dict)
