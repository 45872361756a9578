"""Human views of trials: the progress of a running trial, the trials table, one trial.

Unknown figures print as `?`, never as 0.
"""

from __future__ import annotations

import time
from typing import Any

from rich.console import Console
from rich.status import Status
from rich.table import Table
from rich.text import Text

from optarena.cli._render import brief, verdict_markup
from optarena.cli._safe import escape, escape_name
from optarena.cli._speed_view import result_cell, speed_markup
from optarena.ledger import Ledger
from optarena.records import Judgement, TrialRecord, Usage


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
            self._status.update(f"{self.title}: {phase}: {escape(message)}")
        elif event == "end":
            self.stop()
            took = time.monotonic() - self._t0
            self.console.print(f"  [green]✓[/] {phase:<8} {took:7.2f} s  {escape(message)}")

    def stop(self) -> None:
        if self._status is not None:
            self._status.stop()
            self._status = None


def when(iso: str | None) -> str:
    """`MM-DD HH:MM` of an ISO timestamp (UTC, as recorded)."""
    return "-" if not iso else iso[5:16].replace("T", " ")


def _verdict_cell(r: TrialRecord) -> str:
    """The verdict, with the agent's status or the row's state when either is unusual."""
    if r.state != "complete":
        return status_markup(r)
    v = verdict_markup(r.verdict) if r.verdict else "-"
    return v if r.agent_status == "completed" else f"{v} ({status_markup(r)})"


# An experiment's bookkeeping on each of its trials: its key says them in a list (`trial show`
# prints every label). Hashes say nothing at a glance and broke 80-column rows into columns of
# single letters.
_KEY_LABEL = "experiment_key"
_BOOKKEEPING = frozenset(
    {"experiment", _KEY_LABEL, "condition", "repetition", "attempt", "executor", "node",
     "judge_node"}
)  # fmt: skip


def _agent_cell(r: TrialRecord) -> str:
    shown = []
    if _KEY_LABEL in r.labels:  # task/condition/repetition: the task has its own column
        labels = r.labels
        shown.append(f"{labels.get('condition', '?')} #{labels.get('repetition', '?')}")
        if labels.get("attempt", "1") != "1":
            shown.append(f"attempt {labels['attempt']}")
    shown += [
        f"{k}={v}"
        for k, v in sorted(r.labels.items())
        if not k.endswith("_sha256") and (_KEY_LABEL not in r.labels or k not in _BOOKKEEPING)
    ]
    return escape(" ".join([r.agent.label, *shown]))


def cost_cells(record: TrialRecord) -> tuple[str, str]:
    """(metered, agent-reported) cost, never one passed off as the other: the metered cost is
    `-` when no proxy ran; either is `?` when unknown, `≥$x` where only a lower bound is."""
    metered = "-" if record.metered_usage is None else record.metered_usage.cost_text()
    return metered, record.usage.cost_text()


def trials_table(records: list[TrialRecord], width: int = 80) -> Table:
    """One row per trial, fitted to `width` columns: cells wrap between words, never inside
    one. Unknown figures are `?`; the full usage is in `trial show`. The cost the agent
    reported has its own column, shown when any listed trial has one (a column of `?` would
    only take the room the other columns need)."""
    cells = [
        [
            r.id,
            when(r.created_at),
            r.task.id,
            _agent_cell(r),
            _verdict_cell(r),
            result_cell(r.metrics, r.verdict, r.reason_codes),
            _num(r.agent_wall_s, "{:.1f}"),
            *cost_cells(r),
        ]
        for r in records
    ]
    heads = ["trial", "when", "task", "agent", "verdict", "speed or reasons", "agent s"]
    heads += ["metered", "agent's"]
    if all(row[-1] == "?" for row in cells):
        heads, cells = heads[:-1], [row[:-1] for row in cells]
    right = set(range(6, len(heads)))
    return fitted_table(heads, cells, wrap={3: 1, 5: 2}, width=width, right=right)


# printed under the trials table: which cost each column is
COST_LEGEND = (
    "cost: metered by optarena's proxy (- not metered); agent's: the agent's own claim, "
    "unchecked; ? unknown; ≥ a lower bound"
)


def judgements_table(judgements: list[Judgement], width: int = 80) -> Table:
    cells = [
        [
            str(j.id),
            j.kind,
            when(j.created_at),
            verdict_markup(j.verdict),
            result_cell(j.metrics, j.verdict, j.reason_codes),
            (j.judge_sha256 or "?")[:8],
            str(j.seed),
        ]
        for j in judgements
    ]
    heads = ["#", "kind", "when", "verdict", "speed or reasons", "judge", "seed"]
    return fitted_table(heads, cells, wrap={4: 1}, width=width)


