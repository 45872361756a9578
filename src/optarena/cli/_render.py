"""Human-readable views of results (the JSON views are the pydantic models themselves)."""

from __future__ import annotations

from pathlib import Path

from rich.console import Group, RenderableType
from rich.table import Table

import optarena
from optarena.cli._safe import escape
from optarena.judge import JudgeResult
from optarena.tasks import Task, unmet_requirements

_TRACEBACK = "Traceback (most recent call last):"
_OWN_FILES = str(Path(optarena.__file__).resolve().parent)


def brief(text: str, limit: int = 400) -> str:
    """A detail cut to about `limit` characters. A traceback keeps its end (the exception and
    the frames nearest it) and loses optarena's own and frozen importlib frames, which say
    nothing about the candidate."""
    head, found, tb = text.partition(_TRACEBACK)
    if not found:
        return text if len(text) <= limit else text[: limit - 3] + "..."
    kept: list[str] = []
    skipping = False
    for line in tb.strip("\n").splitlines():
        if line.startswith('  File "'):
            where = line[len('  File "') :]
            skipping = where.startswith((_OWN_FILES, "<frozen"))
        elif not line.startswith("    "):
            skipping = False  # the exception line(s)
        if not skipping:
            kept.append(line)
    body = "\n".join(kept)
    room = max(limit - len(head), 80)
    return head + (body if len(body) <= room else "..." + body[-(room - 3) :])


def verdict_markup(verdict: str) -> str:
    color = {"accepted": "green", "rejected": "red"}.get(verdict, "yellow")
    return f"[bold {color}]{verdict}[/]"


def judge_summary(result: JudgeResult, title: str | None = None) -> RenderableType:
    """Verdict, identity and every failed check (passed checks are counted, not listed)."""
    table = Table(title=title, show_header=True, header_style="bold", expand=False)
    table.add_column("check")
    table.add_column("workload")
    table.add_column("result")
    table.add_column("detail", overflow="fold")
    failed = [c for c in result.checks if not c.passed]
    for c in failed:
        table.add_row(
            escape(c.name),
            escape(c.workload or "-"),
            f"[red]{escape(c.code or '-')}[/]",
            escape(brief(c.detail)),
        )
    passed = len(result.checks) - len(failed)
    line = (
        f"verdict {verdict_markup(result.verdict)}; {passed}/{len(result.checks)} checks passed; "
        f"task {result.task.id}@{result.task.version} {result.task.sha256[:12]}; "
        f"candidate {result.candidate.sha256[:12]}; seed {result.seed}"
    )
    return Group(table, line) if failed else Group(line)


def task_table(tasks: list[Task]) -> Table:
    """One row per task; `runs here` is yes, or what this machine lacks."""
    table = Table(show_header=True, header_style="bold")
    for col in ("id", "version", "device", "runs here", "timed workloads", "controls", "title"):
        table.add_column(col)
    for t in tasks:
        timed = ", ".join(w.name for w in t.spec.workloads if w.role == "timed")
        unmet = unmet_requirements(t.spec.requirements)
        table.add_row(
            t.id,
            t.spec.version,
            t.spec.requirements.device,
            "[green]yes[/]" if not unmet else "[yellow]no:[/] " + "; ".join(unmet),
            timed,
            str(len(t.spec.controls)),
            t.spec.title,
        )
    return table
