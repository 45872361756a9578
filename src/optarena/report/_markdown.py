"""The comparison as Markdown: the same tables as the HTML report, without plots."""

from __future__ import annotations

from optarena.experiments import ExperimentComparison, Total


def fmt(v: float | None, digits: int = 3) -> str:
    return "-" if v is None else f"{v:.{digits}f}"


def fmt_ci(ci: list[float] | None, digits: int = 3) -> str:
    return "-" if not ci else f"{ci[0]:.{digits}f}..{ci[1]:.{digits}f}"


def fmt_total(t: Total, digits: int = 2) -> str:
    if t.value is None:
        return f"unknown ({t.unknown})" if t.unknown else "-"
    s = f"{t.value:.{digits}f}"
    return s + (f" (+{t.unknown} unknown)" if t.unknown else "")


def condition_rows(c: ExperimentComparison) -> list[list[str]]:
    return [
        [
            s.name,
            str(s.trials),
            f"{s.accepted}/{s.trials} ({fmt_ci(s.correctness_ci, 2)})",
            f"{s.improved}/{s.trials}",
            f"{fmt(s.speedup_median)} ({fmt_ci(s.speedup_ci)})",
            f"{fmt(s.effective_median)} ({fmt_ci(s.effective_ci)})",
            " ".join(f"{v:.3f}" for v in s.best_of_k) or "-",
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
    "speed-up of accepted (CI)",
    "effective speed-up (CI)",
    "best-of-k",
    "metered tokens",
    "metered cost USD",
    "agent-reported cost USD (unchecked)",
    "agent s",
    "metered USD / accepted",
]

COMPARISON_HEADER = [
    "treatment vs baseline",
    "pairs",
    "diff log eff. speed-up (CI)",
    "diff correctness (CI)",
    "verdict",
    "why",
]


def comparison_rows(c: ExperimentComparison) -> list[list[str]]:
    return [
        [
            f"{t.treatment} vs {t.baseline}",
            str(t.pairs),
            f"{fmt(t.log_speedup_diff, 4)} ({fmt_ci(t.log_speedup_ci, 4)})",
            f"{fmt(t.correctness_diff, 2)} ({fmt_ci(t.correctness_ci, 2)})",
            t.verdict,
            t.why,
        ]
        for t in c.comparisons
    ]


TRIAL_HEADER = ["trial", "task", "condition", "rep", "agent", "verdict", "speed-up", "speed"]


def trial_rows(c: ExperimentComparison) -> list[list[str]]:
    return [
        [
            r.trial_id,
            r.task,
            r.condition,
            str(r.repetition),
            r.agent_status or "-",
            r.verdict or "-",
            fmt(r.speedup),
            r.speed_verdict or "-",
        ]
        for r in c.trials
    ]


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
        f"`{c.plan_sha256[:16]}`. Effective speed-up: the accepted candidate's speed-up, "
        "else 1.0 (failures count). Unknown tokens or cost are counted as unknown. Metered: "
        "measured by optarena's proxy (unknown when not metered); agent-reported: the agent's "
        "own claim, never checked and never used as the metered figure.",
        "",
        "## Conditions",
        "",
        _table(CONDITION_HEADER, condition_rows(c)),
        "",
    ]
    if c.comparisons:
        parts += ["## Comparisons", "", _table(COMPARISON_HEADER, comparison_rows(c)), ""]
    parts += ["## Trials", "", _table(TRIAL_HEADER, trial_rows(c)), ""]
    return "\n".join(parts)
