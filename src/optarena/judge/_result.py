"""The judge's verdict as an on-disk format (`optarena judge --json`), versioned."""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from optarena.records import Metrics

JUDGE_SCHEMA_VERSION = 1


class _Model(BaseModel):
    model_config = ConfigDict(extra="forbid")


class TaskRef(_Model):
    id: str
    version: str
    sha256: str = Field(description="hash of every file of the task package, canonical order")


class JudgeRef(_Model):
    version: str = Field(description="optarena version")
    sha256: str = Field(description="hash of the judge and sandbox code")


class CandidateRef(_Model):
    sha256: str = Field(description="hash of the candidate's editable files")
    files: list[str] = Field(description="the editable files judged (relative paths)")
    path: str | None = Field(default=None, description="where the candidate was read from")


class Check(_Model):
    name: str = Field(description="load, call, output_type, shape, dtype, finite, tolerance, ...")
    workload: str | None = Field(description="workload name; null for whole-candidate checks")
    passed: bool
    detail: str = ""
    code: str | None = Field(default=None, description="reason code when failed")


class JudgeResult(_Model):
    """One judgement of one candidate. `metrics` is null whenever the verdict is `rejected`."""

    schema_version: int = JUDGE_SCHEMA_VERSION
    task: TaskRef
    judge: JudgeRef
    candidate: CandidateRef
    runtime: dict[str, Any] = Field(description="runtime fingerprint, with its own sha256")
    seed: int = Field(description="the secret seed this judgement generated its inputs from")
    verdict: Literal["accepted", "rejected"]
    checks: list[Check]
    reasons: list[str] = Field(description="'code: detail' for every failure, first per workload")
    reason_codes: list[str] = Field(description="distinct reason codes, in order of discovery")
    metrics: Metrics | None = Field(default=None, description="the speed phase's measurement")
    limits: dict[str, Any] = Field(description="the worker limits this judgement ran under")
    worker: dict[str, Any] = Field(default_factory=dict, description="worker interpreter facts")
    sandbox: dict[str, Any] = Field(
        default_factory=dict,
        description="isolation measures active for the worker (network, user, mounts, "
        "processes, cleanup, guard) and notes on any that were unavailable",
    )
    integrity: dict[str, Any] = Field(
        default_factory=dict,
        description="hashes of the judge code, task package and oracle taken before the "
        "judgement, and whether they still matched after it (status)",
    )
    timings_s: dict[str, float] = Field(default_factory=dict, description="wall time per phase")
    started_at: str
    finished_at: str
