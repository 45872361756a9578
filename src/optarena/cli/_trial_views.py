"""Human views of trials: the progress of a running trial, the trials table, one trial.

Unknown figures print as `?`, never as 0.
"""

from __future__ import annotations

import time
from typing import Any

from rich.console import Console
from rich.markup import escape
from rich.status import Status
from rich.table import Table

from optarena.agents import Usage
from optarena.cli._render import verdict_markup
from optarena.ledger import Judgement, Ledger, TrialRecord


def _num(value: float | int | None, fmt: str = "{:.2f}") -> str:
    return "?" if value is None else fmt.format(value)


def status_markup(record: TrialRecord) -> str:
    if record.state != "complete":
        color = "yellow" if record.state == "running" else "magenta"
        return f"[{color}]{record.state}[/]"
    status = record.agent_status or "?"
    color = "green" if status == "completed" else "yellow"
    return f"[{color}]{status}[/]"


class PhaseView:
    """Progress of a running trial: a spinner per phase, a line per finished phase."""

    def __init__(self, console: Console, title: str) -> None:
        self.console = console
        self.title = title
        self._status: Status | None = None
        self._t0 = 0.0

    def __call__(self, phase: str, event: str, message: str) -> None:
        if event == "start":
            self._t0 = time.monotonic()
            self._status = self.console.status(f"{self.title}: {phase} ...")
            self._status.start()
        elif event == "info" and self._status is not None:
            self._status.update(f"{self.title}: {phase}: {message}")
        elif event == "end":
            self.stop()
            took = time.monotonic() - self._t0
            self.console.print(f"  [green]✓[/] {phase:<8} {took:7.2f} s  {message}")

    def stop(self) -> None:
        if self._status is not None:
            self._status.stop()
            self._status = None


def _usage_cell(record: TrialRecord) -> str:
    """Metered usage when a proxy ran (optarena's own count), else what the agent reported."""
    u = record.metered_usage or record.usage
    if u.source == "metered" and u.calls == 0:
        return "none"  # metered: the agent called no model (narrow: the table fits 80 columns)
    if u.input_tokens is None and u.output_tokens is None and u.cost_usd is None:
        return "?"
    tokens = f"{_num(u.input_tokens, '{}')} in/{_num(u.output_tokens, '{}')} out"
    return f"{tokens} ${_num(u.cost_usd, '{:.4f}')}"


def trials_table(records: list[TrialRecord]) -> Table:
    """One row per trial; unknown usage is `?`."""
    table = Table(header_style="bold underline", box=None, padding=(0, 1), pad_edge=False)
    for col in ("trial", "task"):
        table.add_column(col, no_wrap=True)
    table.add_column("agent", overflow="fold")
    for col in ("status", "verdict"):
        table.add_column(col, no_wrap=True)
    table.add_column("reasons", overflow="fold")
    for col in ("agent s", "cpu s", "usage"):
        table.add_column(col, justify="right", overflow="fold")
    for r in records:
        table.add_row(
            r.id,
            r.task.id,
            r.agent.label,
            status_markup(r),
            verdict_markup(r.verdict) if r.verdict else "-",
            ", ".join(r.reason_codes) or "-",
            _num(r.agent_wall_s),
            _num(r.agent_cpu_s),
            _usage_cell(r),
        )
    return table


def judgements_table(judgements: list[Judgement]) -> Table:
    table = Table("#", "kind", "when", "verdict", "reasons", "measured", "judge", "seed")
    for j in judgements:
        table.add_row(
            str(j.id),
            j.kind,
            j.created_at,
            verdict_markup(j.verdict),
            ", ".join(j.reason_codes) or "-",
            "yes" if j.settings.measure else "no",
            (j.judge_sha256 or "?")[:12],
            str(j.seed),
        )
    return table


def artifact_paths(ledger: Ledger, record: TrialRecord) -> dict[str, str]:
    return {name: str(ledger.store.path(sha)) for name, sha in sorted(record.artifacts.items())}


def show_lines(record: TrialRecord) -> list[str]:
    """The key facts of one trial, one per line."""
    r, u = record, record.usage
    lines = [
        f"[bold]trial[/]      {r.id}  ({r.state}; {r.created_at} -> {r.finished_at or '-'})",
        f"task       {r.task.id}@{r.task.version} {r.task.sha256[:12]}  ({escape(r.task.root)})",
        f"agent      {r.agent.label}  version {r.agent.version or '?'}  "
        f"model {r.agent.model or '(default)'}  runner {r.agent.runner}",
        f"flags      {escape(str(r.agent.flags))}",
        f"labels     {escape(str(r.labels or '-'))}",
        f"limits     wall {r.limits.wall_s:g} s",
        f"status     {status_markup(r)}  exit {_num(r.agent_exit_code, '{}')}  "
        + escape(r.agent_detail),
        f"agent time wall {_num(r.agent_wall_s)} s, cpu {_num(r.agent_cpu_s)} s (from the OS)",
        _usage_line("usage     ", u),
        *([_usage_line("metered   ", r.metered_usage)] if r.metered_usage else []),
        f"workspace  {escape(r.workspace)}",
        f"contained  {escape(sandbox_summary(r.agent_sandbox))}",
        f"baseline   {r.baseline_commit or '-'}",
        f"candidate  {r.candidate_sha256 or '-'}",
        f"judge      {r.judge_sha256[:12]}  runtime {str(r.runtime.get('sha256', '?'))[:12]}",
        f"phases     {', '.join(f'{k} {v:.2f} s' for k, v in r.phases_s.items()) or '-'}",
        f"verdict    {verdict_markup(r.verdict) if r.verdict else '-'}",
    ]
    for c in r.changed:
        scope = "" if c.in_scope else "  [red]OUT OF SCOPE[/]"
        lines.append(f"  changed  {c.change:<9} {escape(c.path)}{scope}")
    lines += [f"  [red]-[/] {escape(reason[:400])}" for reason in r.reasons]
    if r.metrics:
        lines.append(f"metrics    {escape(_short(r.metrics))}")
    lines += [f"  [red]outside the workspace:[/] {escape(c)}" for c in r.outside_changes]
    if r.error:
        lines.append(f"error      [magenta]{escape(r.error)}[/]")
    return lines


def sandbox_summary(sandbox: dict[str, Any] | None) -> str:
    """The agent's containment in one line: what was active, what it cost, what was missing."""
    if not sandbox:
        return "-"
    if not sandbox.get("enabled"):
        return "[not contained] " + "; ".join(sandbox.get("notes", []))
    parts = [
        f"user {sandbox.get('user')}",
        f"network {sandbox.get('network')}",
        f"processes {sandbox.get('processes')}",
        f"cleanup {sandbox.get('cleanup')}",
        f"setup {sandbox.get('setup_ms')} ms, teardown {sandbox.get('teardown_ms')} ms",
    ]
    notes = sandbox.get("notes") or []
    return "; ".join(parts + ([f"missing: {', '.join(notes)}"] if notes else []))


def _usage_line(title: str, u: Usage) -> str:
    return (
        f"{title} ({u.source}) in {_num(u.input_tokens, '{}')}, out "
        f"{_num(u.output_tokens, '{}')}, cache r/w {_num(u.cache_read_tokens, '{}')}/"
        f"{_num(u.cache_write_tokens, '{}')}, calls {_num(u.calls, '{}')}, cost "
        f"{_num(u.cost_usd, '{:.4f}')} $"
    )


def _short(metrics: dict[str, Any]) -> str:
    text = ", ".join(f"{k}: {v}" for k, v in metrics.items() if not isinstance(v, dict | list))
    return text[:400] or "(see --json)"
