"""The judge's handle on one worker process: start it, talk to it, end it."""

from __future__ import annotations

import contextlib
import itertools
import math
import os
import select
import signal
import sys
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from types import TracebackType
from typing import Any

import numpy as np

from optarena.judge._arena import InputArena, OutputArena
from optarena.judge.worker import _wire as wire
from optarena.sandbox import ResourceLimits, Sandbox, SandboxPolicy
from optarena.tasks import WorkerLimits

WORKER_SCRIPT = Path(__file__).resolve().parent / "worker" / "_loop.py"

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


@dataclass
class CallResult:
    """One call as the judge saw it: the reply (data only), the output read from shared memory
    after the worker was frozen, the judge's wall time and the kernel's CPU time of the call,
    and the first input whose bytes changed (None: all intact)."""

    reply: dict[str, Any]
    output: np.ndarray | None
    wall_ns: int
    cpu_ns: int | None
    input_changed: int | None


class WorkerError(Exception):
    """The worker could not answer: `code` is `timeout`, `protocol_violation`, or how it ended
    (`aborted`, `cpu_limit`, `worker_crashed`; see `exit_reason`)."""

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


class WorkerClient:
    """One fresh interpreter running `worker/_loop.py` in `workdir`, spoken to over two pipes."""

    def __init__(
        self,
        workdir: Path,
        limits: WorkerLimits,
        log_path: Path,
        *,
        policy: SandboxPolicy | None = None,
        protect: Sequence[Path] = (),
        prefix: Sequence[str] = (),
        arena_bytes: tuple[int, int] | None = None,
    ) -> None:
        """`protect`: paths the candidate must not read (the task package), hidden where the
        machine allows and watched by the worker's guard. `arena_bytes`: sizes of the input
        and output areas for `call` (None: a worker that only counts instructions)."""
        self.workdir = workdir
        self.limits = limits
        self.log_path = log_path
        self.policy = policy or SandboxPolicy()
        self.protect = [Path(p) for p in protect]
        self.prefix = list(prefix)  # e.g. valgrind for instruction counts
        self.sandbox = Sandbox(
            workdir,
            resource_limits(limits),
            self.policy,
            hide=self.protect,
            needed=[WORKER_SCRIPT.parent],
            scratch_mb=max(16, limits.file_size_mb),
        )
        self._to_worker = self._from_worker = -1
        self._ids = itertools.count(1)
        self.proc: Any = None
        self.arena_bytes = arena_bytes
        self.inputs: InputArena | None = None
        self.outputs: OutputArena | None = None
        self._arena_fds: dict[str, int] = {}
        self.frozen = False
        self.freeze_problem: str | None = None  # why the worker could not be frozen, if so

    def start(self) -> None:
        judge_r, worker_w = os.pipe()
        worker_r, judge_w = os.pipe()
        argv = [sys.executable, "-I", str(WORKER_SCRIPT), str(worker_r), str(worker_w)]
        extra: list[int] = []
        if self.arena_bytes is not None:
            self.inputs = InputArena(self.arena_bytes[0])
            self.outputs = OutputArena(self.arena_bytes[1])
            self._arena_fds = {"in_fd": self.inputs.worker_fd(), "out_fd": os.dup(self.outputs.fd)}
            extra = list(self._arena_fds.values())
        try:
            with open(self.log_path, "ab") as log:
                self.proc = self.sandbox.spawn(
                    [*self.prefix, *argv],
                    env=worker_env(self.workdir),
                    pass_fds=(worker_r, worker_w, *extra),
                    stdout=log,
                    stderr=log,
                )
        finally:
            for fd in (worker_r, worker_w, *extra):
                os.close(fd)
        self._to_worker, self._from_worker = judge_w, judge_r

    def hello_extras(self) -> dict[str, Any]:
        """The shared areas, named by the descriptor numbers the worker inherited."""
        if self.inputs is None or self.outputs is None:
            return {}
        return {
            "arena": {
                "in_fd": self._arena_fds["in_fd"],
                "in_size": self.inputs.size,
                "out_fd": self._arena_fds["out_fd"],
                "out_size": self.outputs.size,
            }
        }

    def freeze(self) -> None:
        """Stop the worker's whole tree (between calls nothing of the candidate may run)."""
        if self.frozen or self.freeze_problem is not None or self.proc is None:
            return
        try:
            self.sandbox.freeze()
            self.frozen = True
        except OSError as e:
            self.freeze_problem = f"cannot freeze the worker: {e}"

    def thaw(self) -> None:
        if self.frozen:
            self.sandbox.thaw()
            self.frozen = False

    def call(self, args: list[Any], kwargs: dict[str, Any], timeout: float) -> CallResult:
        """One call, timed from outside the candidate's process.

        The worker is frozen while the judge writes the inputs; the kernel's CPU count of its
        cgroup is read before it is thawed and after it is frozen again, so every cycle any of
        its threads or children spent in between is counted; the judge's clock runs from
        sending the request to the reply. Raises WorkerError like `request`.
        """
        if self.inputs is None or self.outputs is None:
            raise RuntimeError("this worker has no shared areas (arena_bytes)")
        arrays = [a for a in [*args, *kwargs.values()] if isinstance(a, np.ndarray)]
        self.freeze()
        wargs, wkwargs, placed = self.inputs.place(args, kwargs)
        cpu0 = self.sandbox.cpu_ns()
        self.thaw()
        t0 = time.perf_counter_ns()
        reply = self._exchange({"op": "call", "args": wargs, "kwargs": wkwargs}, timeout)
        t1 = time.perf_counter_ns()
        self.freeze()
        cpu1 = self.sandbox.cpu_ns()
        output = None
        if reply.get("ok") and isinstance(reply.get("output"), dict):
            output = self.outputs.read(reply["output"])
        return CallResult(
            reply=reply,
            output=output,
            wall_ns=t1 - t0,
            cpu_ns=None if cpu0 is None or cpu1 is None else cpu1 - cpu0,
            input_changed=self.inputs.intact(placed, arrays),
        )

    def call_run(
        self,
        calls: Sequence[tuple[Sequence[Any], dict[str, Any]]],
        timeout: Callable[[], float],
    ) -> list[CallResult]:
        """Calls in a row with the worker thawed from the first request to the last reply.

        Freezing and thawing around every call cost the worker more CPU than a small call
        does (a frozen task is woken to freeze, and again to thaw) and diluted every ratio.
        Here each call's input is still written only after the previous call has returned (no
        look-ahead), but the per-call windows tile: each starts where the previous one ended,
        on both clocks, and the CPU from the last reply until the worker is frozen again goes
        to the last call. So every cycle any of the worker's threads or children spends in the
        run is charged to some call of it, wherever it happened (a thread working on an input
        the moment it appears, or finishing an output after the reply), and the run's total is
        exact. Outputs are read at the reply, while the worker runs: what a thread writes into
        the output area afterwards cannot change what was judged. `timeout()` gives each call's
        limit (it may raise to stop the run). Raises WorkerError like `request`.
        """
        if self.inputs is None or self.outputs is None:
            raise RuntimeError("this worker has no shared areas (arena_bytes)")
        self.freeze()
        results: list[CallResult] = []
        cpu_mark = self.sandbox.cpu_ns()
        wall_mark = time.perf_counter_ns()
        self.thaw()
        try:
            for args, kwargs in calls:
                arrays = [a for a in [*args, *kwargs.values()] if isinstance(a, np.ndarray)]
                wargs, wkwargs, placed = self.inputs.place(list(args), kwargs)
                reply = self._exchange({"op": "call", "args": wargs, "kwargs": wkwargs}, timeout())
                output = None
                if reply.get("ok") and isinstance(reply.get("output"), dict):
                    output = self.outputs.read(reply["output"])
                changed = self.inputs.intact(placed, arrays)
                cpu_now, wall_now = self.sandbox.cpu_ns(), time.perf_counter_ns()
                cpu = None if cpu_mark is None or cpu_now is None else cpu_now - cpu_mark
                results.append(CallResult(reply, output, wall_now - wall_mark, cpu, changed))
                cpu_mark, wall_mark = cpu_now, wall_now
        finally:
            self.freeze()
        cpu_end = self.sandbox.cpu_ns()
        last = results[-1] if results else None
        if last is not None and last.cpu_ns is not None and cpu_end is not None:
            assert cpu_mark is not None
            last.cpu_ns += cpu_end - cpu_mark
        return results

    def guard_config(self) -> dict[str, Any]:
        """What the worker's guard protects: the task package and the judge's /proc entry."""
        protected = [[str(p), "oracle_access"] for p in self.protect]
        protected.append([f"/proc/{os.getpid()}", "judge_memory_access"])
        return {"protected": protected}

    def _await_reply(self, deadline: float) -> None:
        """Wait until the reply starts arriving; if the worker has died, do not wait for an EOF
        that a grandchild holding the pipe open would never send."""
        poller = select.poll()  # not select(): it fails on descriptors above 1023
        poller.register(self._from_worker, select.POLLIN)
        while (left := deadline - time.monotonic()) > 0:
            if poller.poll(math.ceil(min(left, 0.05) * 1000)):
                return
            if self.proc is not None and self.proc.poll() is not None:
                if not poller.poll(50):
                    raise wire.WireClosed("the worker exited")
                return

    def request(self, msg: dict[str, Any], timeout: float) -> dict[str, Any]:
        """One request other than a call: the worker runs only while it is being answered."""
        if msg.get("op") == "load" and self.policy.guard and "guard" not in msg:
            msg = {**msg, "guard": self.guard_config()}
        if msg.get("op") == "hello":
            msg = {**msg, **self.hello_extras()}
        self.thaw()
        reply = self._exchange(msg, timeout)
        if self.inputs is not None:
            self.freeze()
        return reply

    def _exchange(self, msg: dict[str, Any], timeout: float) -> dict[str, Any]:
        msg = {**msg, "id": next(self._ids)}
        try:
            wire.send(self._to_worker, msg)
            deadline = time.monotonic() + timeout
            self._await_reply(deadline)
            reply = wire.recv(self._from_worker, timeout=max(deadline - time.monotonic(), 1e-3))
        except wire.WireTimeout:
            self.close(graceful=False)
            raise WorkerError("timeout", f"no answer within {timeout:.1f} s") from None
        except (wire.WireClosed, BrokenPipeError):
            code, detail = self._crash_detail()
            raise WorkerError(code, detail) from None
        except wire.WireError as e:
            self.close(graceful=False)
            raise WorkerError("protocol_violation", str(e)) from None
        if not isinstance(reply, dict):
            self.close(graceful=False)
            raise WorkerError("protocol_violation", "reply is not an object")
        if reply.get("id") != msg["id"]:
            self.close(graceful=False)
            raise WorkerError(
                "protocol_violation",
                f"reply for request {reply.get('id')!r} while waiting for {msg['id']} (a frame "
                "not written by the worker loop, e.g. forged by the candidate)",
            )
        return reply

    def _crash_detail(self) -> tuple[str, str]:
        code = None
        if self.proc is not None:
            try:
                code = self.proc.wait(timeout=2)
            except Exception:  # still running: it closed the pipe without exiting
                code = None
            self.close(graceful=False)
        return exit_reason(code), f"worker exited with status {code}; log tail: {self.log_tail()!r}"

    def strays(self) -> set[int]:
        """Processes the candidate started that are still running now."""
        return self.sandbox.strays()

    def kill_strays(self) -> int:
        return self.sandbox.kill_strays()

    def sandbox_report(self) -> dict[str, Any]:
        """The isolation this worker ran under (part of the verdict)."""
        return self.sandbox.report()

    def log_tail(self, n: int = 800) -> str:
        try:
            data = self.log_path.read_bytes()
        except OSError:
            return ""
        return data[-n:].decode("utf-8", "replace")

    def close(self, graceful: bool = True) -> None:
        """Ask the worker to exit (when it is known to be idle), then end its whole tree."""
        with contextlib.suppress(OSError):
            self.thaw()  # a frozen process cannot act on a signal, not even SIGKILL (v1)
        if graceful and self.proc is not None and self.proc.poll() is None:
            try:
                wire.send(self._to_worker, {"op": "exit"})
                self.proc.wait(timeout=1)
            except Exception:  # a stuck or dead worker is killed below either way
                pass
        self.sandbox.close()  # the worker and all it started, detached daemons included
        for fd in (self._to_worker, self._from_worker):
            if fd >= 0:
                with contextlib.suppress(OSError):
                    os.close(fd)
        self._to_worker = self._from_worker = -1
        for arena in (self.inputs, self.outputs):
            if arena is not None:
                arena.close()

    def __enter__(self) -> WorkerClient:
        self.start()
        return self

    def __exit__(self, *exc: type[BaseException] | BaseException | TracebackType | None) -> None:
        self.close()
