"""Experiments as data: the plan a user writes (TOML, `ExperimentPlan`) and the comparison
`optarena experiment compare --json` prints and reports render (`ExperimentComparison`).
Loading, scheduling and the statistics are in `optarena.experiments`; only the shapes are here.
"""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict, Field, field_validator

PLAN_SCHEMA_VERSION = 1


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class ExperimentSection(_Strict):
    name: str = Field(min_length=1, description="the experiment's name, also its ledger tag")
    seed: int = Field(default=0, ge=0, description="trial order and per-trial seeds derive from it")
    repetitions: int = Field(ge=1, description="trials per (task, condition)")
    tasks: list[str] = Field(min_length=1, description="built-in ids or task directories")
    max_parallel: int = Field(default=1, ge=1, description="agents running at once")


class LimitsSection(_Strict):
    timeout_s: float = Field(default=1800.0, gt=0, description="agent wall time per trial")
    max_tokens: int | None = Field(default=None, ge=1)
    max_cost_usd: float | None = Field(default=None, gt=0)
    max_calls: int | None = Field(default=None, ge=1)


class JudgeSection(_Strict):
    measure: bool = True
    budget_s: float | None = Field(default=None, gt=0, description="measurement budget per trial")
    min_effect: float | None = Field(default=None, gt=0, lt=1)


class Condition(_Strict):
    name: str = Field(min_length=1)
    agent: str = Field(min_length=1, description="claude, codex, command, replay, module:Class")
    command: str | None = Field(default=None, description="the 'command' agent's template")
    agent_args: dict[str, str] = Field(default_factory=dict)
    env: dict[str, str] = Field(default_factory=dict, description="extra agent environment")
    artifacts: str = Field(default="", description="directory copied into the workspace")
    labels: dict[str, str] = Field(default_factory=dict)

    @field_validator("name")
    @classmethod
    def _name(cls, v: str) -> str:
        if not v.replace("-", "").replace("_", "").isalnum():
            raise ValueError("must be letters, digits, '-' or '_'")
        return v


class CompareSection(_Strict):
    baseline: str
    treatments: list[str] = Field(min_length=1)
    min_effect: float = Field(default=0.05, gt=0, lt=1)


class ExperimentPlan(_Strict):
    schema_version: int = PLAN_SCHEMA_VERSION
    experiment: ExperimentSection
    limits: LimitsSection = Field(default_factory=LimitsSection)
    judge: JudgeSection = Field(default_factory=JudgeSection)
    conditions: list[Condition] = Field(min_length=1)
    compare: CompareSection | None = None


COMPARISON_SCHEMA_VERSION = 2  # 2: metered and agent-reported tokens and cost apart


class TrialRow(BaseModel):
    """One trial as the comparison uses it."""

    trial_id: str
    task: str
    condition: str
    repetition: int
    agent_status: str | None
    verdict: str | None
    speedup: float | None = Field(description="baseline time / candidate time; None unmeasured")
    speed_verdict: str | None
    effective_speedup: float
    metered_tokens: int | None = Field(
        description="input + output tokens optarena's proxy measured; None: unknown or not metered"
    )
    metered_cost_usd: float | None = Field(description="None: unknown or not metered")
    reported_tokens: int | None = Field(
        description="input + output tokens the agent reported (unchecked); None: unknown"
    )
    reported_cost_usd: float | None = Field(description="the agent's own report, unchecked")
    agent_wall_s: float | None
    wall_s: float | None = Field(description="the whole trial, all phases")
    identity: str = Field(description="task, judge and runtime hashes: pairs must share it")


class Total(BaseModel):
    """A sum over trials that says how many trials' figure was unknown."""

    value: float | None = Field(description="sum over the known ones; None if none known")
    unknown: int


class ConditionSummary(BaseModel):
    name: str
    trials: int
    agent_status: dict[str, int]
    accepted: int
    correctness_rate: float | None
    correctness_ci: list[float] | None
    improved: int = Field(description="accepted and speed verdict 'improved'")
    improvement_rate: float | None
    improvement_ci: list[float] | None
    speedup_median: float | None = Field(description="accepted candidates' speed-ups")
    speedup_ci: list[float] | None
    effective_median: float | None
    effective_ci: list[float] | None
    best_of_k: list[float] = Field(description="expected best effective speed-up, k=1..n")
    metered_tokens: Total
    metered_cost_usd: Total
    reported_tokens: Total = Field(description="the agents' own reports, unchecked")
    reported_cost_usd: Total = Field(description="the agents' own reports, unchecked")
    agent_wall_s: Total
    wall_s: Total
    cost_per_accepted: float | None = Field(
        description="metered cost per accepted trial; None when any metered cost is unknown"
    )
    cost_per_log_speedup: float | None = Field(description="metered, as cost_per_accepted")


class TreatmentComparison(BaseModel):
    treatment: str
    baseline: str
    pairs: int
    drift_excluded: list[str] = Field(description="pair keys whose identities differ")
    log_speedup_diff: float | None
    log_speedup_ci: list[float] | None
    correctness_diff: float | None
    correctness_ci: list[float] | None
    verdict: str
    why: str


class ExperimentComparison(BaseModel):
    schema_version: int = COMPARISON_SCHEMA_VERSION
    experiment: str
    plan_sha256: str
    scheduled: int
    complete: int
    conditions: list[ConditionSummary]
    comparisons: list[TreatmentComparison]
    trials: list[TrialRow]