def fitted_table(
    heads: list[str],
    cells: list[list[str]],
    *,
    wrap: dict[int, int],
    width: int,
    right: frozenset[int] | set[int] = frozenset(),
) -> Table:
    """A borderless table no wider than `width`: the columns in `wrap` (index -> share of the
    room left) wrap between words, the others never wrap. Rich's own shrinking crops columns
    when two wrapping columns are equally wide, so the widths are computed here."""
    plain = [[Text.from_markup(c).plain for c in row] for row in cells]

    def natural(i: int) -> int:
        return max([len(heads[i])] + [len(line) for row in plain for line in row[i].split("\n")])

    def longest_word(i: int) -> int:
        return max(len(w) for t in [heads[i]] + [row[i] for row in plain] for w in t.split())

    widths = {i: natural(i) for i in range(len(heads))}
    room = width - sum(w for i, w in widths.items() if i not in wrap) - (len(heads) - 1)
    shares = sum(wrap.values())
    for i, share in wrap.items():
        widths[i] = min(widths[i], max(longest_word(i), room * share // shares))
    fold: set[int] = set()
    # still too wide (a long label, say): the wrapping column with the smallest share folds
    # its long words, so that the other columns keep their full text
    for i in sorted(wrap, key=lambda k: wrap[k]):
        over = sum(widths[k] for k in wrap) - room
        if over <= 0:
            break
        widths[i] = max(widths[i] - over, 6)
        fold.add(i)
    table = Table(header_style="bold underline", box=None, padding=(0, 1, 0, 0), pad_edge=False)
    for i, head in enumerate(heads):
        table.add_column(
            head,
            justify="right" if i in right else "left",
            no_wrap=i not in wrap,
            overflow="fold" if i in fold else "ellipsis",
            width=widths[i],
        )
    for row in cells:
        table.add_row(*row)
    return table


def artifact_paths(ledger: Ledger, record: TrialRecord) -> dict[str, str]:
    return {name: str(ledger.store.path(sha)) for name, sha in sorted(record.artifacts.items())}


def show_lines(record: TrialRecord) -> list[str]:
    """The key facts of one trial, one per line."""
    r, u = record, record.usage
    lines = [
        f"[bold]trial[/]      {r.id}  ({r.state}; {r.created_at} -> {r.finished_at or '-'})",
        f"task       {r.task.id}@{r.task.version} {r.task.sha256[:12]}  ("
        + ("external project, frozen: " if r.task.kind == "external" else "")
        + f"{escape(r.task.root)})",
        f"agent      {escape(r.agent.label)}  version {escape(r.agent.version or '?')}  "
        f"model {escape(r.agent.model or '(default)')}  runner {escape(r.agent.runner)}",
        f"flags      {escape(str(r.agent.flags))}",
        f"labels     {escape(str(r.labels or '-'))}",
        f"limits     wall {r.limits.wall_s:g} s",
        f"status     {status_markup(r)}  exit {_num(r.agent_exit_code, '{}')}  "
        + escape(r.agent_detail),
        f"agent time wall {_num(r.agent_wall_s)} s, cpu {_num(r.agent_cpu_s)} s (from the OS)",
        _usage_line("metered   ", r.metered_usage),
        _usage_line("reported  ", u),
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
        if not c.in_scope and c.path not in r.out_of_scope:
            scope = "  ignored (new, outside the scope: not judged)"
        lines.append(f"  changed  {c.change:<9} {escape_name(c.path)}{scope}")
    lines += [f"  [red]-[/] {escape(brief(reason))}" for reason in r.reasons]
    lines.append(f"speed      {speed_markup(r.metrics, r.verdict)}")
    lines += [f"  [red]outside the workspace:[/] {escape_name(c)}" for c in r.outside_changes]
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


def _usage_line(title: str, u: Usage | None) -> str:
    """One usage, labelled with whose figure it is: optarena's proxy measured it, or the
    agent (its runner) reported it and nothing checked it."""
    if u is None:
        return f"{title} not metered (no proxy ran): no figure optarena measured"
    whose = "by optarena's proxy" if u.source == "metered" else f"{u.source}, unchecked"
    bound = ""
    if u.total_tokens() is None and u.tokens_at_least is not None:
        bound = f" (tokens unknown, at least {u.tokens_at_least})"
    return (
        f"{title} in {_num(u.input_tokens, '{}')}, out {_num(u.output_tokens, '{}')}, cache r/w "
        f"{_num(u.cache_read_tokens, '{}')}/{_num(u.cache_write_tokens, '{}')}{bound}, calls "
        f"{_num(u.calls, '{}')}, cost {u.cost_text()}  ({whose})"
    )
