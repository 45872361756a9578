"""What every worker starts with: its environment, its resource limits, and what its way of
ending means (the same for both arms of a comparison, the null arm and the correctness worker).
"""

from __future__ import annotations

import os
import signal
from pathlib import Path

from optarena.sandbox import ResourceLimits
from optarena.tasks import WorkerLimits

# Equal in every worker (both arms of a comparison): BLAS single-threaded, same allocator.
WORKER_THREAD_ENV = {
    "OPENBLAS_NUM_THREADS": "1",
    "OMP_NUM_THREADS": "1",
    "MKL_NUM_THREADS": "1",
    "NUMEXPR_NUM_THREADS": "1",
    "MALLOC_ARENA_MAX": "1",
    # Arrays up to 32 MiB come from the heap and freed memory is kept, not returned: a timed
    # call then reuses warm pages instead of faulting in fresh ones (on a VM first-touch faults
    # made calls several times slower and swamped the measurement).
    "MALLOC_MMAP_THRESHOLD_": "33554432",
    "MALLOC_TRIM_THRESHOLD_": "1073741824",
}
_PASSTHROUGH = ("PATH", "OPENBLAS_CORETYPE", "OPENBLAS_L2_SIZE", "SYSTEMROOT")


def worker_env(workdir: Path) -> dict[str, str]:
    """A minimal environment: nothing of the judge's secrets or configuration leaks in."""
    env = {k: os.environ[k] for k in _PASSTHROUGH if k in os.environ}
    env.update(WORKER_THREAD_ENV)
    env.update(
        {
            "HOME": str(workdir),
            "TMPDIR": str(workdir),
            "LANG": "C.UTF-8",
            "PYTHONDONTWRITEBYTECODE": "1",
            "PYTHONHASHSEED": "0",
        }
    )
    return env


def resource_limits(limits: WorkerLimits) -> ResourceLimits:
    return ResourceLimits(
        address_space_mb=limits.memory_mb,
        cpu_s=limits.cpu_s,
        file_size_mb=limits.file_size_mb,
        open_files=limits.open_files,
        processes=limits.processes,
    )


def exit_reason(returncode: int | None) -> str:
    """The reason code for a worker that stopped answering, from how it ended."""
    if returncode is None or returncode >= 0:
        return "worker_crashed"  # closed the pipe, or os._exit(): gone without a SystemExit
    if returncode == -signal.SIGABRT:
        return "aborted"
    if returncode == -signal.SIGXCPU:
        return "cpu_limit"
    return "worker_crashed"
