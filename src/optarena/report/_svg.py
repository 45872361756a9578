"""Minimal inline SVG charts: no JavaScript, no fonts or files fetched, readable in any
browser and in a saved file years later.

Every chart has numeric ticks on each numeric axis (class `tick`), its marks (class `mark`),
and intervals with both ends labelled; a chart with nothing to draw is not drawn: the caller
gets a sentence saying why (`NoData`), never an empty frame or a column of dots on an axis.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from html import escape

W, H, LEFT, RIGHT, TOP, BOTTOM = 580, 300, 64, 16, 30, 58
COLOURS = ["#1f77b4", "#d62728", "#2ca02c", "#9467bd", "#ff7f0e", "#8c564b"]


@dataclass(frozen=True)
class Point:
    series: str
    x: float
    y: float


@dataclass(frozen=True)
class Interval:
    """A value with its interval, under a label, in a group (a task)."""

    group: str
    label: str
    value: float | None
    ci: Sequence[float] | None


class NoData(ValueError):
    """Nothing to draw; the message says what is missing, for the page to show instead."""


def nice_ticks(lo: float, hi: float, most: int = 6) -> list[float]:
    """Round tick values (1, 2, 2.5 or 5 times a power of ten) covering [lo, hi]."""
    if not (math.isfinite(lo) and math.isfinite(hi)):
        raise NoData("no finite value")
    if hi <= lo:
        lo, hi = lo - (abs(lo) * 0.1 or 1.0), hi + (abs(hi) * 0.1 or 1.0)
    raw = (hi - lo) / max(most - 1, 1)
    power = 10 ** math.floor(math.log10(raw))
    step = next(m * power for m in (1, 2, 2.5, 5, 10) if m * power >= raw)
    first = math.floor(lo / step) * step
    n = math.ceil((hi - first) / step - 1e-9)
    return [round(first + i * step, 12) for i in range(n + 1)]


def tick_label(v: float) -> str:
    return f"{v:.4g}"


def _scale(lo: float, hi: float, a: float, b: float) -> Callable[[float], float]:
    span = (hi - lo) or 1.0
    return lambda v: a + (v - lo) / span * (b - a)


def _y_axis(ticks: list[float], fy: Callable[[float], float]) -> list[str]:
    out = []
    for t in ticks:
        y = fy(t)
        out.append(
            f'<line x1="{LEFT - 4}" y1="{y:.1f}" x2="{W - RIGHT}" y2="{y:.1f}" stroke="#eee"/>'
            f'<text class="tick y" x="{LEFT - 7}" y="{y + 3.5:.1f}" font-size="10" '
            f'text-anchor="end">{tick_label(t)}</text>'
        )
    return out


def _x_axis(ticks: list[tuple[float, str]]) -> list[str]:
    base = H - BOTTOM
    return [
        f'<line x1="{x:.1f}" y1="{base}" x2="{x:.1f}" y2="{base + 4}" stroke="#444"/>'
        f'<text class="tick x" x="{x:.1f}" y="{base + 15}" font-size="10" '
        f'text-anchor="middle">{escape(label)}</text>'
        for x, label in ticks
    ]


def _frame(title: str, body: list[str], xlabel: str, ylabel: str) -> str:
    base = H - BOTTOM
    return (
        f'<svg xmlns="http://www.w3.org/2000/svg" class="chart" viewBox="0 0 {W} {H}" '
        f'width="{W}" height="{H}" role="img" aria-label="{escape(title)}">'
        f'<text x="{W / 2}" y="17" text-anchor="middle" font-size="13">{escape(title)}</text>'
        + "".join(body)
        + f'<line class="axis" x1="{LEFT}" y1="{base}" x2="{W - RIGHT}" y2="{base}" '
        'stroke="#444"/>'
        f'<line class="axis" x1="{LEFT}" y1="{TOP}" x2="{LEFT}" y2="{base}" stroke="#444"/>'
        f'<text x="{(LEFT + W - RIGHT) / 2}" y="{H - 8}" text-anchor="middle" '
        f'font-size="11">{escape(xlabel)}</text>'
        f'<text x="13" y="{(TOP + base) / 2}" font-size="11" text-anchor="middle" '
        f'transform="rotate(-90 13 {(TOP + base) / 2})">{escape(ylabel)}</text></svg>'
    )


def _y_range(
    values: list[float], include: Sequence[float] = ()
) -> tuple[list[float], float, float]:
    finite = [v for v in [*values, *include] if math.isfinite(v)]
    if not finite:
        raise NoData("no finite value")
    ticks = nice_ticks(min(finite), max(finite))
    return ticks, ticks[0], ticks[-1]


def interval_chart(title: str, rows: Sequence[Interval], ylabel: str, unit: str = "x") -> str:
    """A point and its interval per label, labels grouped (by task), both interval ends and
    the point labelled; a dashed line at 1 (no change). Raises NoData without any value."""
    drawn = [r for r in rows if r.value is not None]
    if not drawn:
        raise NoData("no value to show")
    values = [r.value for r in drawn if r.value is not None]
    values += [x for r in drawn if r.ci for x in r.ci]
    ticks, lo, hi = _y_range(values, (1.0,))
    fy = _scale(lo, hi, H - BOTTOM, TOP + 6)
    step = (W - LEFT - RIGHT) / len(rows)
    body = _y_axis(ticks, fy)
    one = fy(1.0)
    body.append(
        f'<line x1="{LEFT}" y1="{one:.1f}" x2="{W - RIGHT}" y2="{one:.1f}" stroke="#888" '
        'stroke-dasharray="4 3"/>'
    )
    groups: dict[str, list[float]] = {}
    for i, r in enumerate(rows):
        x = LEFT + step * (i + 0.5)
        groups.setdefault(r.group, []).append(x)
        body += _interval_marks(x, r, fy, unit)
    body += _x_axis([(LEFT + step * (i + 0.5), r.label) for i, r in enumerate(rows)])
    for group, xs in groups.items():
        if group:
            body.append(
                f'<text class="group" x="{sum(xs) / len(xs):.1f}" y="{H - BOTTOM + 29}" '
                f'font-size="11" font-weight="bold" text-anchor="middle">{escape(group)}</text>'
            )
    return _frame(title, body, "", ylabel)


def _interval_marks(x: float, r: Interval, fy: Callable[[float], float], unit: str) -> list[str]:
    out = []
    if r.ci:
        lo, hi = sorted(r.ci)
        y0, y1 = fy(lo), fy(hi)
        out.append(
            f'<line class="mark" x1="{x:.1f}" y1="{y0:.1f}" x2="{x:.1f}" y2="{y1:.1f}" '
            'stroke="#1f77b4" stroke-width="2"/>'
        )
        for yv, v in ((y0, lo), (y1, hi)):
            out.append(
                f'<line x1="{x - 5:.1f}" y1="{yv:.1f}" x2="{x + 5:.1f}" y2="{yv:.1f}" '
                f'stroke="#1f77b4"/><text class="end" x="{x - 8:.1f}" y="{yv + 3.5:.1f}" '
                f'font-size="9" fill="#555" text-anchor="end">{v:.2f}{unit}</text>'
            )
    if r.value is not None:
        yv = fy(r.value)
        out.append(f'<circle class="mark" cx="{x:.1f}" cy="{yv:.1f}" r="4" fill="#1f77b4"/>')
        out.append(
            f'<text x="{x + 8:.1f}" y="{yv + 3.5:.1f}" font-size="10" font-weight="bold">'
            f"{r.value:.2f}{unit}</text>"
        )
    return out


def scatter_chart(title: str, points: Sequence[Point], xlabel: str, ylabel: str) -> str:
    """Points, one colour per series, with a legend and numeric ticks on both axes. Raises
    NoData without points."""
    if not points:
        raise NoData("no point to show")
    series = sorted({p.series for p in points})
    xticks, xlo, xhi = _y_range([p.x for p in points])
    yticks, ylo, yhi = _y_range([p.y for p in points])
    fx = _scale(xlo, xhi, LEFT + 6, W - RIGHT - 6)
    fy = _scale(ylo, yhi, H - BOTTOM, TOP + 6)
    body = _y_axis(yticks, fy) + _x_axis([(fx(t), tick_label(t)) for t in xticks])
    for p in points:
        c = COLOURS[series.index(p.series) % len(COLOURS)]
        body.append(
            f'<circle class="mark" cx="{fx(p.x):.1f}" cy="{fy(p.y):.1f}" r="4" fill="{c}" '
            f'fill-opacity="0.8"><title>{escape(p.series)}: {p.x:.4g}, {p.y:.4g}</title></circle>'
        )
    body += _legend(series)
    return _frame(title, body, xlabel, ylabel)


def _legend(names: Sequence[str]) -> list[str]:
    out = []
    for i, s in enumerate(names):
        c = COLOURS[i % len(COLOURS)]
        out.append(
            f'<rect x="{W - RIGHT - 110}" y="{TOP + 14 * i}" width="9" height="9" fill="{c}"/>'
            f'<text x="{W - RIGHT - 97}" y="{TOP + 8 + 14 * i}" font-size="10">{escape(s)}</text>'
        )
    return out


def line_chart(title: str, series: dict[str, list[float]], xlabel: str, ylabel: str) -> str:
    """One polyline (with its points) per series over x = 1..n, numeric ticks on both axes.
    Raises NoData without values."""
    values = [v for vs in series.values() for v in vs]
    if not values:
        raise NoData("no value to show")
    n = max(len(v) for v in series.values())
    yticks, ylo, yhi = _y_range(values, (1.0,))
    fx = _scale(1, max(n, 2), LEFT + 16, W - RIGHT - 130)
    fy = _scale(ylo, yhi, H - BOTTOM, TOP + 6)
    body = _y_axis(yticks, fy) + _x_axis([(fx(k), str(k)) for k in range(1, n + 1)])
    names = sorted(series)
    for i, name in enumerate(names):
        c = COLOURS[i % len(COLOURS)]
        pts = [(fx(k + 1), fy(v)) for k, v in enumerate(series[name])]
        path = " ".join(f"{x:.1f},{y:.1f}" for x, y in pts)
        body.append(
            f'<polyline class="mark" points="{path}" fill="none" stroke="{c}" stroke-width="2"/>'
        )
        body += [f'<circle cx="{x:.1f}" cy="{y:.1f}" r="3" fill="{c}"/>' for x, y in pts]
    body += _legend(names)
    return _frame(title, body, xlabel, ylabel)
