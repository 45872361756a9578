"""Task qualification: every control must get the verdict (and reason) it declares, and the
baseline measured against a copy of itself (A/A) must not read as improved or regressed.

It lives beside `tasks/` and `judge/`, not in either: it runs the judge on a task's controls,
so `tasks` (data and loading) stays free of the judge, which itself imports `tasks`."""

from __future__ import annotations

from pydantic import BaseModel

from optarena.judge import JudgeOptions, aa_control, judge
from optarena.tasks import Task


class ControlOutcome(BaseModel):
    name: str
    expect: str
    reason: str | None
    verdict: str
    reason_codes: list[str]
    ok: bool
    had_metrics: bool


class AAOutcome(BaseModel):
    """The A/A run: its verdict must be no_difference or inconclusive."""

    verdict: str
    why: str
    ratio: float | None
    ratio_ci: list[float] | None
    pairs: int
    budget_s: float
    used_s: float
    ok: bool


# A short A/A run: enough to catch a protocol that cannot tell the same code from itself (the
# failure this guards against reads "improved"/"regressed"), short enough to qualify often.
QUALIFY_AA_BUDGET_S = 8.0


class QualifyReport(BaseModel):
    task: str
    version: str
    sha256: str
    controls: list[ControlOutcome]
    aa: AAOutcome | None = None
    problems: list[str]

    @property
    def qualified(self) -> bool:
        return not self.problems


def _aa(task: Task, budget_s: float, problems: list[str]) -> AAOutcome:
    control = aa_control(task, budget_s=budget_s)
    c = control.comparison
    ok = c.overall.verdict not in ("improved", "regressed")
    if not ok:
        problems.append(f"A/A control: the baseline against itself reads {c.overall.verdict}")
    return AAOutcome(
        verdict=c.overall.verdict,
        why=c.overall.why,
        ratio=c.overall.ratio,
        ratio_ci=c.overall.ratio_ci,
        pairs=c.stop.pairs,
        budget_s=c.stop.budget_s,
        used_s=c.stop.used_s,
        ok=ok,
    )


def qualify_task(
    task: Task, aa: bool = True, aa_budget_s: float = QUALIFY_AA_BUDGET_S
) -> QualifyReport:
    """A correct control rejected, a wrong one accepted, the wrong reason, or an A/A run that
    reads improved/regressed: all disqualify. Controls are judged without timing."""
    outcomes: list[ControlOutcome] = []
    problems: list[str] = []
    if not any(c.expect == "accepted" for c in task.spec.controls):
        problems.append("no control is expected to be accepted")
    if not any(c.expect == "rejected" for c in task.spec.controls):
        problems.append("no control is expected to be rejected")
    for control in task.spec.controls:
        result = judge(task, task.root / control.dir, JudgeOptions(measure=False))
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
    aa_outcome = _aa(task, aa_budget_s, problems) if aa else None
    return QualifyReport(
        task=task.id,
        version=task.spec.version,
        sha256=task.sha256,
        controls=outcomes,
        aa=aa_outcome,
        problems=problems,
    )


__all__ = ["QUALIFY_AA_BUDGET_S", "AAOutcome", "ControlOutcome", "QualifyReport", "qualify_task"]
