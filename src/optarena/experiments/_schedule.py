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
from optarena.experiments._plan import LoadedPlan
from optarena.identity import judge_sha256, runtime_fingerprint
from optarena.records import migrate_values
from optarena.runs import trial_task

LOCK_SCHEMA_VERSION = 1


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


def lock_content(plan: LoadedPlan) -> dict[str, Any]:
    """Everything a result depends on besides the agents' own behaviour."""
    runtime = runtime_fingerprint()
    return {
        "schema_version": LOCK_SCHEMA_VERSION,
        "experiment": plan.name,
        "plan_sha256": plan.sha256,
        "tasks": {
            tid: {"version": info.version, "sha256": info.sha256}
            for tid, info in ((tid, trial_task(t).info) for tid, t in plan.tasks.items())
        },
        "judge_sha256": judge_sha256(),
        "runtime_sha256": runtime.get("sha256"),
        "conditions": {
            c.name: {
                "agent": c.agent,
                "command": c.command,
                "agent_args": dict(sorted(c.agent_args.items())),
                "artifacts_sha256": artifacts_sha256(plan.artifacts[c.name]),
            }
            for c in plan.plan.conditions
        },
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


def drift(plan: LoadedPlan) -> list[str]:
    """What differs between the lock and the plan as it is now (empty: no drift). Raises
    OptarenaError when there is no lock or it cannot be read."""
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
    locked = migrate_values("lock", locked, current=LOCK_SCHEMA_VERSION, where=str(path))
    now = lock_content(plan)
    return [_describe(k, locked.get(k), now[k]) for k in now if locked.get(k) != now[k]]


def _describe(key: str, old: Any, new: Any) -> str:
    if isinstance(old, dict) and isinstance(new, dict):
        keys = sorted(k for k in set(old) | set(new) if old.get(k) != new.get(k))
        return f"{key}: {', '.join(keys)} changed"
    if key == "schedule":
        return "schedule: the trial list changed"
    return f"{key}: {str(old)[:16]} -> {str(new)[:16]}"
