"""The judge's own BLAS threads while a worker runs calls: one, so none is left spinning.

The oracle runs in the judge's process, between the slots of a pair (gemm-c's, attention's
and moe-forward's are matrix products). With NumPy's OpenBLAS on its default thread pool, the
pool's threads busy-wait after each product before they sleep, and they are not pinned: they
spun on the worker's CPU through the next slot's calls. gemm-c's calls then took twice their
CPU time in wall time (25.0 ms against 12.9 ms), the waiting check moved its comparisons to
the wall clock, and the worker shared its core's caches with them. With one BLAS thread
(the products run on the judge's measuring thread, pinned with the worker and blocked while
it runs) the calls' wall time is their CPU time (13.04 ms against 13.00). The correctness
phase holds it too: its oracle runs between the worker's calls as well, and on a 2-CPU machine
the spinning pool cost the built-in controls' judgements 33% more CPU (117.8 s against 88.9 s
for tests/judge/test_controls.py) and its calls' timeouts count that time. The workers run
with one thread already (`_worker_env`).
"""

from __future__ import annotations

from collections.abc import Callable
from contextlib import AbstractContextManager

from optarena.judge.client._shared import SharedSetting

try:
    import threadpoolctl
except ImportError:  # an interpreter without it (a declared dependency): the pool as it is
    threadpoolctl = None


def _release_control() -> None:
    """threadpoolctl (3.8 on) lets only one thread set OpenBLAS's pool, the first to set it,
    until that thread releases it, and other threads' settings silently do nothing; its own
    `with` blocks release it, `restore_original_limits` does not. Measured: after the main
    thread had set and restored a limit, a limit set on an experiment's worker thread left
    the pool at 2 threads and the products on it used both. The setting is the process's
    either way, so whichever thread holds it last releases it."""
    ctl = getattr(threadpoolctl, "OpenBLASController", None)
    clear = getattr(ctl, "clear_controlling_thread", None)
    if clear is not None:
        clear(force=True)


def _one_thread() -> Callable[[], None]:
    if threadpoolctl is None:
        return lambda: None
    _release_control()
    limits = threadpoolctl.threadpool_limits(limits=1, user_api="blas")
    _release_control()

    def restore() -> None:
        _release_control()
        limits.restore_original_limits()
        _release_control()

    return restore


_ONE = SharedSetting(_one_thread)


def one_blas_thread() -> AbstractContextManager[None]:
    """One BLAS thread in this process while the block runs. The setting is the process's,
    and pairs may be measured at once on several threads (an experiment's parallel trials):
    nested and concurrent blocks share it, the first sets it and the last restores the pool,
    from whichever threads they run on (`_release_control`)."""
    return _ONE.held()
