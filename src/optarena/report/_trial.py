"""A report of one trial: who ran what, what it cost, the judge's verdict and speed, its diff
and logs. Markdown and a self-contained HTML page from the same record."""

from __future__ import annotations

from collections.abc import Mapping
from html import escape

from optarena.records import TrialRecord, Usage
from optarena.report._html import CSS


def _facts(r: TrialRecord) -> list[tuple[str, str]]:
    speed = "-"
    o = r.metrics.overall if r.metrics is not None else None
    if o is not None and o.ratio is not None:
        ci = o.ratio_ci
        span = f", interval {ci[0]:.3f}..{ci[1]:.3f}" if ci else ", no interval"
        speed = f"{o.ratio:.3f}x baseline{span}, {o.verdict}"
    m, u = r.metered_usage, r.usage

    def known(v: object) -> str:
        return "unknown" if v is None else str(v)

    def tokens(x: Usage) -> str:
        return f"{known(x.input_tokens)} / {known(x.output_tokens)}, {x.tokens_text('unknown')}"

    metered = [
        ("metered tokens in/out, all", "not metered" if m is None else tokens(m)),
        ("metered cost USD", "not metered" if m is None else m.cost_text("unknown")),
    ]

    return [
        ("trial", r.id),
        ("task", f"{r.task.id} {r.task.version} ({r.task.sha256[:12]})"),
        ("agent", f"{r.agent.label} {r.agent.version or ''}".strip()),
        ("labels", ", ".join(f"{k}={v}" for k, v in sorted(r.labels.items())) or "-"),
        ("state", r.state),
        ("agent status", f"{r.agent_status or '-'} {r.agent_detail}".strip()),
        ("verdict", r.verdict or "-"),
        ("reasons", "; ".join(r.reasons) or "-"),
        ("speed", speed),
        *metered,
        (f"{u.source} tokens in/out, all (unchecked)", tokens(u)),
        (f"{u.source} cost USD (unchecked)", u.cost_text("unknown")),
        ("agent wall s", known(r.agent_wall_s)),
        ("phases s", ", ".join(f"{k} {v:.2f}" for k, v in r.phases_s.items()) or "-"),
    ]


def render_trial_markdown(r: TrialRecord, texts: Mapping[str, str]) -> str:
    lines = [f"# Trial `{r.id}`", "", "| | |", "|---|---|"]
    lines += [f"| {k} | {v.replace('|', '/')} |" for k, v in _facts(r)]
    for name, text in texts.items():
        lines += ["", f"## {name}", "", "```", text, "```"]
    return "\n".join(lines) + "\n"


def render_trial_html(r: TrialRecord, texts: Mapping[str, str]) -> str:
    rows = "".join(f"<tr><th>{escape(k)}</th><td>{escape(v)}</td></tr>" for k, v in _facts(r))
    blocks = "".join(
        f"<h2>{escape(name)}</h2><pre>{escape(text)}</pre>" for name, text in texts.items()
    )
    return (
        "<!DOCTYPE html><html lang='en'><head><meta charset='utf-8'>"
        f"<title>optarena trial {escape(r.id)}</title><style>{CSS}</style></head><body>"
        f"<h1>Trial <code>{escape(r.id)}</code></h1><table>{rows}</table>{blocks}</body></html>"
    )
