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
