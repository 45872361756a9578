"""The judge's own heap while it times calls: freed memory is kept and reused, not given back.

Between two timed calls the judge reads the output (`_calls`) into a fresh array, and keeps it
until the round's checks. With glibc's defaults an array of a few hundred KiB is a fresh
`mmap`, or heap that was trimmed when the last round's outputs were freed: each read then
faulted in and zeroed new pages, on the worker's CPU, while the worker waited. On rmsnorm's
decode shape that made the read of a 256 KiB output take 147 us instead of 50 and the
baseline's next call 72 us instead of 68 (docs/measurement.md, "The judge's turn"). The
workers run with the same settings (`_worker_env`); here they are set in the judge process
only while a pair is measured, and the memory is given back after.
"""

from __future__ import annotations

import ctypes
import ctypes.util
from collections.abc import Callable
from contextlib import AbstractContextManager

from optarena.judge.client._shared import SharedSetting

_M_TRIM_THRESHOLD = -1
_M_MMAP_THRESHOLD = -3
_KEEP_TRIM = 1 << 30  # freed memory below this much at the heap's top is kept
_KEEP_MMAP = 64 << 20  # arrays below this come from the heap (an output of a task: yes)
# glibc's documented defaults, restored after (the dynamic adjustment is off once set)
_DEFAULT_TRIM = _DEFAULT_MMAP = 128 * 1024


def _libc() -> ctypes.CDLL | None:
    try:
        libc = ctypes.CDLL(ctypes.util.find_library("c") or None)
    except OSError:
        return None
    return libc if hasattr(libc, "mallopt") and hasattr(libc, "malloc_trim") else None


_LIBC = _libc()


def _keep() -> Callable[[], None]:
    libc = _LIBC
    if libc is None:  # not glibc: nothing to set
        return lambda: None
    libc.mallopt(_M_MMAP_THRESHOLD, _KEEP_MMAP)
    libc.mallopt(_M_TRIM_THRESHOLD, _KEEP_TRIM)

    def restore() -> None:
        libc.mallopt(_M_MMAP_THRESHOLD, _DEFAULT_MMAP)
        libc.mallopt(_M_TRIM_THRESHOLD, _DEFAULT_TRIM)
        libc.malloc_trim(0)

    return restore


_KEPT = SharedSetting(_keep)


def kept_heap() -> AbstractContextManager[None]:
    """Keep freed memory in this process while the block runs (nested and concurrent blocks
    share one setting: the first sets it, the last restores it and trims). A no-op where the
    C library is not glibc."""
    return _KEPT.held()
