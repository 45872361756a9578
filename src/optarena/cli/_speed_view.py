"""Human views of speed results: a short table per comparison and a progress bar while timing.

Speed reads one way everywhere (`optarena.report.speed_words`): `1.16x faster`, `1.08x slower`,
from the speed-up (the baseline's time over the candidate's); JSON keeps `speedup` and the time
`ratio` beside it."""

from __future__ import annotations

import math
from collections.abc import Callable, Iterator
from contextlib import contextmanager

from rich.console import Console, Group, RenderableType
from rich.progress import BarColumn, Progress, SpinnerColumn, TextColumn, TimeElapsedColumn
from rich.table import Table

from optarena.cli._safe import escape
from optarena.records import (
    LEGACY_NOTE,
    AAControl,
    AnyMetrics,
    Comparison,
    ExternalMetrics,
    LegacyMetrics,
    Metrics,
    Summary,
)
from optarena.report import interval_words, speed_words

VERDICT_COLORS = {
    "improved": "green",
    "regressed": "red",
    "no_difference": "cyan",
    "inconclusive": "yellow",
}


def duration(ns: float) -> str:
    if ns >= 1e9:
        return f"{ns / 1e9:.2f} s"
    if ns >= 1e6:
        return f"{ns / 1e6:.2f} ms"
    return f"{ns / 1e3:.1f} us"


def _ratio(summary: Summary) -> str:
    """A speed-up in words with its interval (`optarena.report.speed_words`)."""
    if summary.speedup is None:
        return "-"
    return f"{speed_words(summary.speedup)} ({interval_words(summary.speedup_ci)})"


def speed_text(metrics: AnyMetrics | None, verdict: str | None = None) -> str:
    """The speed result in a few words: `1.25x faster, interval 1.14x..1.33x faster,
    improved`; why there is none when there is none. An older protocol's figure is shown as
    such: it is never compared with today's."""
    if metrics is None:
        return "none (rejected)" if verdict == "rejected" else "not measured"
    if isinstance(metrics, LegacyMetrics):
        return legacy_text(metrics)
    o = metrics.overall
    if o.speedup is None:
        return f"no estimate, {o.verdict}"
    return f"{speed_words(o.speedup)}, {interval_words(o.speedup_ci)}, {o.verdict}"


def legacy_text(m: LegacyMetrics) -> str:
    o = m.overall
    figure = speed_words(o.speedup) if o is not None else "no estimate"
    return f"older protocol (v{m.protocol_version}): {figure}, {m.verdict or 'no verdict'}"


def speed_markup(metrics: AnyMetrics | None, verdict: str | None = None) -> str:
    """`speed_text` with its verdict coloured."""
    text = escape(speed_text(metrics, verdict))
    v = metrics.verdict if metrics is not None else None
    if v and text.endswith(v):
        text = text[: -len(v)] + _verdict(v)
    return text


def result_cell(metrics: AnyMetrics | None, verdict: str | None, codes: list[str]) -> str:
    """A table cell: the reason codes of a rejection, else the speed and its verdict."""
    if verdict == "rejected" or codes:
        return escape(", ".join(codes)) or "-"
    if verdict is None:
        return "-"
    if metrics is None:
        return "not measured"
    if isinstance(metrics, LegacyMetrics):
        return escape(legacy_text(metrics))
    o = metrics.overall
    if o.speedup is None:
        return _verdict(o.verdict)
    return f"{speed_words(o.speedup)} {_verdict(o.verdict)}"


def _verdict(v: str) -> str:
    return f"[bold {VERDICT_COLORS.get(v, 'white')}]{v}[/]"


OVERALL_LABEL = "overall (H-L)"
OVERALL_NOTE = (
    "overall (H-L): the Hodges-Lehmann estimate over process pairs of each pair's mean "
    "log-ratio across workloads, with its interval; not a geometric mean of the workload "
    "rows, so it can lie outside all of them"
)


