"""The comparison as Markdown: the same tables as the HTML report, without plots."""

from __future__ import annotations

import math

from optarena.records import ConditionSummary, ExperimentComparison, Total, TreatmentComparison
from optarena.report._words import interval_words, speed_words


def fmt(v: float | None, digits: int = 3) -> str:
    return "-" if v is None else f"{v:.{digits}f}"


def fmt_ci(ci: list[float] | None, digits: int = 3) -> str:
    return "-" if not ci else f"{ci[0]:.{digits}f}..{ci[1]:.{digits}f}"


def fmt_total(t: Total, digits: int = 2) -> str:
    if t.value is None:
        return f"unknown ({t.unknown})" if t.unknown else "-"
    s = f"{t.value:.{digits}f}"
    return s + (f" (+{t.unknown} unknown)" if t.unknown else "")


def speed_cell(median: float | None, ci: list[float] | None, measured: bool = True) -> str:
    """A median speed-up and its interval in words; says when speed was not measured."""
    if not measured:
        return "not measured"
    return "-" if median is None else f"{speed_words(median)} ({interval_words(ci)})"


def trials_cell(s: ConditionSummary) -> str:
    extra = [f"{s.failed} failed" if s.failed else "", f"{s.pending} pending" if s.pending else ""]
    more = ", ".join(x for x in extra if x)
    return f"{s.trials} ({more})" if more else str(s.trials)


def condition_rows(c: ExperimentComparison) -> list[list[str]]:
    return [
        [
            s.name,
            trials_cell(s),
            f"{s.accepted}/{s.trials} ({fmt_ci(s.correctness_ci, 2)})",
            f"{s.improved}/{s.trials}" if s.speed_measured else "not measured",
            speed_cell(s.speedup_median, s.speedup_ci, s.speed_measured),
            speed_cell(s.effective_median, s.effective_ci, s.speed_measured),
            ", ".join(f"k={k} {speed_words(v)}" for k, v in enumerate(s.best_of_k, 1)) or "-",
            fmt_total(s.metered_tokens, 0),
            fmt_total(s.metered_cost_usd, 4),
            fmt_total(s.reported_cost_usd, 4),
            fmt_total(s.agent_wall_s, 1),
            fmt(s.cost_per_accepted, 4),
        ]
        for s in c.conditions
    ]


CONDITION_HEADER = [
    "condition",
    "trials",
    "accepted (95% CI)",
    "improved",
    "speed of accepted (median, 95% CI)",
    "effective speed (median, 95% CI)",
    "expected best of k",
    "metered tokens",
    "metered cost USD",
    "agent-reported cost USD (unchecked)",
    "agent s",
    "metered USD / accepted",
]

TASK_HEADER = [
    "task",
    "condition",
    "trials",
    "accepted (95% CI)",
    "speed of accepted (median, 95% CI)",
    "effective speed (median, 95% CI)",
]


def task_rows(c: ExperimentComparison) -> list[list[str]]:
    """Per task and condition: what pooling the tasks would hide."""
    return [
        [
            s.task or "-",
            s.name,
            trials_cell(s),
            f"{s.accepted}/{s.trials} ({fmt_ci(s.correctness_ci, 2)})",
            speed_cell(s.speedup_median, s.speedup_ci, s.speed_measured),
            speed_cell(s.effective_median, s.effective_ci, s.speed_measured),
        ]
        for s in c.by_task
    ]


COMPARISON_HEADER = [
    "treatment vs baseline",
    "pairs",
    "treatment's effective speed vs baseline's (95% CI; log difference)",
    "diff correctness (CI)",
    "verdict",
    "why",
]


def relative_speed(t: TreatmentComparison) -> str:
    """exp(mean log difference): how much faster the treatment's effective speed-up is."""
    if t.verdict == "not_measured":
        return "not measured"
    d, ci = t.log_speedup_diff, t.log_speedup_ci
    if d is None:
        return "-"
    span = interval_words([math.exp(ci[0]), math.exp(ci[1])]) if ci else "no interval"
    return f"{speed_words(math.exp(d))} ({span}; {d:+.4f})"


def comparison_rows(c: ExperimentComparison) -> list[list[str]]:
    return [
        [
            f"{t.treatment} vs {t.baseline}",
            str(t.pairs),
            relative_speed(t),
            f"{fmt(t.correctness_diff, 2)} ({fmt_ci(t.correctness_ci, 2)})",
            t.verdict,
            t.why,
        ]
        for t in c.comparisons
    ]


TRIAL_HEADER = ["trial", "task", "condition", "rep", "agent", "verdict", "speed", "speed verdict"]


def trial_rows(c: ExperimentComparison) -> list[list[str]]:
    return [
        [
            r.trial_id,
            r.task,
            r.condition,
            str(r.repetition),
            r.agent_status or "-",
            r.verdict or ("failed, no result" if r.outcome == "failed" else "-"),
            speed_words(r.speedup) if r.speedup is not None else "-",
            r.speed_verdict or "-",
        ]
        for r in c.trials
    ]


def status_lines(c: ExperimentComparison) -> list[str]:
    """What the reader must know before any figure: missing trials, failures, no speed."""
    out = []
    if c.pending:
        out.append(
            f"**Incomplete:** {len(c.pending)} of {c.scheduled} trials have no outcome yet "
            f"({', '.join(c.pending[:5])}{', ...' if len(c.pending) > 5 else ''}); no treatment "
            "touching them gets a verdict."
        )
    if c.failed:
        out.append(
            f"**Failed:** {c.failed} trial(s) ended without a result after their retries; each "
            "counts as a failure (not accepted, effective speed-up 1.0)."
        )
    if c.interrupted:
        out.append(
            f"**Interrupted:** {len(c.interrupted)} attempt(s) ended without a result and are "
            "listed under *Interrupted attempts*; their keys ran again or count as failed."
        )
    if not c.speed_measured:
        out.append(
            "**Speed was not measured** (`[judge] measure = false`): every speed figure is "
            "empty and only correctness is compared."
        )
    return [line for text in out for line in (text, "")]


def _table(header: list[str], rows: list[list[str]]) -> str:
    def esc(s: str) -> str:
        return s.replace("|", "\\|")

    out = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    out += ["| " + " | ".join(esc(x) for x in row) + " |" for row in rows]
    return "\n".join(out)


def render_markdown(c: ExperimentComparison) -> str:
    parts = [
        f"# Experiment `{c.experiment}`",
        "",
        f"{c.complete} of {c.scheduled} scheduled trials complete; plan sha256 "
        f"`{c.plan_sha256[:16]}`. Speed is the baseline's time over the candidate's, in "
        "words (`1.16x faster`, `1.08x slower`). Effective speed: the accepted candidate's, "
        "else the baseline's (failures count). Unknown tokens or cost are counted as unknown. "
        "Metered: measured by optarena's proxy (unknown when not metered); agent-reported: the "
        "agent's own claim, never checked and never used as the metered figure.",
        "",
        *status_lines(c),
        "## Conditions",
        "",
        _table(CONDITION_HEADER, condition_rows(c)),
        "",
    ]
    if c.by_task:
        parts += ["## Per task", "", _table(TASK_HEADER, task_rows(c)), ""]
    if c.comparisons:
        parts += ["## Comparisons", "", _table(COMPARISON_HEADER, comparison_rows(c)), ""]
    parts += ["## Trials", "", _table(TRIAL_HEADER, trial_rows(c)), ""]
    if c.interrupted:
        parts += ["## Interrupted attempts", "", *(f"- {x}" for x in c.interrupted), ""]
    return "\n".join(parts)
