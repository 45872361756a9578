"""The HTML report: self-contained (nothing fetched), every chart with numeric axes and marks
(checked on the pixels Chromium renders, with an axis-less and an empty chart as negative
controls), tasks shown apart, failed and interrupted trials mentioned, and no cost chart made
of dots on an axis when no cost was recorded. The screenshot is kept in build/test-artifacts/."""

from __future__ import annotations

import re
import shutil
import subprocess
from pathlib import Path

import pytest

# private: the comparison's steps build literal conditions; the SVG's frame to read
# the chart's pixels
from optarena.experiments._compare import compare_treatment, summarize_condition
from optarena.records import ExperimentComparison, TrialRow
from optarena.report import render_html, render_markdown
from optarena.report._svg import BOTTOM, LEFT, RIGHT, TOP, H, W

ARTIFACTS = Path(__file__).resolve().parents[2] / "build" / "test-artifacts"
CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")
TASKS = ("rmsnorm", "softmax")


def _row(
    i: int, task: str, cond: str, rep: int, verdict: str | None, speedup: float | None,
    cost: float | None = None, outcome: str = "complete",
) -> TrialRow:  # fmt: skip
    return TrialRow(
        trial_id=f"t{i:04d}",
        task=task,
        condition=cond,
        repetition=rep,
        outcome=outcome,  # type: ignore[arg-type]
        attempts=1 if outcome == "complete" else 3,
        agent_status="completed",
        verdict=verdict,
        speedup=speedup,
        speed_verdict="improved" if speedup and speedup > 1.1 else "inconclusive",
        effective_speedup=speedup if verdict == "accepted" and speedup else 1.0,
        metered_tokens=1000 + 10 * i,
        metered_cost_usd=cost,
        reported_tokens=None,
        reported_cost_usd=0.5,  # the agent's claim: shown apart, never as the metered cost
        agent_wall_s=5.0 + i,
        wall_s=20.0 + i,
        identity="same",
    )


def _comparison(rows: list[TrialRow], interrupted: list[str]) -> ExperimentComparison:
    conditions = [
        summarize_condition(n, [r for r in rows if r.condition == n], 0, 0)
        for n in ("plain", "hint")
    ]
    by_task = [
        summarize_condition(n, [r for r in rows if r.condition == n and r.task == t], 0, 0)
        .model_copy(update={"task": t})
        for t in TASKS
        for n in ("plain", "hint")
    ]  # fmt: skip
    return ExperimentComparison(
        experiment="demo <&>",
        plan_sha256="ab" * 32,
        scheduled=len(rows),
        complete=sum(r.outcome == "complete" for r in rows),
        failed=sum(r.outcome == "failed" for r in rows),
        pending=[],
        interrupted=interrupted,
        conditions=conditions,
        by_task=by_task,
        comparisons=[compare_treatment("hint", "plain", rows, 0.05)],
        trials=rows,
    )


def comparison() -> ExperimentComparison:
    """Two tasks on which the hint helps differently, one failed key, one interrupted attempt."""
    speed = {("rmsnorm", "plain"): 1.05, ("rmsnorm", "hint"): 1.45,
             ("softmax", "plain"): 1.10, ("softmax", "hint"): 1.02}  # fmt: skip
    rows, i = [], 0
    for t in TASKS:
        for rep in range(3):
            for cond in ("plain", "hint"):
                s = speed[(t, cond)] + 0.04 * rep
                failed = (t, cond, rep) == ("softmax", "hint", 2)
                rows.append(_row(
                    i, t, cond, rep, None if failed else "accepted", None if failed else s,
                    cost=None if i == 0 else 0.01 * i, outcome="failed" if failed else "complete",
                ))  # fmt: skip
                i += 1
    return _comparison(rows, ["t0011 (softmax/hint/2): during judge: RuntimeError: boom"])


