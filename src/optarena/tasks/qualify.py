"""Task qualification: every control must get the verdict (and reason) it declares."""

from __future__ import annotations

from pydantic import BaseModel

from optarena.judge import judge
from optarena.tasks._loader import Task


class ControlOutcome(BaseModel):
    name: str
    expect: str
    reason: str | None
    verdict: str
    reason_codes: list[str]
    ok: bool
    had_metrics: bool


class QualifyReport(BaseModel):
    task: str
    version: str
    sha256: str
    controls: list[ControlOutcome]
    problems: list[str]

    @property
    def qualified(self) -> bool:
        return not self.problems


def qualify_task(task: Task) -> QualifyReport:
    """A correct control rejected, a wrong one accepted, or the wrong reason: all disqualify."""
    outcomes: list[ControlOutcome] = []
    problems: list[str] = []
    if not any(c.expect == "accepted" for c in task.spec.controls):
        problems.append("no control is expected to be accepted")
    if not any(c.expect == "rejected" for c in task.spec.controls):
        problems.append("no control is expected to be rejected")
    for control in task.spec.controls:
        result = judge(task, task.root / control.dir)
        ok = result.verdict == control.expect
        if ok and control.reason and control.reason not in result.reason_codes:
            ok = False
            problems.append(
                f"control '{control.name}': rejected, but not for '{control.reason}' "
                f"(got {', '.join(result.reason_codes)})"
            )
        elif not ok:
            problems.append(
                f"control '{control.name}': expected {control.expect}, got "
                f"{result.verdict} ({'; '.join(result.reasons[:2]) or 'no reasons'})"
            )
        if result.verdict == "rejected" and result.metrics is not None:
            ok = False
            problems.append(f"control '{control.name}': rejected yet has metrics")
        outcomes.append(
            ControlOutcome(
                name=control.name,
                expect=control.expect,
                reason=control.reason,
                verdict=result.verdict,
                reason_codes=result.reason_codes,
                ok=ok,
                had_metrics=result.metrics is not None,
            )
        )
    return QualifyReport(
        task=task.id,
        version=task.spec.version,
        sha256=task.sha256,
        controls=outcomes,
        problems=problems,
    )
