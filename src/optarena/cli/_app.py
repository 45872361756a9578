"""The shared Typer app and consoles (stdout for results, stderr for progress and errors)."""

from __future__ import annotations

import typer
from rich.console import Console

app = typer.Typer(
    name="optarena",
    help="Hand a code-optimization job to a coding agent; judge what it delivered.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
)
task_app = typer.Typer(help="Inspect, start and qualify tasks.", no_args_is_help=True)
app.add_typer(task_app, name="task")

console = Console(highlight=False, soft_wrap=True)
err_console = Console(stderr=True, highlight=False)


_interrupt_reported = [False]


def interrupted(message: str) -> typer.Exit:
    """Say what an interrupted command recorded; the caller raises the returned exit (130).
    `main` says "nothing was recorded" for interrupts no command reported."""
    err_console.print(f"[bold yellow]interrupted:[/] {message}", highlight=False)
    _interrupt_reported[0] = True
    return typer.Exit(130)


def interrupt_reported() -> bool:
    reported, _interrupt_reported[0] = _interrupt_reported[0], False
    return reported
