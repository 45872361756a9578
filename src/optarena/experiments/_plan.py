"""An experiment plan (TOML): conditions x tasks x repetitions, fixed before any trial runs.

Validated in full before anything starts: unknown fields are errors, and every message names
the file and the field. Paths in the plan are relative to the plan file.
"""

from __future__ import annotations

import hashlib
import tomllib
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator

from optarena.errors import OptarenaError, SpecError
from optarena.tasks import Task, resolve_task

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


@dataclass(frozen=True)
class LoadedPlan:
    """A validated plan with what it refers to resolved: tasks loaded, artifact paths made
    absolute, and the sha256 of the plan file's bytes."""

    path: Path
    plan: ExperimentPlan
    tasks: dict[str, Task]
    artifacts: dict[str, Path | None]
    sha256: str

    @property
    def name(self) -> str:
        return self.plan.experiment.name

    def condition(self, name: str) -> Condition:
        return next(c for c in self.plan.conditions if c.name == name)


def _validation_error(path: Path, err: ValidationError) -> SpecError:
    e = err.errors()[0]
    loc = ".".join(str(p) for p in e["loc"]) or "(top level)"
    msg = e["msg"].removeprefix("Value error, ")
    if e["type"] == "missing":
        msg = "is required but missing"
    elif e["type"] == "extra_forbidden":
        msg = "is not a known field"
    return SpecError(path, loc, msg)


def load_plan(path: Path) -> LoadedPlan:
    """Parse, validate and resolve a plan; every problem is a SpecError naming the field."""
    path = path.resolve()
    try:
        raw = path.read_bytes()
    except OSError as e:
        raise OptarenaError(f"{path}: cannot read the plan: {e.strerror or e}") from None
    try:
        data: dict[str, Any] = tomllib.loads(raw.decode("utf-8"))
    except (tomllib.TOMLDecodeError, UnicodeDecodeError) as e:
        raise SpecError(path, "", f"not valid TOML: {e}") from None
    try:
        plan = ExperimentPlan.model_validate(data)
    except ValidationError as e:
        raise _validation_error(path, e) from None
    names = [c.name for c in plan.conditions]
    for i, n in enumerate(names):
        if n in names[:i]:
            raise SpecError(path, f"conditions.{i}.name", f"duplicates the condition '{n}'")
    for i, c in enumerate(plan.conditions):
        if c.agent == "command" and not (c.command or c.agent_args.get("command")):
            raise SpecError(path, f"conditions.{i}.command", "the 'command' agent needs one")
    if plan.compare is not None:
        refs = [("compare.baseline", plan.compare.baseline)]
        refs += [(f"compare.treatments.{i}", t) for i, t in enumerate(plan.compare.treatments)]
        for field, ref in refs:
            if ref not in names:
                raise SpecError(
                    path, field, f"unknown condition '{ref}'; known: {', '.join(names)}"
                )
        if plan.compare.baseline in plan.compare.treatments:
            raise SpecError(path, "compare.treatments", "must not include the baseline condition")
    tasks: dict[str, Task] = {}
    for i, ref in enumerate(plan.experiment.tasks):
        target = ref if not _looks_like_path(ref) else str((path.parent / ref).resolve())
        try:
            task = resolve_task(target)
        except OptarenaError as e:
            raise SpecError(path, f"experiment.tasks.{i}", str(e)) from None
        if task.id in tasks:
            raise SpecError(path, f"experiment.tasks.{i}", f"task '{task.id}' is listed twice")
        tasks[task.id] = task
    artifacts: dict[str, Path | None] = {}
    for i, c in enumerate(plan.conditions):
        if not c.artifacts:
            artifacts[c.name] = None
            continue
        a = (path.parent / c.artifacts).resolve()
        if not a.is_dir():
            raise SpecError(path, f"conditions.{i}.artifacts", f"{a} is not a directory")
        artifacts[c.name] = a
    return LoadedPlan(path, plan, tasks, artifacts, hashlib.sha256(raw).hexdigest())


def _looks_like_path(ref: str) -> bool:
    return "/" in ref or ref.startswith(".")
