"""A Ctrl-C is never lost.

Python runs a signal's handler in the main thread wherever it happens to be, a finalizer
included (`__del__`, a weakref callback, a generator closed by the collector: a `Popen` or a
temporary directory dropped while a judgement runs). A KeyboardInterrupt raised there is printed
as "Exception ignored" and dropped, and the command runs on to its end as if no one had asked
it to stop (a judgement then exits 0). While `interrupts_kept` is active, an interrupt that a
finalizer swallowed is sent again a moment later, when the finalizer has returned, until it
lands where it can stop the command.
"""

from __future__ import annotations

import contextlib
import os
import signal
import sys
import threading
from collections.abc import Iterator
from typing import Any

# Long enough for the finalizer that swallowed the interrupt to have returned.
_RESEND_AFTER_S = 0.01


@contextlib.contextmanager
def interrupts_kept() -> Iterator[None]:
    """Resend any KeyboardInterrupt a finalizer swallows, while the block runs. Where Ctrl-C
    does not raise KeyboardInterrupt (ignored, as for a background job, or handled otherwise)
    nothing changes."""
    if signal.getsignal(signal.SIGINT) is not signal.default_int_handler:
        yield
        return
    previous = sys.unraisablehook
    pid = os.getpid()

    def resend() -> None:
        if os.getpid() == pid:  # not in a child forked meanwhile
            with contextlib.suppress(OSError):
                os.kill(pid, signal.SIGINT)

    def hook(unraisable: Any) -> None:
        exc_type = getattr(unraisable, "exc_type", None)
        if not (isinstance(exc_type, type) and issubclass(exc_type, KeyboardInterrupt)):
            previous(unraisable)  # anything else is printed, as Python would
            return
        # Not an error to show (a traceback on Ctrl-C): the interrupt, to deliver again.
        timer = threading.Timer(_RESEND_AFTER_S, resend)
        timer.daemon = True
        timer.start()

    sys.unraisablehook = hook
    try:
        yield
    finally:
        sys.unraisablehook = previous