def test_the_html_is_self_contained_and_escaped() -> None:
    details = {"t0001": {"diff": "+ return x <script>alert(1)</script>"}}
    html = render_html(comparison(), details)
    assert "<script" not in html.replace("&lt;script&gt;", "")
    refs = re.findall(r"(?:src|href)=['\"]([^'\"]+)", html)
    assert refs and all(r.startswith("#trial-") for r in refs), refs
    urls = set(re.findall(r"https?://[^\"' ]*", html))
    assert urls == {"http://www.w3.org/2000/svg"}  # the SVG namespace only
    assert "demo &lt;&amp;&gt;" in html and "trial-t0001" in html
    md = render_markdown(comparison())
    assert "| hint vs plain | 6 |" in md and "unknown" in md  # trial 0's cost is unknown


def test_the_report_says_what_a_reader_must_know() -> None:
    html = render_html(comparison())
    # tasks apart: a chart and a table per task and condition
    assert "effective speed-up per task and condition" in html and "<h2>Per task</h2>" in html
    assert html.count('class="group"') == 2  # rmsnorm and softmax under their conditions
    # the failed key and the interrupted attempt are mentioned, not only counted
    assert "<b>Failed:</b> 1 trial(s)" in html and "<b>Interrupted:</b> 1 attempt(s)" in html
    assert "t0011 (softmax/hint/2): during judge: RuntimeError: boom" in html
    # numeric axes and labelled interval ends on every chart
    charts = re.findall(r"<svg.*?</svg>", html)
    assert len(charts) == 5
    for svg in charts:
        assert len(re.findall(r'class="tick y"', svg)) >= 3, svg[:200]
        assert 'class="mark"' in svg
    interval = charts[0]
    ends = re.findall(r'class="end"[^>]*>([0-9.]+)x<', interval)
    assert len(ends) == 4  # both ends of both conditions' intervals


def test_no_cost_recorded_is_said_not_drawn() -> None:
    cells = [(c, r) for r in range(3) for c in ("plain", "hint")]
    rows = [
        _row(i, "rmsnorm", c, r, "accepted", 1.2, cost=0.0 if i % 2 else None)
        for i, (c, r) in enumerate(cells)
    ]
    rows = [r.model_copy(update={"metered_tokens": None, "reported_cost_usd": None}) for r in rows]
    html = render_html(_comparison(rows, []))
    assert "no cost recorded: 3 trial(s) of unknown metered cost, 3 at $0" in html
    assert "vs effective speed-up, per trial</text>" not in html  # no chart of it


def test_a_correctness_only_experiment_draws_no_speed() -> None:
    c = comparison().model_copy(update={"speed_measured": False})
    html = render_html(c)
    assert "speed was not measured" in html and "Speed was not measured" in html


# -- what Chromium renders --------------------------------------------------------------------


def _screenshot(tmp_path: Path, html: str, name: str, size: tuple[int, int]) -> tuple[str, Path]:
    page = tmp_path / f"{name}.html"
    page.write_text(html)
    shot = tmp_path / f"{name}.png"
    common = ["--headless", "--no-sandbox", "--disable-gpu", "--enable-logging=stderr", "--v=0",
              "--hide-scrollbars", "--force-device-scale-factor=1"]  # fmt: skip
    dom = subprocess.run(
        [str(CHROMIUM), *common, "--dump-dom", page.as_uri()],
        capture_output=True, text=True, timeout=120, check=True,
    )  # fmt: skip
    subprocess.run(
        [str(CHROMIUM), *common, f"--window-size={size[0]},{size[1]}", f"--screenshot={shot}",
         page.as_uri()],
        capture_output=True, text=True, timeout=120, check=True,
    )  # fmt: skip
    console = "\n".join(line for line in dom.stderr.splitlines() if ":CONSOLE" in line)
    return console, shot


