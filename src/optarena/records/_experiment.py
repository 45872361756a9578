"""Experiments as data: the plan a user writes (TOML, `ExperimentPlan`) and the comparison
`optarena experiment compare --json` prints and reports render (`ExperimentComparison`).
Loading, scheduling and the statistics are in `optarena.experiments`; only the shapes are here.
"""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator

PLAN_SCHEMA_VERSION = 1
MAX_REPETITIONS = 10_000
MAX_TRIALS = 100_000  # tasks x conditions x repetitions: a schedule is built whole, in memory


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class ExperimentSection(_Strict):
    name: str = Field(min_length=1, description="the experiment's name, also its ledger tag")
    seed: int = Field(default=0, ge=0, description="trial order and per-trial seeds derive from it")
    repetitions: int = Field(
        ge=1, le=MAX_REPETITIONS, strict=True, description="trials per (task, condition)"
    )
    tasks: list[str] = Field(min_length=1, description="built-in ids or task directories")
    max_parallel: int = Field(default=1, ge=1, le=256, description="agents running at once")
    executor: Literal["local", "ray"] = Field(
        default="local",
        description="where trials run: this machine's process pool, or a Ray cluster "
        "(`--executor` overrides it); how trials run, never what they are: no trial's identity "
        "depends on it",
    )
    retries: int = Field(
        default=2,
        ge=0,
        le=10,
        strict=True,
        description="how often a trial that ended without a result (optarena's process raised "
        "or died during it) runs again; after that its key counts as a failure",
    )


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


COMPARISON_SCHEMA_VERSION = 3  # 2: metered and agent-reported apart; 3: failed and pending keys


class TrialRow(BaseModel):
    """One scheduled key as the comparison uses it: its complete trial, or its failure."""

    trial_id: str = Field(description="the complete trial; for a failed key its last attempt")
    task: str
    condition: str
    repetition: int
    outcome: Literal["complete", "failed"] = Field(
        description="failed: no trial of the key completed after its retries (counted as a "
        "failure: not accepted, effective speed-up 1.0)"
    )
    attempts: int = Field(description="trials recorded for the key, interrupted ones included")
    agent_status: str | None
    verdict: str | None
    speedup: float | None = Field(description="baseline time / candidate time; None unmeasured")
    speed_verdict: str | None
    effective_speedup: float
    metered_tokens: int | None = Field(
        description="input + output tokens optarena's proxy measured, over every attempt of "
        "the key; None: unknown or not metered for any of them"
    )
    metered_cost_usd: float | None = Field(
        description="over every attempt; None: unknown or not metered for any"
    )
    reported_tokens: int | None = Field(
        description="input + output tokens the agent reported (unchecked), every attempt; "
        "None: unknown for any"
    )
    reported_cost_usd: float | None = Field(description="the agent's own reports, unchecked")
    agent_wall_s: float | None
    wall_s: float | None = Field(description="the whole trial, all phases")
    identity: str = Field(description="task, judge and runtime hashes: pairs must share it")


class Total(BaseModel):
    """A sum over trials that says how many trials' figure was unknown."""

    value: float | None = Field(description="sum over the known ones; None if none known")
    unknown: int


class ConditionSummary(BaseModel):
    name: str
    task: str | None = Field(default=None, description="set in `by_task`: one task's trials")
    trials: int = Field(description="keys with an outcome: complete or failed")
    failed: int = Field(description="keys without a complete trial after their retries")
    pending: int = Field(description="keys not yet run to an outcome")
    speed_measured: bool = Field(
        default=True, description="false for a correctness-only plan: every speed figure is null"
    )
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
    verdict: str = Field(
        description="better, worse, no_difference or undecided (why says which reason); "
        "not_measured for a correctness-only plan"
    )
    why: str


class ExperimentComparison(BaseModel):
    schema_version: int = COMPARISON_SCHEMA_VERSION
    experiment: str
    plan_sha256: str
    scheduled: int
    complete: int
    failed: int = Field(description="keys counted as failures: no trial completed")
    pending: list[str] = Field(
        description="keys without an outcome yet: the experiment is incomplete, and no "
        "treatment touching them gets a verdict"
    )
    speed_measured: bool = Field(default=True, description="false: [judge] measure = false")
    interrupted: list[str] = Field(
        default_factory=list,
        description="every attempt that ended interrupted: 'trial id (key): error', so none "
        "goes unmentioned (its key ran again, or failed)",
    )
    conditions: list[ConditionSummary]
    by_task: list[ConditionSummary] = Field(
        default_factory=list, description="per task and condition (`task` set): nothing pooled"
    )
    comparisons: list[TreatmentComparison]
    trials: list[TrialRow]
