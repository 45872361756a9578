"""What a harness run records (`run.json` in its directory), as versioned pydantic models.

Every phase of every iteration is a `PhaseRecord` with its time, tokens and cost (unknown stays
None); the attempt is also a trial in the ledger (`trial_id`), judged there. Reflection, build
and repair happen outside any trial and are charged to the run: `HarnessRun.totals` sums them
apart from the attempts. A run file is read through the records' migration steps; one newer
than this optarena is refused.
"""

from __future__ import annotations

from pathlib import Path
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

from optarena.harness._registry import load_versioned
from optarena.records import AgentLimits, Usage

RUN_SCHEMA_VERSION = 1
PhaseName = Literal["attempt", "reflect", "build", "repair"]
PhaseStatus = Literal["completed", "failed", "timeout", "budget_exceeded", "crashed", "skipped"]
RunStatus = Literal["running", "complete", "stopped", "interrupted"]


class _Model(BaseModel):
    model_config = ConfigDict(extra="forbid")


class PhaseRecord(_Model):
    phase: PhaseName
    status: PhaseStatus
    detail: str = ""
    session_id: str | None = Field(default=None, description="the agent session of the turn")
    wall_s: float | None = None
    cpu_s: float | None = None
    usage: Usage = Field(default_factory=Usage, description="as the agent reported it")
    metered_usage: Usage | None = Field(default=None, description="the metering proxy's")
    logs: dict[str, str] = Field(default_factory=dict, description="log name -> artifact sha")
    trial_id: str | None = Field(default=None, description="the attempt's trial in the ledger")

    @property
    def cost_usd(self) -> float | None:
        """The metered cost when a proxy ran, else the agent's own report (`cost_source`
        says which); None unknown."""
        return (self.metered_usage or self.usage).cost_usd

    @property
    def cost_source(self) -> str:
        """Whose figures `cost_usd` and `tokens` are: `metered`, or the agent's own report."""
        return (self.metered_usage or self.usage).source

    @property
    def tokens(self) -> int | None:
        """Every token processed; None unless input and output are both known."""
        return (self.metered_usage or self.usage).total_tokens()


class ArtifactRef(_Model):
    kind: str
    name: str
    sha256: str
    status: str
    report: str = ""


class RelayedCallCount(_Model):
    server: str
    tool: str
    calls: int
    errors: int


class IterationRecord(_Model):
    iteration: int
    trial_id: str | None = None
    started_from: str = Field(description="'baseline' or 'trial ID' (task state continue)")
    active: list[ArtifactRef] = Field(
        default_factory=list, description="artifacts activated for this iteration's attempt"
    )
    verdict: str | None = Field(default=None, description="the judge's; None: not judged")
    reason_codes: list[str] = Field(default_factory=list)
    speed_ratio: float | None = Field(default=None, description="candidate/baseline time")
    speed_verdict: str | None = None
    candidate_sha256: str | None = None
    claimed_files: list[str] = Field(
        default_factory=list,
        description="files outside the editable scope the agent wrote (e.g. a result.json "
        "claiming success): listed, never read as evidence",
    )
    tool_calls: list[RelayedCallCount] = Field(
        default_factory=list, description="the relays' telemetry of built MCP servers"
    )
    phases: list[PhaseRecord] = Field(default_factory=list)
    built: list[ArtifactRef] = Field(default_factory=list, description="qualified or not")
    error: str | None = Field(default=None, description="why the iteration stopped early")


class RunSettings(_Model):
    task: str
    agent: str
    agent_args: list[str] = Field(description="names of the --agent-arg options (values hidden)")
    iterations: int
    task_state: Literal["continue", "reset"]
    attempt: AgentLimits
    reflection_timeout_s: float
    build_timeout_s: float
    repair_attempts: int
    stop_when: str | None
    measure: bool
    budget_s: float | None
    final_build: bool = True


class PhaseTotal(_Model):
    phase: str
    count: int
    wall_s: float
    tokens: int | None = Field(description="None when any phase's tokens are unknown")
    cost_usd: float | None = Field(description="None when any phase's cost is unknown")
    unknown_cost: int = Field(description="how many phases have no known cost")
    cost_source: str = Field(description="metered, agent-reported, ... or mixed")


class HarnessRun(_Model):
    schema_version: int = RUN_SCHEMA_VERSION
    id: str
    created_at: str
    finished_at: str | None = None
    status: RunStatus = "running"
    stopped_because: str | None = None
    settings: RunSettings
    iterations: list[IterationRecord] = Field(default_factory=list)
    best_iteration: int | None = Field(default=None, description="the best judged candidate")
    best_dir: str | None = Field(default=None, description="where it was restored")
    error: str | None = None

    def totals(self) -> list[PhaseTotal]:
        """Time, tokens and cost per phase kind; reflection, build and repair are what the
        harness itself cost the run."""
        out = []
        for name in ("attempt", "reflect", "build", "repair"):
            ps = [p for it in self.iterations for p in it.phases if p.phase == name]
            costs = [p.cost_usd for p in ps]
            tokens = [p.tokens for p in ps]
            out.append(
                PhaseTotal(
                    phase=name,
                    count=len(ps),
                    wall_s=round(sum(p.wall_s or 0.0 for p in ps), 3),
                    tokens=None if None in tokens else sum(t or 0 for t in tokens),
                    cost_usd=None if None in costs else sum(c or 0.0 for c in costs),
                    unknown_cost=sum(c is None for c in costs),
                    cost_source=" and ".join(sorted({p.cost_source for p in ps})) or "-",
                )
            )
        return out


def load_run(path: Path) -> HarnessRun:
    return load_versioned(path, HarnessRun, "harness_run", RUN_SCHEMA_VERSION, "harness run")


def save_run(run: HarnessRun, path: Path) -> None:
    tmp = path.with_suffix(".tmp")
    tmp.write_text(run.model_dump_json(indent=1) + "\n")
    tmp.replace(path)
