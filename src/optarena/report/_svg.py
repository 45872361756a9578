"""Minimal inline SVG charts: no JavaScript, no fonts or files fetched, readable in any
browser and in a saved file years later."""

from __future__ import annotations

from collections.abc import Callable
from html import escape

W, H, PAD = 560, 260, 48


def _scale(lo: float, hi: float, a: float, b: float) -> Callable[[float], float]:
    span = (hi - lo) or 1.0
    return lambda v: a + (v - lo) / span * (b - a)


def _frame(title: str, body: list[str], xlabel: str, ylabel: str) -> str:
    return (
        f'<svg xmlns="http://www.w3.org/2000/svg" viewBox="0 0 {W} {H}" width="{W}" '
        f'height="{H}" role="img" aria-label="{escape(title)}">'
        f'<text x="{W / 2}" y="16" text-anchor="middle" font-size="13">{escape(title)}</text>'
        f'<line x1="{PAD}" y1="{H - PAD}" x2="{W - 10}" y2="{H - PAD}" stroke="#444"/>'
        f'<line x1="{PAD}" y1="24" x2="{PAD}" y2="{H - PAD}" stroke="#444"/>'
        f'<text x="{W / 2}" y="{H - 8}" text-anchor="middle" font-size="11">{escape(xlabel)}</text>'
        f'<text x="12" y="{H / 2}" font-size="11" transform="rotate(-90 12 {H / 2})" '
        f'text-anchor="middle">{escape(ylabel)}</text>' + "".join(body) + "</svg>"
    )


def interval_chart(
    title: str, rows: list[tuple[str, float | None, list[float] | None]], ylabel: str
) -> str:
    """One point with its interval per label (e.g. effective speed-up per condition); a
    dashed line at 1.0."""
    vals = [v for _, v, _ in rows if v is not None]
    vals += [x for _, _, ci in rows if ci for x in ci]
    lo, hi = min([*vals, 1.0]) * 0.95, max([*vals, 1.0]) * 1.05
    y = _scale(lo, hi, H - PAD, 28)
    step = (W - PAD - 20) / max(len(rows), 1)
    body = []
    one = y(1.0)
    body.append(
        f'<line x1="{PAD}" y1="{one:.1f}" x2="{W - 10}" y2="{one:.1f}" stroke="#999" '
        'stroke-dasharray="4 3"/>'
    )
    body.append(
        f'<text x="{PAD - 4}" y="{one + 4:.1f}" font-size="10" text-anchor="end">1.0</text>'
    )
    for i, (label, v, ci) in enumerate(rows):
        x = PAD + step * (i + 0.5)
        if ci:
            y0, y1 = y(ci[0]), y(ci[1])
            body.append(
                f'<line x1="{x:.1f}" y1="{y0:.1f}" x2="{x:.1f}" y2="{y1:.1f}" stroke="#1f77b4" '
                'stroke-width="2"/>'
            )
        if v is not None:
            yv = y(v)
            body.append(f'<circle cx="{x:.1f}" cy="{yv:.1f}" r="4" fill="#1f77b4"/>')
            body.append(f'<text x="{x + 7:.1f}" y="{yv - 5:.1f}" font-size="10">{v:.3f}</text>')
        body.append(
            f'<text x="{x:.1f}" y="{H - PAD + 14}" font-size="11" text-anchor="middle">'
            f"{escape(label)}</text>"
        )
    return _frame(title, body, "condition", ylabel)


def scatter_chart(
    title: str, points: list[tuple[str, float, float]], xlabel: str, ylabel: str
) -> str:
    """Points (series label, x, y), one colour per series, with a legend."""
    colours = ["#1f77b4", "#d62728", "#2ca02c", "#9467bd", "#ff7f0e", "#8c564b"]
    series = sorted({s for s, _, _ in points})
    xs = [p[1] for p in points] or [0.0, 1.0]
    ys = [p[2] for p in points] or [0.0, 1.0]
    fx = _scale(min(xs), max(xs) or 1.0, PAD + 6, W - 20)
    fy = _scale(min(ys) * 0.95, max(ys) * 1.05, H - PAD - 6, 30)
    body = []
    for s, x, yv in points:
        c = colours[series.index(s) % len(colours)]
        body.append(
            f'<circle cx="{fx(x):.1f}" cy="{fy(yv):.1f}" r="4" fill="{c}" '
            f'fill-opacity="0.75"><title>{escape(s)}: {x:.4g}, {yv:.4g}</title></circle>'
        )
    for i, s in enumerate(series):
        c = colours[i % len(colours)]
        body.append(f'<rect x="{W - 150}" y="{28 + 14 * i}" width="9" height="9" fill="{c}"/>')
        body.append(f'<text x="{W - 137}" y="{36 + 14 * i}" font-size="10">{escape(s)}</text>')
    return _frame(title, body, xlabel, ylabel)


def line_chart(title: str, series: dict[str, list[float]], xlabel: str, ylabel: str) -> str:
    """One polyline per series over x = 1..n (best-of-k)."""
    colours = ["#1f77b4", "#d62728", "#2ca02c", "#9467bd", "#ff7f0e"]
    n = max((len(v) for v in series.values()), default=1)
    allv = [x for v in series.values() for x in v] or [1.0]
    fx = _scale(1, max(n, 2), PAD + 10, W - 160)
    fy = _scale(min(allv) * 0.97, max(allv) * 1.03, H - PAD - 6, 30)
    body = []
    for i, (name, vals) in enumerate(sorted(series.items())):
        c = colours[i % len(colours)]
        pts = " ".join(f"{fx(k + 1):.1f},{fy(v):.1f}" for k, v in enumerate(vals))
        body.append(f'<polyline points="{pts}" fill="none" stroke="{c}" stroke-width="2"/>')
        body.append(
            f'<text x="{W - 150}" y="{36 + 14 * i}" font-size="10" fill="{c}">{escape(name)}</text>'
        )
    for k in range(1, n + 1):
        body.append(
            f'<text x="{fx(k):.1f}" y="{H - PAD + 14}" font-size="10" '
            f'text-anchor="middle">{k}</text>'
        )
    return _frame(title, body, xlabel, ylabel)
