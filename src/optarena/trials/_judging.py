"""Judging a delivered candidate and turning the result into a ledger `Judgement`.

A change to a tracked file outside the editable scope (modified, deleted) rejects the trial
(`out_of_scope`), whatever the judge says about the editable files (new files there are
ignored: only editable files are judged); they are still checked for correctness (never
measured), so the record shows what the agent's candidate would have been worth.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from pathlib import Path

from optarena.files import name_line
from optarena.judge import JudgeOptions, JudgeResult, judge
from optarena.ledger import ArtifactStore, utc_now
from optarena.records import Judgement, JudgementKind, JudgeSettings, Metrics, TrialVerdict
from optarena.tasks import Task

JudgeFn = Callable[[Task, Path, JudgeOptions], JudgeResult]
OUT_OF_SCOPE = "out_of_scope"


def combine(
    out_of_scope: list[str], result: JudgeResult
) -> tuple[TrialVerdict, list[str], list[str], Metrics | None]:
    """(verdict, reasons, reason codes, metrics) of a trial from its scope and its judgement."""
    if not out_of_scope:
        return result.verdict, list(result.reasons), list(result.reason_codes), result.metrics
    outside = ", ".join(map(name_line, out_of_scope))  # a reason is one line of text
    reason = f"{OUT_OF_SCOPE}: changed outside the editable scope: {outside}"
    codes = [OUT_OF_SCOPE, *(c for c in result.reason_codes if c != OUT_OF_SCOPE)]
    return "rejected", [reason, *result.reasons], codes, None


def judge_delivery(
    task: Task,
    candidate_dir: Path,
    out_of_scope: list[str],
    *,
    trial_id: str,
    kind: JudgementKind,
    settings: JudgeSettings,
    store: ArtifactStore,
    judge_fn: JudgeFn | None = None,
    progress: Callable[[str, float], None] | None = None,
) -> Judgement:
    """Judge `candidate_dir` (correctness, then measurement unless out of scope), store the
    full JudgeResult as an artifact, and return the judgement to record."""
    options = JudgeOptions(
        measure=settings.measure and not out_of_scope,
        budget_s=settings.budget_s,
        min_effect=settings.min_effect,
        progress=progress,
    )
    t0 = time.monotonic()
    result = (judge_fn or judge)(task, candidate_dir, options)
    duration = time.monotonic() - t0
    verdict, reasons, codes, metrics = combine(out_of_scope, result)
    return Judgement(
        trial_id=trial_id,
        kind=kind,
        created_at=utc_now(),
        verdict=verdict,
        reasons=reasons,
        reason_codes=codes,
        metrics=metrics,
        settings=settings,
        judge_version=result.judge.version,
        judge_sha256=result.judge.sha256,
        runtime_sha256=str(result.runtime.get("sha256")),
        task_sha256=result.task.sha256,
        candidate_sha256=result.candidate.sha256,
        seed=result.seed,
        judge_json=store.put_text(result.model_dump_json(indent=2)),
        duration_s=round(duration, 4),
    )
