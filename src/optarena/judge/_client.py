"""The judge's handle on one worker process: start it, talk to it, end it."""

from __future__ import annotations

import contextlib
import os
import sys
from pathlib import Path
from types import TracebackType
from typing import Any

from optarena.judge import _wire as wire
from optarena.sandbox import ResourceLimits, kill_tree, spawn
from optarena.tasks import Limits

WORKER_SCRIPT = Path(__file__).resolve().with_name("_worker.py")

# Equal in every worker (both arms of a comparison): BLAS single-threaded, same allocator.
WORKER_THREAD_ENV = {
    "OPENBLAS_NUM_THREADS": "1",
    "OMP_NUM_THREADS": "1",
    "MKL_NUM_THREADS": "1",
    "NUMEXPR_NUM_THREADS": "1",
    "MALLOC_ARENA_MAX": "1",
    "MALLOC_MMAP_THRESHOLD_": "65536",
    "MALLOC_TRIM_THRESHOLD_": "131072",
}
_PASSTHROUGH = ("PATH", "OPENBLAS_CORETYPE", "OPENBLAS_L2_SIZE", "SYSTEMROOT")


class WorkerError(Exception):
    """The worker could not answer: `code` is `timeout` or `worker_crashed`."""

    def __init__(self, code: str, detail: str) -> None:
        self.code = code
        self.detail = detail
        super().__init__(f"{code}: {detail}")


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


def resource_limits(limits: Limits) -> ResourceLimits:
    return ResourceLimits(
        address_space_mb=limits.memory_mb,
        cpu_s=limits.cpu_s,
        file_size_mb=limits.file_size_mb,
        open_files=limits.open_files,
    )


class WorkerClient:
    """One fresh interpreter running `_worker.py` in `workdir`, spoken to over two pipes."""

    def __init__(self, workdir: Path, limits: Limits, log_path: Path) -> None:
        self.workdir = workdir
        self.limits = limits
        self.log_path = log_path
        self._to_worker = self._from_worker = -1
        self.proc: Any = None

    def start(self) -> None:
        judge_r, worker_w = os.pipe()
        worker_r, judge_w = os.pipe()
        with open(self.log_path, "ab") as log:
            self.proc = spawn(
                [sys.executable, "-I", str(WORKER_SCRIPT), str(worker_r), str(worker_w)],
                cwd=self.workdir,
                env=worker_env(self.workdir),
                limits=resource_limits(self.limits),
                pass_fds=(worker_r, worker_w),
                stdout=log,
                stderr=log,
            )
        os.close(worker_r)
        os.close(worker_w)
        self._to_worker, self._from_worker = judge_w, judge_r

    def request(self, msg: dict[str, Any], timeout: float) -> dict[str, Any]:
        try:
            wire.send(self._to_worker, msg)
            reply = wire.recv(self._from_worker, timeout=timeout)
        except wire.WireTimeout:
            self.close(graceful=False)
            raise WorkerError("timeout", f"no answer within {timeout:.1f} s") from None
        except (wire.WireClosed, BrokenPipeError):
            raise WorkerError("worker_crashed", self._crash_detail()) from None
        except wire.WireError as e:
            self.close(graceful=False)
            raise WorkerError("protocol_violation", str(e)) from None
        if not isinstance(reply, dict):
            self.close(graceful=False)
            raise WorkerError("protocol_violation", "reply is not an object")
        return reply

    def _crash_detail(self) -> str:
        code = None
        if self.proc is not None:
            try:
                code = self.proc.wait(timeout=2)
            except Exception:  # still running: it closed the pipe without exiting
                code = None
            self.close(graceful=False)
        return f"worker exited with status {code}; log tail: {self.log_tail()!r}"

    def log_tail(self, n: int = 800) -> str:
        try:
            data = self.log_path.read_bytes()
        except OSError:
            return ""
        return data[-n:].decode("utf-8", "replace")

    def close(self, graceful: bool = True) -> None:
        """Ask the worker to exit (when it is known to be idle), then end its whole tree."""
        if graceful and self.proc is not None and self.proc.poll() is None:
            try:
                wire.send(self._to_worker, {"op": "exit"})
                self.proc.wait(timeout=1)
            except Exception:  # a stuck or dead worker is killed below either way
                pass
        if self.proc is not None:
            kill_tree(self.proc)
        for fd in (self._to_worker, self._from_worker):
            if fd >= 0:
                with contextlib.suppress(OSError):
                    os.close(fd)
        self._to_worker = self._from_worker = -1

    def __enter__(self) -> WorkerClient:
        self.start()
        return self

    def __exit__(self, *exc: type[BaseException] | BaseException | TracebackType | None) -> None:
        self.close()
