"""The `optarena` command line: one Typer app; each command group lives in its own module.

Every `OptarenaError` becomes one line on stderr and exit code 2, never a traceback.
"""

from __future__ import annotations

import importlib
import sqlite3
import sys
from typing import Any

from optarena.cli import _app
from optarena.cli._app import console, err_console, interrupt_reported, unwrap_all_help
from optarena.cli._interrupt import interrupts_kept
from optarena.cli._safe import escape
from optarena.errors import OptarenaError

# Each top-level command or group and the modules that register it, named here rather than found
# by scanning the package, so a command module is registered on purpose. A run imports only its
# command's modules: every `optarena` process importing all of them (the judge, the trials, the
# harness, the report) spent about half a second before doing anything, once per MCP relay and
# experiment driver too. `--help` and unknown commands import them all (in the modules' order).
COMMANDS: dict[str, tuple[str, ...]] = {
    "compare": ("_compare",),
    "experiment": ("_experiments",),
    "report": ("_experiments",),
    "task": ("_external", "_tasks"),
    "harness": ("_harness",),
    "judge": ("_judge",),
    "demo": ("_judge",),
    "mcp": ("_mcp",),
    "proxy": ("_proxy",),
    "fake-model": ("_proxy",),
    "tasks": ("_tasks",),
    "run": ("_trials",),
    "trials": ("_trials",),
    "trial": ("_trials",),
}


def register(argv: list[str]) -> None:
    """Register the command `argv` names (its first word), or every command when it names none
    this table knows; the help text of each registered command comes from its docstring."""
    word = next((a for a in argv if not a.startswith("-")), None)
    known = COMMANDS.get(word) if word is not None else None
    for module in known or sorted({m for ms in COMMANDS.values() for m in ms}):
        importlib.import_module(f"optarena.cli.{module}")
    unwrap_all_help(_app.app)


def main(argv: list[str] | None = None) -> int:
    interrupt_reported()  # a fresh flag per call (tests call main repeatedly)
    try:
        with interrupts_kept():  # a Ctrl-C that lands in a finalizer is not lost
            register(sys.argv[1:] if argv is None else argv)  # Ctrl-C while importing: 130
            rv = _app.app(args=argv, prog_name="optarena", standalone_mode=False)
    except OptarenaError as e:
        err_console.print(f"[bold red]error:[/] {escape(str(e))}", highlight=False)
        return 2
    except SystemExit as e:
        return int(e.code or 0)
    except _click_exceptions() as e:
        e.show()  # type: ignore[attr-defined]
        return 2
    except KeyboardInterrupt:
        rv = 130
    except sqlite3.Error as e:  # e.g. a read-only ledger directory, found on the first write
        err_console.print(f"[bold red]error:[/] ledger database: {escape(str(e))}", highlight=False)
        return 2
    except PermissionError as e:
        where = escape(str(e.filename))
        err_console.print(f"[bold red]error:[/] {e.strerror}: {where}", highlight=False)
        return 2
    if rv == 130 and not interrupt_reported():
        # Typer turns Ctrl-C into exit 130 silently; commands that record say what they did
        err_console.print("[bold yellow]interrupted:[/] nothing was recorded", highlight=False)
    return rv if isinstance(rv, int) else 0


def _click_exceptions() -> tuple[type[BaseException], ...]:
    """Click's usage errors: a separate package for older Typer, vendored from Typer 0.29 on
    (both when a separate click is installed beside a vendoring Typer)."""
    import importlib

    found: list[type[BaseException]] = []
    for name in ("click.exceptions", "typer._click.exceptions"):
        try:
            found.append(importlib.import_module(name).ClickException)
        except ImportError:
            continue
    return tuple(found)


def entry() -> None:
    sys.exit(main())


def __getattr__(name: str) -> Any:
    """`optarena.cli.app` as a library sees it: every command registered."""
    if name == "app":
        register([])
        return _app.app
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


__all__ = ["COMMANDS", "app", "console", "entry", "main", "register"]
