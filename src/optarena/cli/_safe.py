"""Text that agents and candidates wrote, made safe to print on the user's terminal.

File names, agent messages, log tails and judge reasons all carry what an agent or a candidate
chose. Rich interprets `[...]` as markup, and passes terminal escape sequences through (`ESC
[1A ESC [2K` moves up and erases a line), bidi overrides (U+202E) reorder what follows, and a
newline in a file name starts a line that can read like optarena's own (`verdict accepted`);
a byte that is not UTF-8 cannot be printed at all. So prose keeps its newlines and tabs and
shows every other such character as an escape (`optarena.files.printable`), and a name is
shown as one line (`optarena.files.name_line`).
"""

from __future__ import annotations

import json
from typing import Any

from rich.markup import escape as _escape_markup

from optarena.files import name_line, printable


def escape(text: str) -> str:
    """Prose an agent or candidate wrote: markup escaped, every control, format or separator
    character but newline and tab shown as `\\xNN` / `\\uNNNN`."""
    return _escape_markup(printable(text))


def escape_name(name: str) -> str:
    """A file name (or a list of them joined by the caller) as one line, markup escaped."""
    return _escape_markup(name_line(name))


def json_text(data: Any) -> str:
    """JSON for `--json`: every character outside ASCII escaped (`\\u202e`), so what an agent
    wrote cannot act on the terminal the JSON is printed to; any JSON reader gets it back."""
    return json.dumps(data, indent=2, ensure_ascii=True)