def why_inconclusive(c: Comparison) -> list[str]:
    """What limited an inconclusive comparison (too few pairs, noise against the minimum
    effect, the budget) and what would help; nothing for a decided one."""
    o, p, stop = c.overall, c.protocol, c.stop
    if o.verdict != "inconclusive":
        return []
    m, pairs, budget = p.min_effect, stop.pairs, stop.budget_s
    ci = o.ratio_ci
    if not ci or o.ratio is None:
        if "zero_variance" in o.notes:
            return ["inconclusive: every pair gave the same ratio (zero variance): no interval"]
        lines = [
            f"inconclusive: {pairs} process pair(s) are too few for an interval (at least "
            f"{p.min_pairs} needed)"
        ]
    else:
        half = math.sqrt(ci[1] / ci[0]) - 1  # the interval's half-width, relative
        ratio = o.ratio
        if half > m:
            lines = [
                f"inconclusive: the noise (interval +-{half:.1%}) is wider than the minimum "
                f"effect ({m:.1%}), after {pairs} process pairs"
            ]
        else:
            lines = [
                f"inconclusive: the estimate ({speed_words(1 / ratio)}) is too close to the "
                f"minimum effect +-{m:.1%} for an interval of +-{half:.1%} to fall on one side"
            ]
    if stop.reason in ("budget", "deadline"):
        if ci:
            more = f"--budget-s {4 * budget:g} gives about 4x the pairs, half the interval width"
        else:
            per_pair = stop.used_s / max(pairs, 1)
            enough = math.ceil(1.5 * p.min_pairs * per_pair)
            more = f"--budget-s {enough} gives about {p.min_pairs} or more"
        lines.append(
            f"  measuring stopped at the budget ({stop.used_s:.1f} of {budget:g} s); {more}"
        )
    elif stop.reason == "max_pairs":
        lines.append(f"  measuring stopped at the most pairs the protocol allows ({pairs})")
    if ci and math.sqrt(ci[1] / ci[0]) - 1 > m:
        lines.append(
            f"  or ask a coarser question: --min-effect {_round_up(math.sqrt(ci[1] / ci[0]) - 1)}"
        )
    return lines


def _round_up(x: float) -> str:
    return f"{math.ceil(x * 100) / 100:g}"


def aa_warning(aa: AAControl, min_effect: float) -> str | None:
    """A warning when the A/A noise floor is wider than the minimum effect asked for."""
    floor = aa.noise_floor
    if floor is None or floor <= min_effect:
        return None
    return (
        f"warning: the A/A noise floor +-{floor:.1%} is wider than the minimum effect "
        f"{min_effect:.1%}: changes between the two read inconclusive on this machine; a "
        f"quieter machine, a larger --budget-s, or --min-effect {_round_up(floor)} would help"
    )


def comparison_view(c: Comparison, title: str | None = None) -> RenderableType:
    """Per workload and overall: median times, time ratio b/a with interval, verdict."""
    arms = c.arms
    table = Table(title=title, header_style="bold", expand=False)
    table.add_column("workload")
    table.add_column(str(arms.get("a", "a"))[-28:], justify="right")
    table.add_column(str(arms.get("b", "b"))[-28:], justify="right")
    table.add_column("speed of b (95% interval)", justify="right")
    table.add_column("verdict")
    for w in c.workloads:
        s = w.summary
        a, b = duration(w.median_a_ns), duration(w.median_b_ns)
        table.add_row(w.name, a, b, _ratio(s), _verdict(s.verdict))
    o = c.overall
    table.add_row(f"[bold]{OVERALL_LABEL}[/]", "", "", _ratio(o), _verdict(o.verdict))
    stop = c.stop
    lines = [
        escape(o.why),
        *(escape(line) for line in why_inconclusive(c)),
        escape(OVERALL_NOTE),
        escape(f"clock: {c.clock_note}"),
        f"stopped: {stop.reason} after {stop.pairs} process pairs, {stop.rounds} "
        f"rounds, {stop.samples} timed calls, {stop.used_s:.1f} of {stop.budget_s:g} s",
    ]
    return Group(table, *lines)


def metrics_view(m: AnyMetrics) -> RenderableType:
    """The judge's speed metrics: the comparison, the A/A control and instruction counts, or
    an external benchmark's rounds."""
    if isinstance(m, ExternalMetrics):
        return benchmark_view(m)
    if isinstance(m, LegacyMetrics):
        return escape(f"{legacy_text(m)}; {LEGACY_NOTE}")
    return _paired_view(m)


