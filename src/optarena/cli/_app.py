"""The shared Typer app and consoles (stdout for results, stderr for progress and errors)."""

from __future__ import annotations

import inspect
from typing import Annotated

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

# Soft wrap: a message is one line however long, and the terminal folds it. Rich's own wrapping
# at the console width (80 columns when stderr is not a terminal) breaks paths and commands
# mid-word, so a path could not be copied from a log.
console = Console(highlight=False, soft_wrap=True)
err_console = Console(stderr=True, highlight=False, soft_wrap=True)


def _print_version(value: bool) -> None:
    if value:
        from optarena import __version__

        console.print(f"optarena {__version__}")
        raise typer.Exit(0)


@app.callback()
def _root(
    version: Annotated[
        bool,
        typer.Option(
            "--version", callback=_print_version, is_eager=True, help="print the version, exit"
        ),
    ] = False,
) -> None:
    return None


def unwrap_help(doc: str | None) -> str | None:
    """A docstring as help text: its paragraphs kept, the line breaks inside them dropped (the
    help is wrapped to the terminal, not to the source's 100 columns)."""
    if not doc:
        return doc
    paragraphs = inspect.cleandoc(doc).split("\n\n")
    return "\n\n".join(" ".join(p.split()) for p in paragraphs)


def unwrap_all_help(typer_app: typer.Typer) -> None:
    """Every command's help from its docstring, unwrapped; in every command group too."""
    for info in typer_app.registered_commands:
        if info.help is None and info.callback is not None:
            info.help = unwrap_help(info.callback.__doc__)
    for group in typer_app.registered_groups:
        if group.typer_instance is not None:
            unwrap_all_help(group.typer_instance)


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
