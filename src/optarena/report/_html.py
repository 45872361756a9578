"""The comparison as one self-contained HTML file: inline CSS and SVG, no script, nothing
fetched, so it renders offline and can be archived with the ledger."""

from __future__ import annotations

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
"""


def _table(header: list[str], rows: list[list[str]], ids: list[str] | None = None) -> str:
    head = "".join(f"<th>{escape(h)}</th>" for h in header)
    body = []
    for i, row in enumerate(rows):
        attr = f' id="{escape(ids[i])}"' if ids else ""
        body.append(f"<tr{attr}>" + "".join(f"<td>{escape(x)}</td>" for x in row) + "</tr>")
    return f"<table><thead><tr>{head}</tr></thead><tbody>{''.join(body)}</tbody></table>"


def render_html(c: ExperimentComparison, trial_links: dict[str, str] | None = None) -> str:
    """`trial_links`: trial id -> a relative link (e.g. to its diff and logs) shown per row."""
    charts = [
        interval_chart(
            "effective speed-up per condition (median, 95% CI)",
            [(s.name, s.effective_median, s.effective_ci) for s in c.conditions],
            "effective speed-up",
        ),
        scatter_chart(
            "cost vs speed-up, per trial",
            [
                (r.condition, r.cost_usd, r.effective_speedup)
                for r in c.trials
                if r.cost_usd is not None
            ]
            or [(r.condition, float(r.tokens or 0), r.effective_speedup) for r in c.trials],
            "cost USD (tokens where cost is unknown)",
            "effective speed-up",
        ),
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
    rows = trial_rows(c)
    links = trial_links or {}
    for row, r in zip(rows, c.trials, strict=True):
        if r.trial_id in links:
            row[0] = f"{r.trial_id} ({links[r.trial_id]})"
    comparisons = ""
    if c.comparisons:
        comparisons = "<h2>Comparisons</h2>" + _table(COMPARISON_HEADER, comparison_rows(c))
    return (
        "<!DOCTYPE html><html lang='en'><head><meta charset='utf-8'>"
        f"<title>optarena experiment {escape(c.experiment)}</title><style>{CSS}</style></head>"
        f"<body><h1>Experiment <code>{escape(c.experiment)}</code></h1>"
        f"<p>{c.complete} of {c.scheduled} scheduled trials complete; plan sha256 "
        f"<code>{escape(c.plan_sha256[:16])}</code>. Effective speed-up: the accepted "
        "candidate's speed-up, else 1.0, so failures count. Unknown tokens or cost are "
        "counted as unknown, never as zero.</p>"
        f"<div class='charts'>{''.join(charts)}</div>"
        "<h2>Conditions</h2>"
        + _table(CONDITION_HEADER, condition_rows(c))
        + comparisons
        + "<h2>Trials</h2>"
        + _table(TRIAL_HEADER, rows, [f"trial-{r.trial_id}" for r in c.trials])
        + "</body></html>"
    )
