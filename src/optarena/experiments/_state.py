"""Where a plan stands in a ledger: per scheduled key its trials, and its outcome.

Every key ends in exactly one outcome, never silently dropped:

- `complete`: a trial of the key's cell finished (whatever its verdict);
- `failed`: no trial finished after 1 + `retries` attempts (optarena's process raised or died
  during each: a trial that crashes the run must not erase itself from the comparison), or one
  attempt was refused as `judge_tampered` (retrying gives a tampering agent more tries); the
  comparison counts it as a failure, like a rejected candidate;
- `pending`: neither yet; `experiment run` runs it, `compare` flags the experiment incomplete.

An attempt stopped by the user (Ctrl-C, SIGTERM) is on record but uses no retry. A trial
belongs to a key when its labels carry the key and the cell's hash as the lock fixed it
(`cell_sha256`), never by the experiment's name alone.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Literal

from optarena.experiments._plan import LoadedPlan
from optarena.experiments._schedule import ScheduledTrial, frozen_cells, schedule
from optarena.ledger import Ledger
from optarena.records import TrialRecord

EXPERIMENT_LABEL = "experiment"
KEY_LABEL = "experiment_key"
CELL_LABEL = "cell_sha256"
PLAN_LABEL = "plan_sha256"  # the plan file's hash: how trials recorded before cells match
LABEL_DIGITS = 16  # hex digits of a hash in a label (listings show labels in full)

KeyOutcome = Literal["complete", "failed", "pending"]

# How `run_trial` words the error of a trial that Ctrl-C or SIGTERM stopped (both raise
# KeyboardInterrupt in optarena's process; an agent in its sandbox can send neither).
_USER_STOP = re.compile(r"^during \w+: (KeyboardInterrupt|TrialInterrupted): ")


def stopped_by_user(r: TrialRecord) -> bool:
    return r.state == "interrupted" and bool(_USER_STOP.match(r.error or ""))


def _final_failure(r: TrialRecord) -> bool:
    return r.state == "interrupted" and "judge_tampered" in r.reason_codes


@dataclass
class ExperimentState:
    """A plan's trials by key (newest first), and each key's outcome."""

    plan: LoadedPlan
    schedule: list[ScheduledTrial]
    cells: dict[str, str]  # "task/condition" -> cell_sha256, as frozen
    rows: dict[str, list[TrialRecord]] = field(default_factory=dict)

    @property
    def retries(self) -> int:
        return self.plan.plan.experiment.retries

    def done(self, key: str) -> TrialRecord | None:
        return next((r for r in self.rows.get(key, []) if r.state == "complete"), None)

    def failed_attempts(self, key: str) -> list[TrialRecord]:
        """Attempts that ended without a result for a reason other than the user's stop."""
        return [
            r for r in self.rows.get(key, []) if r.state == "interrupted" and not stopped_by_user(r)
        ]

    def outcome(self, key: str) -> KeyOutcome:
        if self.done(key) is not None:
            return "complete"
        failed = self.failed_attempts(key)
        if len(failed) > self.retries or any(_final_failure(r) for r in failed):
            return "failed"
        return "pending"

    @property
    def pending(self) -> list[ScheduledTrial]:
        return [s for s in self.schedule if self.outcome(s.key) == "pending"]

    def counts(self) -> dict[str, int]:
        outcomes = [self.outcome(s.key) for s in self.schedule]
        return {
            "scheduled": len(self.schedule),
            "complete": outcomes.count("complete"),
            "failed": outcomes.count("failed"),
            "pending": outcomes.count("pending"),
            "interrupted_rows": sum(
                r.state == "interrupted" for rs in self.rows.values() for r in rs
            ),
        }


def belongs(r: TrialRecord, plan: LoadedPlan, cells: dict[str, str]) -> bool:
    """A trial of this plan: its key's cell hash matches (trials recorded before cells
    existed match on the plan file's hash instead)."""
    key = r.labels.get(KEY_LABEL)
    if key is None:
        return False
    cell = key.rsplit("/", 1)[0]
    if CELL_LABEL in r.labels:
        return cells.get(cell, "")[:LABEL_DIGITS] == r.labels[CELL_LABEL]
    legacy = plan.sha256[:LABEL_DIGITS]
    return r.labels.get(EXPERIMENT_LABEL) == plan.name and r.labels.get(PLAN_LABEL) == legacy


def experiment_state(
    plan: LoadedPlan, ledger: Ledger, cells: dict[str, str] | None = None
) -> ExperimentState:
    """The plan's state in `ledger`; `cells` default to the lock's (OptarenaError: no lock)."""
    cells = cells if cells is not None else frozen_cells(plan)
    state = ExperimentState(plan, schedule(plan), cells)
    keys = {s.key for s in state.schedule}
    for r in ledger.trials(limit=None):
        if r.labels.get(KEY_LABEL) in keys and belongs(r, plan, cells):
            state.rows.setdefault(r.labels[KEY_LABEL], []).append(r)
    return state