def chart_problems(png: Path, top: int = 0) -> list[str]:
    """What the chart drawn at `top` in a screenshot lacks: numeric labels left of the y axis
    (at least two separate rows of dark pixels) and marks inside the plot (coloured pixels
    outside the legend)."""
    from PIL import Image

    img = Image.open(png).convert("RGB")
    px = img.load()
    assert px is not None
    dark_rows = [
        y for y in range(top + TOP, top + H - BOTTOM + 6)
        if any(sum(px[x, y]) < 300 for x in range(20, LEFT - 6))
    ]  # fmt: skip
    bands = sum(1 for a, b in zip([-9, *dark_rows], dark_rows, strict=False) if b - a > 1)
    coloured = sum(
        1
        for x in range(LEFT + 2, W - RIGHT - 2)
        for y in range(top + TOP + 2, top + H - BOTTOM - 2)
        if not (x > W - RIGHT - 115 and y < top + TOP + 90)  # the legend
        and max(px[x, y]) - min(px[x, y]) > 80
    )
    problems = []
    if bands < 2:
        problems.append(f"no numeric y axis ({bands} label row(s))")
    if coloured < 25:
        problems.append(f"no marks ({coloured} coloured pixels)")
    return problems


def _stacked(svgs: list[str]) -> str:
    """The charts one under the other, each at a known offset (`H` apart)."""
    rows = "".join(f"<div style='height:{H}px;width:{W}px'>{svg}</div>" for svg in svgs)
    return f"<!DOCTYPE html><html><body style='margin:0'>{rows}</body></html>"


@pytest.mark.skipif(CHROMIUM is None, reason="Chromium is not installed (.ci/run installs it)")
def test_every_chart_chromium_renders_has_axes_and_marks(tmp_path: Path) -> None:
    # negative control: the console check sees a page that logs
    noisy, _ = _screenshot(
        tmp_path, "<p>x</p><script>console.error('boom')</script>", "noisy", (200, 100)
    )
    assert "boom" in noisy
    html = render_html(comparison(), {"t0001": {"diff": "+x"}})
    console, shot = _screenshot(tmp_path, html, "report", (1280, 2600))
    assert console == "" and shot.stat().st_size > 20_000
    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    shutil.copyfile(shot, ARTIFACTS / "experiment-report.png")
    charts = re.findall(r"<svg.*?</svg>", html)
    assert len(charts) == 5
    # negative controls: the same check must see a chart without its ticks, one without marks
    axisless = re.sub(r'<text class="tick y"[^>]*>[^<]*</text>', "", charts[0])
    empty = re.sub(r'<(circle|line|polyline) class="mark"[^>]*/?>(</circle>)?', "", charts[2])
    empty = re.sub(r'<circle cx[^>]*fill="#[0-9a-f]{6}"/>', "", empty)
    every = [*charts, axisless, empty]
    _, png = _screenshot(tmp_path, _stacked(every), "charts", (W, H * len(every)))
    for i in range(len(charts)):
        assert chart_problems(png, i * H) == [], (i, charts[i][:160])
    assert chart_problems(png, len(charts) * H)[0].startswith("no numeric y axis")
    assert chart_problems(png, (len(charts) + 1) * H)[0].startswith("no marks")


def test_metered_and_agent_reported_costs_stay_in_their_own_labelled_columns() -> None:
    """Every trial here reports $0.50 itself; the metered figures are what the tables and the
    cost chart use, and the agents' claims have their own column, labelled as such."""
    c = comparison()
    md = render_markdown(c)
    header = next(ln for ln in md.splitlines() if ln.startswith("| condition"))
    assert "| metered cost USD | agent-reported cost USD (unchecked) |" in header
    plain = next(ln for ln in md.splitlines() if ln.startswith("| plain |"))
    cells = [x.strip() for x in plain.split("|")]
    metered, reported = cells[header.split("|").index(" metered cost USD ")], cells[-4]
    assert metered == "0.3000 (+1 unknown)"  # trials 2..10; trial 0 unknown, never 0
    assert reported == "3.0000"
    html = render_html(c)
    assert "metered cost USD vs effective speed-up" in html  # the chart uses the metered figure
    assert "agent-reported cost USD (unchecked)" in html
