"""Judging a recorded trial's stored candidate again: a new judgement row, the old one kept."""

from __future__ import annotations

import tempfile
from collections.abc import Callable, Mapping
from pathlib import Path

from optarena.errors import OptarenaError
from optarena.judge import verify_judge
from optarena.ledger import Ledger
from optarena.records import Judgement, JudgeSettings, TrialRecord, evolve
from optarena.tasks import load_task, resolve_task
from optarena.tasks.external import load_frozen
from optarena.trials._judging import JudgeFn
from optarena.trials._sources import TrialTask, trial_task


def _task_of(record: TrialRecord) -> TrialTask:
    """The task from where the trial loaded it, else by id (a reinstalled built-in moves);
    an external task from its frozen spec (which must not have drifted)."""
    root = Path(record.task.root)
    if record.task.kind == "external":
        return trial_task(load_frozen(root))
    if (root / "task.toml").is_file():
        return trial_task(load_task(root))
    return trial_task(resolve_task(record.task.id))


def _settings(record: TrialRecord, changes: dict[str, object]) -> tuple[JudgeSettings, list[str]]:
    """The trial's recorded settings with `changes` applied, and a note per change."""
    unknown = sorted(set(changes) - set(JudgeSettings.model_fields))
    if unknown:
        raise OptarenaError(f"unknown judge settings {', '.join(unknown)}")
    old = record.judge_settings
    new = JudgeSettings.model_validate({**old.model_dump(), **changes})
    notes = [
        f"{k} = {getattr(new, k)!r} instead of the trial's {getattr(old, k)!r}"
        for k in JudgeSettings.model_fields
        if getattr(new, k) != getattr(old, k)
    ]
    return new, notes


def rejudge(
    ledger: Ledger,
    trial_ref: str,
    *,
    changes: Mapping[str, object] | None = None,
    progress: Callable[[str, float], None] | None = None,
    judge_fn: JudgeFn | None = None,
) -> tuple[TrialRecord, Judgement, list[str]]:
    """Judge the stored candidate of a finished trial again and record the judgement: a
    complete trial, or one interrupted after its delivery was stored (e.g. Ctrl-C while
    judging). The settings are the trial's own (`judge_settings`), with `changes` (field ->
    value of `JudgeSettings`) applied and noted: a rejudge never changes the protocol
    silently. Returns the trial, the new judgement and notes (e.g. the task changed since)."""
    record = ledger.get(trial_ref)
    settings, changed = _settings(record, dict(changes or {}))
    budget_s = changes.get("budget_s") if changes else None
    cand = record.artifacts.get("candidate")
    if record.state == "complete" and cand is None:  # refused unread (`DeliveryRefused`)
        raise OptarenaError(
            f"trial {record.id}: its delivery was refused before judging "
            f"({', '.join(record.reason_codes)}): no candidate was stored to judge"
        )
    if record.state == "running" or cand is None:
        why = "still running" if record.state == "running" else f"{record.state} before delivery"
        raise OptarenaError(f"trial {record.id} is {why}: no delivered candidate to judge")
    task = _task_of(record)
    if record.task.kind == "external" and budget_s is not None:
        raise OptarenaError(
            f"trial {record.id}: an external task's benchmark budget is frozen in its spec; "
            "--budget-s does not apply"
        )
    verify_judge()  # the installation as installed; a changed task is noted below
    notes = changed
    if task.info.sha256 != record.task.sha256:
        notes.append(
            f"task {record.task.id} changed since the trial ({record.task.sha256[:12]} -> "
            f"{task.info.sha256[:12]}); judged against the task as it is now"
        )
    diff = ledger.store.read_bytes(record.artifacts["diff"]) if "diff" in record.artifacts else b""
    with tempfile.TemporaryDirectory(prefix="optarena-rejudge-") as tmp:
        cand_dir = Path(tmp) / "candidate"
        cand_dir.mkdir()
        ledger.store.materialize_tree(cand, cand_dir)
        judgement = task.judge(
            cand_dir,
            diff,
            record.out_of_scope,
            trial_id=record.id,
            kind="rejudge",
            settings=settings,
            store=ledger.store,
            judge_fn=judge_fn,
            progress=progress,
        )
    row_id = ledger.add_judgement(judgement)
    return record, evolve(judgement, id=row_id), notes
