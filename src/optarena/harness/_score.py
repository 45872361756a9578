"""Scores of an iteration: the judge's verdict and speed of the attempt's trial, nothing the
agent said or wrote about itself. Pure functions over records."""

from __future__ import annotations

from collections import Counter
from typing import Any

from optarena.errors import OptarenaError
from optarena.harness._record import IterationRecord, RelayedCallCount
from optarena.harness._relay import read_telemetry
from optarena.records import TrialRecord


def _overall(metrics: Any) -> dict[str, Any]:
    if metrics is None:
        return {}
    data = metrics.model_dump() if hasattr(metrics, "model_dump") else metrics
    overall = data.get("overall") if isinstance(data, dict) else None
    return overall if isinstance(overall, dict) else {}


def score_of(it: IterationRecord, record: TrialRecord) -> None:
    """Fill the iteration's score from its trial's judgement."""
    overall = _overall(record.metrics)
    ratio = overall.get("ratio")
    it.trial_id = record.id
    it.verdict = record.verdict
    it.reason_codes = list(record.reason_codes)
    it.speed_ratio = float(ratio) if isinstance(ratio, int | float) else None
    it.speed_verdict = overall.get("verdict") if isinstance(overall.get("verdict"), str) else None
    it.candidate_sha256 = record.candidate_sha256
    it.claimed_files = [c.path for c in record.changed if not c.in_scope and c.change == "added"]


def _key(it: IterationRecord) -> tuple[int, int, float]:
    """Accepted first; then a known speed; then faster (a lower time ratio)."""
    accepted = int(it.verdict == "accepted")
    known = int(it.speed_ratio is not None)
    return accepted, known, -(it.speed_ratio or 0.0)


def better(a: IterationRecord, b: IterationRecord) -> bool:
    """Whether `a` beats `b` (ties keep the earlier one)."""
    return _key(a) > _key(b)


def stop_reason(it: IterationRecord | None, stop_when: str | None) -> str | None:
    """Why to stop after `it`, or None. `stop_when`: 'improved' (the judge's speed verdict)
    or a speed-up (baseline time over candidate time) to reach. `it=None` only validates."""
    if stop_when is None:
        return None
    target: float | None = None
    if stop_when != "improved":
        try:
            target = float(stop_when)
        except ValueError:
            target = None
        if target is None or not target > 0:
            raise OptarenaError(
                f"--stop-when '{stop_when}': expected 'improved' or a speed-up such as 1.2"
            )
    if it is None or it.verdict != "accepted":
        return None
    if target is None:
        return "the judge found the candidate improved" if it.speed_verdict == "improved" else None
    if it.speed_ratio is not None and it.speed_ratio > 0 and 1 / it.speed_ratio >= target:
        return f"speed-up {1 / it.speed_ratio:.2f}x reached {target:g}x"
    return None


def count_calls(telemetry: str) -> list[RelayedCallCount]:
    """Calls and errors per (server, tool) in a relay telemetry log."""
    calls = read_telemetry(telemetry)
    total = Counter((c.server or "", c.tool) for c in calls)
    errors = Counter((c.server or "", c.tool) for c in calls if c.status != "ok")
    return [
        RelayedCallCount(server=s, tool=t, calls=n, errors=errors[(s, t)])
        for (s, t), n in sorted(total.items())
    ]
