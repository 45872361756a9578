"""Where the ledger lives.

One directory holds everything a ledger owns: `ledger.db` (SQLite, WAL), `artifacts/` (the
content-addressed store) and `work/` (trial workspaces and scratch, kept for inspection; the
artifacts are the durable record). The directory is chosen, first match wins, from:

1. the `--ledger DIR` option of a command,
2. the `OPTARENA_LEDGER` environment variable,
3. `$XDG_DATA_HOME/optarena`, or `~/.local/share/optarena` when XDG_DATA_HOME is unset.

A per-user default (not the current directory) means every trial a user runs lands in one
ledger, wherever the command was started; experiments that want their own pass `--ledger`.
"""

from __future__ import annotations

import os
from pathlib import Path

ENV_VAR = "OPTARENA_LEDGER"
DB_NAME = "ledger.db"
ARTIFACTS_DIR = "artifacts"
WORK_DIR = "work"


def default_home() -> Path:
    """The per-user default: `$XDG_DATA_HOME/optarena` or `~/.local/share/optarena`."""
    xdg = os.environ.get("XDG_DATA_HOME")
    base = Path(xdg) if xdg else Path.home() / ".local" / "share"
    return base / "optarena"


def resolve_home(explicit: Path | str | None = None) -> Path:
    """The ledger directory: the explicit path, else $OPTARENA_LEDGER, else the default."""
    if explicit:
        return Path(explicit).expanduser().resolve()
    env = os.environ.get(ENV_VAR)
    if env:
        return Path(env).expanduser().resolve()
    return default_home().resolve()
