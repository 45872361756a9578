"""The `optarena` command line: one Typer app; each command group lives in its own module.

Every `OptarenaError` becomes one line on stderr and exit code 2, never a traceback.
"""

from __future__ import annotations

import sqlite3
import sys

# The modules that register commands on `app` when imported, named here rather than found by
# scanning the package, so a command module is registered on purpose (in `--help` order).
from optarena.cli import (  # noqa: F401
    _compare,
    _experiments,
    _external,
    _harness,
    _judge,
    _mcp,
    _proxy,
    _tasks,
    _trials,
)
from optarena.cli._app import app, console, err_console, interrupt_reported, unwrap_all_help
from optarena.cli._safe import escape
from optarena.errors import OptarenaError

unwrap_all_help(app)


def main(argv: list[str] | None = None) -> int:
    interrupt_reported()  # a fresh flag per call (tests call main repeatedly)
    try:
        rv = app(args=argv, prog_name="optarena", standalone_mode=False)
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


__all__ = ["app", "console", "entry", "main"]
