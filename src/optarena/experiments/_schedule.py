"""The trial schedule of a plan and its lock file (what `experiment freeze` fixes).

The schedule interleaves conditions: repetition by repetition, every (task, condition) once, in
an order shuffled from the plan's seed, so slow drift of the machine (load, thermal state, a
model endpoint's day) falls on every condition alike instead of on whichever ran last.
"""

from __future__ import annotations

import hashlib
import json
import random
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from optarena.errors import OptarenaError
from optarena.experiments._identity import cell_sha256, condition_identity
from optarena.experiments._plan import LoadedPlan
from optarena.identity import judge_sha256, runtime_fingerprint
from optarena.records import RecordMigration, migrate_values
from optarena.trials import trial_task

LOCK_SCHEMA_VERSION = 2  # 2: the plan, each condition's files and agent version, cells


@dataclass(frozen=True)
class ScheduledTrial:
    """One trial of the plan; `key` is how the ledger finds it again (resume)."""

    order: int
    task: str
    condition: str
    repetition: int

    @property
    def key(self) -> str:
        return f"{self.task}/{self.condition}/{self.repetition}"

    @property
    def cell(self) -> str:
        return f"{self.task}/{self.condition}"


def schedule(plan: LoadedPlan) -> list[ScheduledTrial]:
    rng = random.Random(plan.plan.experiment.seed)
    cells = [(t, c.name) for t in plan.tasks for c in plan.plan.conditions]
    out: list[ScheduledTrial] = []
    for rep in range(plan.plan.experiment.repetitions):
        block = cells[:]
        rng.shuffle(block)
        out += [ScheduledTrial(len(out) + i, t, c, rep) for i, (t, c) in enumerate(block)]
    return out


def lock_path(plan_path: Path) -> Path:
    return plan_path.with_suffix(".lock")


@dataclass(frozen=True)
class PlanIdentity:
    """What the plan's trials are made of, hashed (see `optarena.experiments._identity`)."""

    tasks: dict[str, dict[str, str]]  # task id -> version, sha256
    conditions: dict[str, dict[str, Any]]  # name -> definition, files, agent version, artifacts
    cells: dict[str, str]  # "task/condition" -> cell_sha256: what resume matches on


def plan_identity(plan: LoadedPlan) -> PlanIdentity:
    tasks = {
        tid: {"version": info.version, "sha256": info.sha256}
        for tid, info in ((tid, trial_task(t).info) for tid, t in plan.tasks.items())
    }
    conditions = {
        c.name: {
            **condition_identity(plan.path, i, c),
            "artifacts_sha256": artifacts_sha256(plan.artifacts[c.name]),
        }
        for i, c in enumerate(plan.plan.conditions)
    }
    cells = {
        f"{t}/{c}": cell_sha256(plan.plan, tasks[t], conditions[c])
        for t in tasks
        for c in conditions
    }
    return PlanIdentity(tasks, conditions, cells)


def lock_content(plan: LoadedPlan, identity: PlanIdentity | None = None) -> dict[str, Any]:
    """Everything a result depends on besides the agents' own behaviour."""
    identity = identity or plan_identity(plan)
    runtime = runtime_fingerprint()
    fields = plan.plan.model_dump(mode="json")
    executor = fields["experiment"].pop("executor")  # how trials run, not what they are
    return {
        "schema_version": LOCK_SCHEMA_VERSION,
        "experiment": plan.name,
        "plan_sha256": plan.sha256,
        "plan": fields,
        "run": {"executor": executor},
        "tasks": identity.tasks,
        "judge_sha256": judge_sha256(),
        "runtime_sha256": runtime.get("sha256"),
        "conditions": identity.conditions,
        "cells": identity.cells,
        "schedule": [asdict(s) for s in schedule(plan)],
    }


def artifacts_sha256(path: Path | None) -> str | None:
    """A hash of an artifacts directory's file names and bytes (None: no artifacts)."""
    if path is None:
        return None
    h = hashlib.sha256()
    for f in sorted(p for p in path.rglob("*") if p.is_file()):
        h.update(f.relative_to(path).as_posix().encode() + b"\0")
        h.update(hashlib.sha256(f.read_bytes()).digest())
    return h.hexdigest()


def freeze(plan: LoadedPlan) -> Path:
    path = lock_path(plan.path)
    path.write_text(json.dumps(lock_content(plan), indent=1) + "\n")
    return path


def _read_lock(plan: LoadedPlan) -> dict[str, Any]:
    path = lock_path(plan.path)
    if not path.is_file():
        raise OptarenaError(
            f"{plan.path}: no lock file {path.name}; run `optarena experiment freeze {plan.path}`"
        )
    try:
        locked = json.loads(path.read_text())
    except (OSError, ValueError) as e:
        raise OptarenaError(f"{path}: not a readable lock file: {e}") from None
    if not isinstance(locked, dict):
        raise OptarenaError(f"{path}: not a readable lock file: not a JSON object")
    return migrate_values(
        "lock", locked, current=LOCK_SCHEMA_VERSION, migrations=LOCK_MIGRATIONS, where=str(path)
    )


def frozen_cells(plan: LoadedPlan) -> dict[str, str]:
    """The cells as the lock fixed them: what this plan's trials were run as. Raises
    OptarenaError without a readable lock; a lock written before cells existed gives today's."""
    cells = _read_lock(plan).get("cells")
    if isinstance(cells, dict) and all(isinstance(v, str) for v in cells.values()):
        return {str(k): v for k, v in cells.items()}
    return plan_identity(plan).cells


def drift(plan: LoadedPlan) -> list[str]:
    """What differs between the lock and the plan as it is now, field by field (empty: no
    drift). Raises OptarenaError when there is no lock or it cannot be read."""
    locked = _read_lock(plan)
    locked.setdefault("run", LOCAL_RUN)  # a lock written before the run record: run locally
    now = lock_content(plan)
    out: list[str] = []
    for key in now:
        if key == "plan_sha256" and any(locked.get(k) != now[k] for k in ("plan", "run")):
            continue  # the fields that changed say it
        if key == "plan_sha256" and locked.get(key) != now[key]:
            out.append("the plan file's bytes changed (no field did: comments or layout)")
        elif key == "schedule" and locked.get(key) != now[key]:
            out.append("schedule: the trial list changed")
        elif key != "cells":  # derived from the rest: named there
            out += differences(key, locked.get(key), now[key])
    if len(out) > MAX_LISTED:
        out = [*out[:MAX_LISTED], f"and {len(out) - MAX_LISTED} more"]
    return out


MAX_LISTED = 12
LOCAL_RUN = {"executor": "local"}


def differences(where: str, old: Any, new: Any) -> list[str]:
    """'a.b.c: OLD -> NEW' for each leaf that differs between two JSON values."""
    if old == new:
        return []
    if isinstance(old, dict) and isinstance(new, dict):
        return [
            d
            for k in sorted(set(old) | set(new), key=str)
            for d in differences(f"{where}.{k}", old.get(k), new.get(k))
        ]
    return [f"{where}: {_short(old)} -> {_short(new)}"]


def _short(value: Any) -> str:
    if value is None:
        return "(none)"
    text = value if isinstance(value, str) else json.dumps(value)
    return text if len(text) <= 24 else text[:21] + "..."


LOCK_MIGRATIONS = (
    RecordMigration(
        "lock", 1, "the plan, each condition's files and agent version and the cells added: "
        "a version 1 lock reads as drift on those, to be accepted with --refreeze",
        lambda data: data,
    ),
)  # fmt: skip
