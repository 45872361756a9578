"""Text that agents and candidates wrote, made safe to print on the user's terminal.

File names, agent messages, log tails and judge reasons all carry what an agent or a candidate
chose. Rich interprets `[...]` as markup, and passes terminal escape sequences through (`ESC
[1A ESC [2K` moves up and erases a line), so such text could restyle or rewrite what optarena
prints, the verdict included.
"""

from __future__ import annotations

import re

from rich.markup import escape as _escape_markup

_CONTROL = re.compile(r"[\x00-\x08\x0b-\x1f\x7f-\x9f]")  # every control character but \t, \n


def escape(text: str) -> str:
    """`text` with rich markup escaped and each control character but newline and tab shown
    as `\\xNN`."""
    return _escape_markup(_CONTROL.sub(lambda m: f"\\x{ord(m.group()):02x}", text))
