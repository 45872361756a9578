"""Judging a recorded trial's stored candidate again: a new judgement row, the old one kept."""

from __future__ import annotations

import tempfile
from collections.abc import Callable
from pathlib import Path

from optarena.errors import OptarenaError
from optarena.judge import verify_judge
from optarena.ledger import Judgement, JudgeSettings, Ledger, TrialRecord
from optarena.runs._judging import JudgeFn, judge_delivery
from optarena.tasks import Task, load_task, resolve_task


def _task_of(record: TrialRecord) -> Task:
    """The task from where the trial loaded it, else by id (a reinstalled built-in moves)."""
    root = Path(record.task.root)
    if (root / "task.toml").is_file():
        return load_task(root)
    return resolve_task(record.task.id)


def rejudge(
    ledger: Ledger,
    trial_ref: str,
    *,
    measure: bool = True,
    budget_s: float | None = None,
    progress: Callable[[str, float], None] | None = None,
    judge_fn: JudgeFn | None = None,
) -> tuple[TrialRecord, Judgement, list[str]]:
    """Judge the stored candidate of a finished trial again and record the judgement: a
    complete trial, or one interrupted after its delivery was stored (e.g. Ctrl-C while
    judging). Returns the trial, the new judgement and notes (e.g. the task changed since)."""
    record = ledger.get(trial_ref)
    cand = record.artifacts.get("candidate")
    if record.state == "running" or cand is None:
        why = "still running" if record.state == "running" else f"{record.state} before delivery"
        raise OptarenaError(f"trial {record.id} is {why}: no delivered candidate to judge")
    task = _task_of(record)
    verify_judge()  # the installation as installed; a changed task is noted below
    notes = []
    if task.sha256 != record.task.sha256:
        notes.append(
            f"task {task.id} changed since the trial ({record.task.sha256[:12]} -> "
            f"{task.sha256[:12]}); judged against the task as it is now"
        )
    with tempfile.TemporaryDirectory(prefix="optarena-rejudge-") as tmp:
        cand_dir = Path(tmp) / "candidate"
        cand_dir.mkdir()
        ledger.store.materialize_tree(cand, cand_dir)
        judgement = judge_delivery(
            task,
            cand_dir,
            record.out_of_scope,
            trial_id=record.id,
            kind="rejudge",
            settings=JudgeSettings(measure=measure, budget_s=budget_s),
            store=ledger.store,
            judge_fn=judge_fn,
            progress=progress,
        )
    row_id = ledger.add_judgement(judgement)
    return record, judgement.model_copy(update={"id": row_id}), notes
