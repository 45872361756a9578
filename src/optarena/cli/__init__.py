"""The `optarena` command line: one Typer app; each command group lives in its own module.

Every `OptarenaError` becomes one line on stderr and exit code 2, never a traceback.
"""

from __future__ import annotations

import sys

# The modules that register commands on `app` when imported, named here rather than found by
# scanning the package, so a command module is registered on purpose (in `--help` order).
from optarena.cli import (  # noqa: F401
    _compare,
    _experiments,
    _external,
    _judge,
    _mcp,
    _proxy,
    _tasks,
    _trials,
)
from optarena.cli._app import app, console, err_console
from optarena.errors import OptarenaError


def main(argv: list[str] | None = None) -> int:
    try:
        rv = app(args=argv, prog_name="optarena", standalone_mode=False)
    except OptarenaError as e:
        err_console.print(f"[bold red]error:[/] {e}", highlight=False, soft_wrap=True)
        return 2
    except SystemExit as e:
        return int(e.code or 0)
    except _click_exceptions() as e:
        e.show()  # type: ignore[attr-defined]
        return 2
    except KeyboardInterrupt:
        err_console.print("interrupted")
        return 130
    return rv if isinstance(rv, int) else 0


def _click_exceptions() -> tuple[type[BaseException], ...]:
    """Click's usage errors: a separate package for older Typer, vendored from Typer 0.29 on."""
    import importlib

    for name in ("click.exceptions", "typer._click.exceptions"):
        try:
            return (importlib.import_module(name).ClickException,)
        except ImportError:
            continue
    return ()


def entry() -> None:
    sys.exit(main())


__all__ = ["app", "console", "entry", "main"]
