"""Reports of an experiment comparison: one self-contained HTML file (inline SVG plots, no
network), Markdown, or JSON, all from the same `ExperimentComparison`."""

from optarena.report._html import render_html
from optarena.report._markdown import render_markdown
from optarena.report._trial import render_trial_html, render_trial_markdown
from optarena.report._words import interval_words, speed_words

__all__ = [
    "interval_words",
    "render_html",
    "render_markdown",
    "render_trial_html",
    "render_trial_markdown",
    "speed_words",
]
