"""The HTML report: self-contained (nothing fetched), and rendered by a real headless Chromium
with no console output; the screenshot is kept in build/test-artifacts/."""

from __future__ import annotations

import re
import shutil
import subprocess
from pathlib import Path

import pytest

from optarena.experiments import ExperimentComparison, TrialRow
from optarena.experiments._compare import compare_treatment, summarize_condition
from optarena.report import render_html, render_markdown

ARTIFACTS = Path(__file__).resolve().parents[2] / "build" / "test-artifacts"
CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")


def _row(i: int, cond: str, rep: int, verdict: str, speedup: float | None) -> TrialRow:
    return TrialRow(
        trial_id=f"t{i:04d}",
        task="rmsnorm",
        condition=cond,
        repetition=rep,
        outcome="complete",
        attempts=1,
        agent_status="completed",
        verdict=verdict,
        speedup=speedup,
        speed_verdict="improved" if speedup and speedup > 1.1 else "inconclusive",
        effective_speedup=speedup if verdict == "accepted" and speedup else 1.0,
        tokens=1000 + 10 * i,
        cost_usd=None if i == 0 else 0.01 * i,
        agent_wall_s=5.0 + i,
        wall_s=20.0 + i,
        identity="same",
    )


def comparison() -> ExperimentComparison:
    rows = [
        _row(0, "plain", 0, "accepted", 1.05),
        _row(1, "hint", 0, "accepted", 1.40),
        _row(2, "plain", 1, "rejected", None),
        _row(3, "hint", 1, "accepted", 1.30),
        _row(4, "plain", 2, "accepted", 1.10),
        _row(5, "hint", 2, "accepted", 1.25),
    ]
    conditions = [
        summarize_condition(n, [r for r in rows if r.condition == n], 0, 0)
        for n in ("plain", "hint")
    ]
    return ExperimentComparison(
        experiment="demo <&>",
        plan_sha256="ab" * 32,
        scheduled=6,
        complete=6,
        failed=0,
        pending=[],
        conditions=conditions,
        comparisons=[compare_treatment("hint", "plain", rows, 0.05)],
        trials=rows,
    )


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
    assert "| hint vs plain | 3 |" in md and "unknown" in md  # trial 0's cost is unknown


def _render(tmp_path: Path, html: str, name: str) -> tuple[str, str, Path]:
    page = tmp_path / f"{name}.html"
    page.write_text(html)
    shot = tmp_path / f"{name}.png"
    common = ["--headless", "--no-sandbox", "--disable-gpu", "--enable-logging=stderr", "--v=0"]
    dom = subprocess.run(
        [str(CHROMIUM), *common, "--dump-dom", page.as_uri()],
        capture_output=True,
        text=True,
        timeout=120,
        check=True,
    )
    subprocess.run(
        [str(CHROMIUM), *common, "--window-size=1280,2400", f"--screenshot={shot}", page.as_uri()],
        capture_output=True,
        text=True,
        timeout=120,
        check=True,
    )
    console = "\n".join(line for line in dom.stderr.splitlines() if ":CONSOLE" in line)
    return dom.stdout, console, shot


@pytest.mark.skipif(CHROMIUM is None, reason="Chromium is not installed (.ci/run installs it)")
def test_rendered_by_headless_chromium_without_console_output(tmp_path: Path) -> None:
    # negative control: the same check sees a page that logs to the console
    _, noisy, _ = _render(tmp_path, "<p>x</p><script>console.error('boom')</script>", "noisy")
    assert "boom" in noisy
    dom, console, shot = _render(
        tmp_path, render_html(comparison(), {"t0001": {"diff": "+x"}}), "report"
    )
    assert console == ""
    assert "<svg" in dom and "hint vs plain" in dom and "Trial details" in dom
    assert shot.stat().st_size > 20_000  # a rendered page, not a blank one
    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    shutil.copyfile(shot, ARTIFACTS / "experiment-report.png")