def _paired_view(m: Metrics) -> RenderableType:
    parts: list[RenderableType] = [comparison_view(m, title="speed against the baseline")]
    if m.aa is not None:
        floor = m.aa.noise_floor
        o = m.aa.comparison.overall
        floor_s = "unknown" if floor is None else f"+-{floor:.1%}"
        parts.append(
            f"A/A control: {_verdict(o.verdict)}, {_ratio(o)}; noise floor "
            f"{floor_s} (effects inside it are never improved/regressed)"
        )
        warning = aa_warning(m.aa, m.protocol.min_effect)
        if warning:
            parts.append(f"[yellow]{escape(warning)}[/]")
    ins = m.instructions
    if ins.available:
        ratios = ", ".join(f"{w} {r:.3f}" for w, r in ins.ratio.items())
        parts.append(f"instructions b/a ({ins.tool}): {ratios}")
    else:
        parts.append(escape(f"instructions: not counted ({ins.reason})"))
    return Group(*parts)


def benchmark_view(m: ExternalMetrics) -> RenderableType:
    """An external benchmark: its rounds, the estimate and what the OS's time says."""
    table = Table(title="the project's benchmark, baseline against candidate", header_style="bold")
    # The OS's times beside the metric: what the benchmark says about itself next to what the
    # kernel counted for the same runs (start-up included); with a scale, the low size's too.
    cols = ["round", "order", "baseline", "candidate", "wall b / c (s)", "cpu b / c (s)"]
    if m.scale:
        cols[4:] = [f"{c} @{m.scale[1]}" for c in cols[4:]] + [f"cpu b / c (s) @{m.scale[0]}"]
    for col in cols:
        table.add_column(col, justify="right")
    for i, r in enumerate(m.rounds, 1):
        row = [
            str(i), r.order, f"{r.baseline:.6g}", f"{r.candidate:.6g}",
            f"{r.baseline_wall_s:.2f} / {r.candidate_wall_s:.2f}",
            _pair_s(r.baseline_cpu_s, r.candidate_cpu_s),
        ]  # fmt: skip
        if m.scale:
            low = r.low
            row.append("-" if low is None else _pair_s(low.baseline_cpu_s, low.candidate_cpu_s))
        table.add_row(*row)
    o = m.overall
    lines = [
        f"{_ratio(o)} (ratio {o.ratio if o.ratio is not None else '-'}: "
        f"{escape(m.ratio_meaning)}): {_verdict(o.verdict)}",
        escape(o.why),
        escape(
            f"stopped: {m.stop.reason} after {m.stop.rounds} rounds (budget {m.stop.budget_s:g} s)"
            + (
                "; the metric had decided before the OS could tell, so the rounds the spec "
                "allowed ran and the OS looked once more"
                if m.stop.os_second_look
                else ""
            )
        ),
    ]
    c = m.os_check
    if c is not None and c.outcome != "not_needed":
        colour = "green" if c.outcome == "confirmed" else "yellow"
        lines.append(f"[{colour}]OS check: {c.outcome} ({c.basis}): {escape(c.why)}[/]")
        if c.advice:
            lines.append(escape(f"to resolve it: {c.advice}"))
    elif c is None:  # a record from before the OS check had an outcome
        lines += [f"[yellow]{escape(note)}[/]" for note in m.crosscheck]
    return Group(table, *lines)


def _pair_s(b: float | None, c: float | None) -> str:
    return "-" if b is None or c is None else f"{b:.2f} / {c:.2f}"


@contextmanager
def progress_bar(
    console: Console, enabled: bool, first: str
) -> Iterator[Callable[[str, float], None] | None]:
    """A transient bar on stderr, fed by the judge's (message, fraction) progress callback."""
    if not enabled:
        yield None
        return
    columns = (
        SpinnerColumn(),
        TextColumn("{task.description}"),
        BarColumn(),
        TimeElapsedColumn(),
    )
    with Progress(*columns, console=console, transient=True) as bar:
        task_id = bar.add_task(first, total=1.0)

        def update(message: str, fraction: float) -> None:
            bar.update(task_id, description=message, completed=fraction)

        yield update
