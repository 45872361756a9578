"""What the ledger stores about a trial, as versioned pydantic models (the JSON in
`trials.record` and `judgements.record`; `optarena trial show --json` prints them). Read older
versions through `optarena.records.load_trial` / `load_judgement`, which migrate them.

A `TrialRecord` is written twice: once when the trial starts (state `running`, identity only)
and once, in a single transaction, when it ends (`complete` with everything, or `interrupted`
with the start record plus the error). It is never changed after that.
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from optarena.records._agent import AgentLimits, AgentStatus, Usage
from optarena.records._metrics import AnyMetrics

TRIAL_RECORD_VERSION = 3  # 2: metrics typed (`AnyMetrics`); 3: usage lower bounds

TrialState = Literal["running", "complete", "interrupted"]
TrialVerdict = Literal["accepted", "rejected", "unverified"]  # unverified: external, no gate
ChangeKind = Literal["added", "modified", "deleted", "type_changed"]
JudgementKind = Literal["trial", "rejudge"]


class _Model(BaseModel):
    model_config = ConfigDict(extra="forbid")


class TaskInfo(_Model):
    id: str
    version: str
    sha256: str = Field(
        description="package: hash of every file of the task package; external: of the "
        "frozen spec, the tree at base and the holdout"
    )
    root: str = Field(
        description="where the task was loaded from (for rejudge): the package directory, or "
        "the frozen spec file of an external task"
    )
    kind: Literal["package", "external"] = Field(
        default="package", description="a task package (task.toml) or an external project"
    )


class AgentInfo(_Model):
    name: str = Field(description="registry name or 'module:Class'")
    label: str = Field(description="how reports name it: 'replay (not an agent)' for replays")
    is_agent: bool = Field(description="False for replay: its deliveries are not an agent's work")
    runner: str = Field(description="the runner class, 'module:Class'")
    version: str | None = Field(default=None, description="the agent's version; None unknown")
    model: str | None = Field(default=None, description="model asked for; None = agent default")
    flags: dict[str, Any] = Field(default_factory=dict, description="runner options")


class ChangedFile(_Model):
    path: str = Field(description="relative POSIX path in the workspace")
    change: ChangeKind
    in_scope: bool = Field(description="matched by the task's editable globs")


class JudgeSettings(_Model):
    """Every option that can change a verdict, as the trial was judged; `trial rejudge` uses
    these unless told otherwise (the task's own defaults are in its hash)."""

    measure: bool = Field(description="speed phase after correctness")
    budget_s: float | None = Field(default=None, description="measurement budget; None = task's")
    min_effect: float | None = Field(
        default=None,
        description=(
            "relative change inside which an interval reads no_difference; improved/regressed "
            "need one that excludes no change and reaches beyond it; None = task's"
        ),
    )


class Judgement(_Model):
    """One judgement of a trial's delivered candidate. A rejudge adds one; none is replaced."""

    schema_version: int = TRIAL_RECORD_VERSION
    id: int | None = Field(default=None, description="ledger row id, set when stored")
    trial_id: str
    kind: JudgementKind
    created_at: str
    verdict: TrialVerdict
    reasons: list[str] = Field(default_factory=list)
    reason_codes: list[str] = Field(default_factory=list)
    metrics: AnyMetrics | None = Field(default=None, description="null when rejected")
    settings: JudgeSettings
    judge_version: str | None = None
    judge_sha256: str | None = None
    runtime_sha256: str | None = None
    task_sha256: str | None = None
    candidate_sha256: str | None = None
    seed: int | None = None
    judge_json: str | None = Field(default=None, description="artifact sha of the JudgeResult")
    duration_s: float | None = None


class TrialRecord(_Model):
    """Everything about one trial: who ran what, what was delivered, what the judge said."""

    schema_version: int = TRIAL_RECORD_VERSION
    id: str
    state: TrialState
    created_at: str
    finished_at: str | None = None
    host: str = Field(description="machine that ran the trial")
    pid: int = Field(description="optarena process that ran it (to detect a crash)")
    pid_start: int | None = Field(default=None, description="that process's start time (ticks)")

    task: TaskInfo
    agent: AgentInfo
    labels: dict[str, str] = Field(default_factory=dict, description="condition labels k=v")
    limits: AgentLimits
    judge_settings: JudgeSettings
    runtime: dict[str, Any] = Field(description="runtime fingerprint, with its own sha256")
    judge_sha256: str = Field(description="hash of the judge code")
    workspace: str = Field(description="the agent's workspace (kept after the trial)")
    agent_sandbox: dict[str, Any] | None = Field(
        default=None,
        description="containment measures active for the agent's processes (enabled, user, "
        "network, mounts, processes, cleanup, writable, hidden, setup_ms, teardown_ms, notes "
        "on what was unavailable); enabled=false with a note for --no-agent-sandbox or a "
        "runner that started no process; null until the agent phase ended",
    )
    outside_changes: list[str] = Field(
        default_factory=list,
        description="optarena or task-package files that differed from their reference "
        "before judging (the trial is then not judged: judge_tampered)",
    )

    agent_status: AgentStatus | None = None
    agent_exit_code: int | None = None
    agent_detail: str = ""
    session_id: str | None = None
    usage: Usage = Field(default_factory=Usage)
    metered_usage: Usage | None = Field(
        default=None, description="metered by optarena's proxy, beside `usage`; None: no proxy"
    )
    agent_wall_s: float | None = None
    agent_cpu_s: float | None = Field(
        default=None,
        description="user+system CPU of the agent's process and the descendants that were "
        "reaped (by it or by us), from the OS; processes that escaped are not counted",
    )

    baseline_commit: str | None = Field(default=None, description="baseline commit, private repo")
    candidate_sha256: str | None = Field(default=None, description="hash of delivered editables")
    changed: list[ChangedFile] = Field(default_factory=list, description="every changed path")
    out_of_scope: list[str] = Field(
        default_factory=list,
        description="tracked files outside the editable scope changed or deleted (rejects); "
        "new files there are in `changed` only, ignored and never judged",
    )

    verdict: TrialVerdict | None = None
    reasons: list[str] = Field(default_factory=list)
    reason_codes: list[str] = Field(default_factory=list)
    metrics: AnyMetrics | None = Field(default=None, description="null when rejected")

    phases_s: dict[str, float] = Field(default_factory=dict, description="wall time per phase")
    artifacts: dict[str, str] = Field(default_factory=dict, description="name -> artifact sha")
    error: str | None = Field(default=None, description="why an interrupted trial stopped")
