"""The comparison as one self-contained HTML file: inline CSS and SVG, no script, nothing
fetched, so it renders offline and can be archived with the ledger."""

from __future__ import annotations

from collections.abc import Mapping
from html import escape

from optarena.experiments import ExperimentComparison
from optarena.report._markdown import (
    COMPARISON_HEADER,
    CONDITION_HEADER,
    TRIAL_HEADER,
    comparison_rows,
    condition_rows,
    trial_rows,
)
from optarena.report._svg import interval_chart, line_chart, scatter_chart

CSS = """
body{font-family:system-ui,sans-serif;margin:2rem;max-width:1200px;color:#222}
table{border-collapse:collapse;margin:1rem 0;font-size:13px}
th,td{border:1px solid #ccc;padding:4px 8px;text-align:left;vertical-align:top}
th{background:#f3f3f3}
.charts{display:flex;flex-wrap:wrap;gap:1rem}
.charts svg{border:1px solid #eee;background:#fff}
code{background:#f6f6f6;padding:0 3px}
pre{background:#f8f8f8;padding:6px;overflow-x:auto;font-size:12px;max-height:30em}
"""


def _table(header: list[str], rows: list[list[str]], raw_first: bool = False) -> str:
    """`raw_first`: the first cell of each row is already HTML (a link)."""
    head = "".join(f"<th>{escape(h)}</th>" for h in header)
    body = []
    for row in rows:
        cells = [row[0] if raw_first else escape(row[0]), *(escape(x) for x in row[1:])]
        body.append("<tr>" + "".join(f"<td>{x}</td>" for x in cells) + "</tr>")
    return f"<table><thead><tr>{head}</tr></thead><tbody>{''.join(body)}</tbody></table>"


def _cost_points(c: ExperimentComparison) -> tuple[list[tuple[str, float, float]], str]:
    """Metered cost, else metered tokens, else what the agents reported, the axis saying
    which (never one figure plotted as another)."""
    for axis, value in (
        ("metered cost USD", lambda r: r.metered_cost_usd),
        ("metered tokens", lambda r: r.metered_tokens),
        ("agent-reported cost USD (unchecked)", lambda r: r.reported_cost_usd),
    ):
        known = [(r.condition, value(r), r.effective_speedup) for r in c.trials]
        points = [(s, float(x), y) for s, x, y in known if x is not None]
        if points:
            return points, axis
    return [], "cost"


def _detail(trial_id: str, verdict: str, parts: Mapping[str, str]) -> str:
    body = "".join(
        f"<h4>{escape(name)}</h4><pre>{escape(text)}</pre>" for name, text in parts.items()
    )
    return (
        f"<details id='trial-{escape(trial_id)}'><summary>trial {escape(trial_id)}: "
        f"{escape(verdict)}</summary>{body}</details>"
    )


def render_html(
    c: ExperimentComparison, details: Mapping[str, Mapping[str, str]] | None = None
) -> str:
    """`details`: per trial id, named texts (reasons, diff, logs) shown under the tables; each
    trial row links to its own."""
    points, cost_axis = _cost_points(c)
    cost_chart = (
        scatter_chart("cost vs speed-up, per trial", points, cost_axis, "effective speed-up")
        if points
        else "<p>cost vs speed-up: no trial has a known cost or token count</p>"
    )
    charts = [
        interval_chart(
            "effective speed-up per condition (median, 95% CI)",
            [(s.name, s.effective_median, s.effective_ci) for s in c.conditions],
            "effective speed-up",
        ),
        cost_chart,
        line_chart(
            "expected best effective speed-up of k repetitions",
            {s.name: s.best_of_k for s in c.conditions if s.best_of_k},
            "k",
            "best of k",
        ),
        scatter_chart(
            "timeline: trial order vs agent time",
            [(r.condition, float(i), r.agent_wall_s or 0.0) for i, r in enumerate(c.trials)],
            "trial (in schedule order)",
            "agent wall s",
        ),
    ]
    details = details or {}
    rows = trial_rows(c)
    for row, r in zip(rows, c.trials, strict=True):
        tid = escape(r.trial_id)
        row[0] = f"<a href='#trial-{tid}'>{tid}</a>" if r.trial_id in details else tid
    comparisons = ""
    if c.comparisons:
        comparisons = "<h2>Comparisons</h2>" + _table(COMPARISON_HEADER, comparison_rows(c))
    blocks = "".join(
        _detail(r.trial_id, r.verdict or "no verdict", details[r.trial_id])
        for r in c.trials
        if r.trial_id in details
    )
    return (
        "<!DOCTYPE html><html lang='en'><head><meta charset='utf-8'>"
        f"<title>optarena experiment {escape(c.experiment)}</title><style>{CSS}</style></head>"
        f"<body><h1>Experiment <code>{escape(c.experiment)}</code></h1>"
        f"<p>{c.complete} of {c.scheduled} scheduled trials complete; plan sha256 "
        f"<code>{escape(c.plan_sha256[:16])}</code>. Effective speed-up: the accepted "
        "candidate's speed-up, else 1.0, so failures count. Unknown tokens or cost are "
        "counted as unknown, never as zero. Metered: measured by optarena's proxy; "
        "agent-reported: the agent's own claim, unchecked.</p>"
        f"<div class='charts'>{''.join(charts)}</div>"
        "<h2>Conditions</h2>"
        + _table(CONDITION_HEADER, condition_rows(c))
        + comparisons
        + "<h2>Trials</h2>"
        + _table(TRIAL_HEADER, rows, raw_first=True)
        + (f"<h2>Trial details</h2>{blocks}" if blocks else "")
        + "</body></html>"
    )
