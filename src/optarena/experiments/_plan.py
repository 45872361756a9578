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

from pydantic import ValidationError

from optarena.agents import runner_class
from optarena.errors import OptarenaError, RecordError, SpecError
from optarena.records import MAX_TRIALS, Condition, ExperimentPlan, migrate_values
from optarena.tasks import Task, resolve_task
from optarena.tasks.external import FrozenExternal, is_external_spec, load_frozen


@dataclass(frozen=True)
class LoadedPlan:
    """A validated plan with what it refers to resolved: tasks loaded, artifact paths made
    absolute, and the sha256 of the plan file's bytes."""

    path: Path
    plan: ExperimentPlan
    tasks: dict[str, Task | FrozenExternal]
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
        plan = ExperimentPlan.model_validate(migrate_values("plan", data, where=str(path)))
    except ValidationError as e:
        raise _validation_error(path, e) from None
    except RecordError as e:
        raise SpecError(path, "schema_version", str(e).removeprefix(f"{path}: ")) from None
    names = [c.name for c in plan.conditions]
    for i, n in enumerate(names):
        if n in names[:i]:
            raise SpecError(path, f"conditions.{i}.name", f"duplicates the condition '{n}'")
    for i, c in enumerate(plan.conditions):
        try:
            runner_class(c.agent)
        except OptarenaError as e:
            raise SpecError(path, f"conditions.{i}.agent", str(e)) from None
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
    tasks: dict[str, Task | FrozenExternal] = {}
    for i, ref in enumerate(plan.experiment.tasks):
        target = ref if not _looks_like_path(ref) else str((path.parent / ref).resolve())
        try:
            task = _load_task(target)
        except OptarenaError as e:
            raise SpecError(path, f"experiment.tasks.{i}", str(e)) from None
        tid = task.id if isinstance(task, Task) else task.spec.id
        if tid in tasks:
            raise SpecError(path, f"experiment.tasks.{i}", f"task '{tid}' is listed twice")
        if isinstance(task, FrozenExternal) and plan.judge.min_effect is not None:
            raise SpecError(
                path, "judge.min_effect", f"does not apply to the external task '{tid}': its "
                "verdict's threshold is frozen in its spec",
            )  # fmt: skip
        if isinstance(task, FrozenExternal) and plan.judge.budget_s is not None:
            raise SpecError(
                path, "judge.budget_s", f"does not apply to the external task '{tid}': its "
                "benchmark budget is frozen in its spec ([measurement] budget_s)",
            )  # fmt: skip
        tasks[tid] = task
    trials = len(tasks) * len(plan.conditions) * plan.experiment.repetitions
    if trials > MAX_TRIALS:
        raise SpecError(
            path, "experiment.repetitions", f"schedules {trials:,} trials; at most "
            f"{MAX_TRIALS:,} (tasks x conditions x repetitions) are run from one plan",
        )  # fmt: skip
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


def _load_task(target: str) -> Task | FrozenExternal:
    """A task package by id or directory, or a frozen external spec (checked for drift)."""
    path = Path(target)
    if path.is_file() and is_external_spec(path):
        return load_frozen(path)
    return resolve_task(target)


def _looks_like_path(ref: str) -> bool:
    return "/" in ref or ref.startswith(".") or ref.endswith(".toml")
