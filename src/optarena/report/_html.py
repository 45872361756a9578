"""The comparison as one self-contained HTML file: inline CSS and SVG, no script, nothing
fetched, so it renders offline and can be archived with the ledger.

What the reader must know comes first (missing, failed and interrupted trials, speed not
measured), then the charts (each with numeric axes, or a sentence saying why it is not drawn),
the tables per condition and per task (tasks are never only pooled), the treatment comparisons,
every trial and every interrupted attempt, and per trial its reasons, diff and log tails.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from html import escape

from optarena.records import ExperimentComparison, TrialRow
from optarena.report._markdown import (
    COMPARISON_HEADER,
    CONDITION_HEADER,
    TASK_HEADER,
    TRIAL_HEADER,
    comparison_rows,
    condition_rows,
    status_lines,
    task_rows,
    trial_rows,
)
from optarena.report._svg import Interval, NoData, Point, interval_chart, line_chart, scatter_chart

CSS = """
body{font-family:system-ui,sans-serif;margin:2rem;max-width:1220px;color:#222}
table{border-collapse:collapse;margin:1rem 0;font-size:13px}
th,td{border:1px solid #ccc;padding:4px 8px;text-align:left;vertical-align:top}
th{background:#f3f3f3}
.charts{display:flex;flex-wrap:wrap;gap:1rem}
.charts svg{border:1px solid #eee;background:#fff}
.nodata{width:540px;border:1px dashed #bbb;padding:1rem;color:#555;background:#fafafa}
.status{border-left:4px solid #d62728;padding:.2rem .8rem;background:#fff6f6}
code{background:#f6f6f6;padding:0 3px}
pre{background:#f8f8f8;padding:6px;overflow-x:auto;font-size:12px;max-height:30em}
"""

SPEED_AXIS = "speed-up (x; above 1 = faster)"


def _table(header: list[str], rows: list[list[str]], raw_first: bool = False) -> str:
    """`raw_first`: the first cell of each row is already HTML (a link)."""
    head = "".join(f"<th>{escape(h)}</th>" for h in header)
    body = []
    for row in rows:
        cells = [row[0] if raw_first else escape(row[0]), *(escape(x) for x in row[1:])]
        body.append("<tr>" + "".join(f"<td>{x}</td>" for x in cells) + "</tr>")
    return f"<table><thead><tr>{head}</tr></thead><tbody>{''.join(body)}</tbody></table>"


def _no_chart(title: str, why: str) -> str:
    return f"<p class='nodata'><b>{escape(title)}</b>: {escape(why)}</p>"


def _speed_charts(c: ExperimentComparison) -> list[str]:
    title = "effective speed-up per condition (median, 95% interval)"
    if not c.speed_measured:
        return [_no_chart(title, "speed was not measured ([judge] measure = false)")]
    rows = [Interval("", s.name, s.effective_median, s.effective_ci) for s in c.conditions]
    out = [_chart(title, lambda: interval_chart(title, rows, SPEED_AXIS))]
    tasks = sorted({s.task for s in c.by_task if s.task})
    if len(tasks) > 1:
        per = "effective speed-up per task and condition (median, 95% interval)"
        rows = [
            Interval(s.task or "", s.name, s.effective_median, s.effective_ci) for s in c.by_task
        ]
        out.append(_chart(per, lambda: interval_chart(per, rows, SPEED_AXIS)))
    best = {s.name: s.best_of_k for s in c.conditions if s.best_of_k}
    k_title = "expected best effective speed-up of k repetitions"
    out.append(
        _chart(k_title, lambda: line_chart(k_title, best, "k (repetitions kept)", SPEED_AXIS))
    )
    out.append(_cost_chart(c))
    return out


def _chart(title: str, draw: Callable[[], str]) -> str:
    try:
        return draw()
    except NoData as e:
        return _no_chart(title, str(e))


def _cost_chart(c: ExperimentComparison) -> str:
    """Per trial against effective speed-up: metered cost, else metered tokens, else what the
    agents reported, the axis saying which (never one figure plotted as another); only figures
    above zero. With none, a sentence: a column of dots on the axis would say nothing."""
    figures: list[tuple[str, Callable[[TrialRow], float | int | None]]] = [
        ("metered cost USD (all attempts)", lambda r: r.metered_cost_usd),
        ("metered tokens (all attempts)", lambda r: r.metered_tokens),
        ("agent-reported cost USD (unchecked)", lambda r: r.reported_cost_usd),
    ]
    for axis, value in figures:
        points = [
            Point(r.condition, float(v), r.effective_speedup) for r in c.trials if (v := value(r))
        ]
        if points:
            return scatter_chart(f"{axis.split(' (')[0]} vs effective speed-up, per trial",
                                 points, axis, SPEED_AXIS)  # fmt: skip
    unknown = sum(r.metered_cost_usd is None for r in c.trials)
    return _no_chart(
        "cost vs effective speed-up, per trial", f"no cost recorded: {unknown} trial(s) of "
        f"unknown metered cost, {len(c.trials) - unknown} at $0, no tokens or reported cost",
    )  # fmt: skip


def _timeline(c: ExperimentComparison) -> str:
    title = "timeline: agent time per trial, in schedule order"
    points = [
        Point(r.condition, float(i + 1), r.agent_wall_s)
        for i, r in enumerate(c.trials)
        if r.agent_wall_s is not None
    ]
    chart = _chart(title, lambda: scatter_chart(title, points, "trial (schedule order)", "agent s"))
    missing = len(c.trials) - len(points)
    note = f"<p>{missing} trial(s) without an agent time are not drawn.</p>" if missing else ""
    return chart + note


def _detail(trial_id: str, verdict: str, parts: Mapping[str, str]) -> str:
    body = "".join(
        f"<h4>{escape(name)}</h4><pre>{escape(text)}</pre>" for name, text in parts.items()
    )
    return (
        f"<details id='trial-{escape(trial_id)}'><summary>trial {escape(trial_id)}: "
        f"{escape(verdict)}</summary>{body}</details>"
    )


def _markup(line: str) -> str:
    """A status line's `**bold**`, `*italic*` and `code` as HTML, the rest escaped."""
    text = escape(line)
    text = re.sub(r"\*\*(.+?)\*\*", r"<b>\1</b>", text)
    text = re.sub(r"\*(.+?)\*", r"<i>\1</i>", text)
    return re.sub(r"`(.+?)`", r"<code>\1</code>", text)


def render_html(
    c: ExperimentComparison, details: Mapping[str, Mapping[str, str]] | None = None
) -> str:
    """`details`: per trial id, named texts (reasons, diff, logs) shown under the tables; each
    trial row links to its own."""
    details = details or {}
    rows = trial_rows(c)
    for row, r in zip(rows, c.trials, strict=True):
        tid = escape(r.trial_id)
        row[0] = f"<a href='#trial-{tid}'>{tid}</a>" if r.trial_id in details else tid
    status = "".join(f"<p class='status'>{_markup(x)}</p>" for x in status_lines(c) if x)
    sections = [
        "<h2>Conditions</h2>" + _table(CONDITION_HEADER, condition_rows(c)),
        "<h2>Per task</h2>" + _table(TASK_HEADER, task_rows(c)) if c.by_task else "",
        "<h2>Comparisons</h2>" + _table(COMPARISON_HEADER, comparison_rows(c))
        if c.comparisons
        else "",
        "<h2>Trials</h2>" + _table(TRIAL_HEADER, rows, raw_first=True),
        "<h2>Interrupted attempts</h2><ul>"
        + "".join(f"<li>{escape(x)}</li>" for x in c.interrupted)
        + "</ul>"
        if c.interrupted
        else "",
    ]
    blocks = "".join(
        _detail(r.trial_id, r.verdict or r.outcome, details[r.trial_id])
        for r in c.trials
        if r.trial_id in details
    )
    charts = [*_speed_charts(c), _timeline(c)]
    return (
        "<!DOCTYPE html><html lang='en'><head><meta charset='utf-8'>"
        f"<title>optarena experiment {escape(c.experiment)}</title><style>{CSS}</style></head>"
        f"<body><h1>Experiment <code>{escape(c.experiment)}</code></h1>"
        f"<p>{c.complete} of {c.scheduled} scheduled trials complete; plan sha256 "
        f"<code>{escape(c.plan_sha256[:16])}</code>. Speed is the baseline's time over the "
        "candidate's (above 1: faster); the effective speed-up is the accepted candidate's, "
        "else 1.0, so failures count. Unknown tokens or cost are counted as unknown, never "
        "as zero. Metered: measured by optarena's proxy; agent-reported: the agent's own "
        f"claim, unchecked.</p>{status}"
        f"<div class='charts'>{''.join(charts)}</div>"
        + "".join(sections)
        + (f"<h2>Trial details</h2>{blocks}" if blocks else "")
        + "</body></html>"
    )
