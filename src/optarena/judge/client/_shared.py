"""A setting of the whole process that the judge holds while it measures pairs.

Pairs may be measured at once on several threads (an experiment's parallel trials), and a
pair's blocks nest. The malloc settings (`_heap`) and the BLAS pool's size (`_blas`) are the
process's: a holder that restored them on its way out would change them under another one
still measuring. So the first holder sets, and the last restores.
"""

from __future__ import annotations

import contextlib
import threading
from collections.abc import Callable, Iterator


class SharedSetting:
    """`apply()` sets the setting and returns what restores it; it runs for the first of
    any number of nested or concurrent holders, and the restore after the last."""

    def __init__(self, apply: Callable[[], Callable[[], None]]) -> None:
        self._apply = apply
        self._lock = threading.Lock()
        self._holders = 0
        self._restore: Callable[[], None] | None = None

    @contextlib.contextmanager
    def held(self) -> Iterator[None]:
        with self._lock:
            if self._holders == 0:  # a failed apply leaves no holder behind
                self._restore = self._apply()
            self._holders += 1
        try:
            yield
        finally:
            with self._lock:
                self._holders -= 1
                if self._holders == 0 and self._restore is not None:
                    restore, self._restore = self._restore, None
                    restore()
