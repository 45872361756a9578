"""The judge's handle on one worker process: start it, talk to it, end it."""

from __future__ import annotations

import contextlib
import fcntl
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
from optarena.judge.worker import _run as run
from optarena.judge.worker import _wire as wire
from optarena.sandbox import ResourceLimits, Sandbox, SandboxPolicy
from optarena.sandbox._linux import process_vm_read
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
    call_wall_ns: int | None = None  # `run_calls`: from the go frame to the answer only


@dataclass(frozen=True)
class CallLayout:
    """What `bind` fixes about a call: its arrays' layout and the place and kind of every
    numeric scalar (whose values vary per call and travel in the go frame); other arguments
    are part of the layout. Calls with equal layouts share one bound template."""

    arrays: tuple[Any, ...]
    scalars: tuple[tuple[str, int | str, str], ...]
    fixed: tuple[Any, ...]

    def values(self, args: list[Any], kwargs: dict[str, Any]) -> list[Any]:
        return [args[k] if w == "a" else kwargs[k] for w, k, _ in self.scalars]  # type: ignore[index]


def _scalar_kind(v: Any) -> str | None:
    if isinstance(v, bool | np.bool_):
        return "b"
    if isinstance(v, int | np.integer) and abs(int(v)) <= 2**53:
        return "i"
    if isinstance(v, float | np.floating) and math.isfinite(float(v)):
        return "f"
    return None


def call_layout(args: list[Any], kwargs: dict[str, Any]) -> CallLayout:
    arrays: list[Any] = []
    scalars: list[tuple[str, int | str, str]] = []
    fixed: list[Any] = []
    for where, items in (("a", list(enumerate(args))), ("k", list(kwargs.items()))):
        for key, v in items:
            if isinstance(v, np.ndarray):
                arrays.append((where, key, v.shape, v.strides, v.dtype.str, _offset(v)))
            elif (kind := _scalar_kind(v)) is not None:
                scalars.append((where, key, kind))
            else:
                fixed.append((where, key, repr(v)))
    return CallLayout(tuple(arrays), tuple(scalars), tuple(fixed))


def _offset(a: np.ndarray) -> int:
    """Where the first element lies in the array's span (layouts with equal shapes and strides
    can still differ there: a reversed view starts at its end)."""
    if a.size == 0:
        return 0
    from numpy.lib.array_utils import byte_bounds

    return int(a.__array_interface__["data"][0] - byte_bounds(a)[0])


def _segments(layouts: Sequence[CallLayout]) -> list[tuple[int, int]]:
    """[start, end) runs of calls with the same layout."""
    out: list[tuple[int, int]] = []
    for i, layout in enumerate(layouts):
        if out and layouts[out[-1][0]] == layout:
            out[-1] = (out[-1][0], i + 1)
        else:
            out.append((i, i + 1))
    return out


def _input_mappings(pid: int) -> list[tuple[int, int]]:
    """Address ranges where the worker mapped its input area, from the kernel's list of its
    mappings (an output there aliases an input; the worker's own word is not needed)."""
    out = []
    try:
        with open(f"/proc/{pid}/maps", encoding="ascii", errors="replace") as f:
            for line in f:
                if "optarena-inputs" in line:
                    lo, _, hi = line.split(" ", 1)[0].partition("-")
                    out.append((int(lo, 16), int(hi, 16)))
    except (OSError, ValueError):
        pass
    return out


def _grow_pipe(fd: int, size: int) -> None:
    """Room for `size` bytes in a pipe, so that a worker's write of an output frame does not
    wait for the judge (each wait is two context switches on the shared CPU, timed)."""
    f_setpipe_sz = 1031
    for want in (size, 1 << 20):
        try:
            fcntl.fcntl(fd, f_setpipe_sz, max(want, 1 << 16))
            return
        except OSError:
            continue


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
        cpus: Sequence[int] | None = None,
        reply_pipe_bytes: int | None = None,
    ) -> None:
        """`protect`: paths the candidate must not read (the task package), hidden where the
        machine allows and watched by the worker's guard. `arena_bytes`: sizes of the input
        and output areas for `call` (None: a worker that only counts instructions). `cpus`:
        where it may run (a timed worker: its pair's CPU, held by a cpuset where possible).
        `reply_pipe_bytes`: room for one output frame of `run_calls` in the reply pipe."""
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
            cpus=cpus,
        )
        self.reply_pipe_bytes = reply_pipe_bytes
        self.reads_memory = False  # outputs of runs read from the worker's memory (see hello)
        self.input_ranges: list[tuple[int, int]] = []  # where the input area is mapped there
        self.bound: dict[int, Any] = {}  # template -> the layout it was bound with
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
        if self.reply_pipe_bytes:
            _grow_pipe(judge_r, self.reply_pipe_bytes)
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

    def bind_request(
        self,
        template: int,
        args: Sequence[Any],
        kwargs: dict[str, Any],
        timeout: float,
        null_output: tuple[tuple[int, ...], str] | None = None,
    ) -> dict[str, Any]:
        """Describe calls shaped like `args`/`kwargs` to the worker as `template` (see
        `worker/_run`), untimed: the worker runs only while it answers. Only layouts cross,
        no values. `null_output`: (shape, dtype) the null arm's function returns."""
        self.thaw()
        try:
            return self._bind(template, args, kwargs, timeout, null_output)
        finally:
            self.freeze()

    def _bind(
        self,
        template: int,
        args: Sequence[Any],
        kwargs: dict[str, Any],
        timeout: float,
        null_output: tuple[tuple[int, ...], str] | None = None,
    ) -> dict[str, Any]:
        assert self.inputs is not None
        layout = call_layout(list(args), kwargs)
        wargs, wkwargs, _ = self.inputs.place(list(args), kwargs, write=False)
        msg: dict[str, Any] = {
            "op": "bind",
            "template": template,
            "args": wargs,
            "kwargs": wkwargs,
            "scalars": [[w, k, kind] for w, k, kind in layout.scalars],
        }
        msg["in_memory"] = self.reads_memory
        if null_output is not None:
            msg["null_output"] = {"shape": list(null_output[0]), "dtype": null_output[1]}
        reply = self._exchange(msg, timeout)
        if reply.get("ok"):
            self.bound[template] = layout
        return reply

    def run_calls(
        self,
        template: int,
        calls: Sequence[tuple[Sequence[Any], dict[str, Any]]],
        timeout: Callable[[], float],
        max_output_bytes: int,
    ) -> list[CallResult]:
        """Calls of one bound template in a row, thawed from the first go frame to the last
        output; the windows tile like `call_run`'s (every cycle of the worker's tree during
        the run is charged to one of its calls, and the run's total is exact).

        Per call: the judge writes the inputs, then the go frame; the worker answers with the
        output's bytes, which are what is judged (read at the answer, so nothing the candidate
        does later changes them). A call whose layout differs from the bound one is bound
        again first, inside the run (its cost is timed, as in every arm). The run stops at
        the first call that did not deliver a plain array (its result says why).
        Raises WorkerError like `request`."""
        if self.inputs is None:
            raise RuntimeError("this worker has no input area (arena_bytes)")
        self.freeze()
        results: list[CallResult] = []
        cpu_mark = self.sandbox.cpu_ns()
        wall_mark = time.perf_counter_ns()
        self.thaw()
        try:
            segments = _segments([call_layout(list(a), k) for a, k in calls])
            for start, end in segments:
                layout = call_layout(list(calls[start][0]), calls[start][1])
                if self.bound.get(template) != layout:
                    reply = self._bind(template, calls[start][0], calls[start][1], timeout())
                    if reply.get("violations"):  # the guard's findings end the run here
                        results.append(CallResult({**reply, "ok": False}, None, 0, 0, None))
                        return results
                    if not reply.get("ok"):
                        raise WorkerError("protocol_violation", f"bind refused: {reply}")
                for i in range(start, end):
                    args, kwargs = calls[i]
                    arrays = [a for a in [*args, *kwargs.values()] if isinstance(a, np.ndarray)]
                    _, _, placed = self.inputs.place(list(args), kwargs)
                    scalars = [float(v) for v in layout.values(list(args), kwargs)]
                    go = run.go_frame(i - start, end - start, template, scalars)
                    t_go = time.perf_counter_ns()
                    reply, output, t_answer = self._run_answer(
                        go, i - start, timeout(), max_output_bytes
                    )
                    changed = self.inputs.intact(placed, arrays)
                    cpu_now, wall_now = self.sandbox.cpu_ns(), time.perf_counter_ns()
                    cpu = None if cpu_mark is None or cpu_now is None else cpu_now - cpu_mark
                    tile = wall_now - wall_mark
                    results.append(CallResult(reply, output, tile, cpu, changed, t_answer - t_go))
                    cpu_mark, wall_mark = cpu_now, wall_now
                    if output is None:
                        return results
        finally:
            self.freeze()
            cpu_end = self.sandbox.cpu_ns()
            last = results[-1] if results else None
            if last is not None and last.cpu_ns is not None and cpu_end is not None:
                assert cpu_mark is not None
                last.cpu_ns += cpu_end - cpu_mark
        return results

    def _can_read_memory(self, probe: Any) -> bool:
        """Whether this judge can read the worker's memory (the hello reply names bytes, written
        before any candidate code existed, and where they are)."""
        pid = self.sandbox.worker_pid
        if pid is None or not isinstance(probe, dict):
            return False
        address, want = probe.get("address"), probe.get("hex")
        if type(address) is not int or not isinstance(want, str) or len(want) > 256:
            return False
        got = np.zeros(len(want) // 2, dtype=np.uint8)
        try:
            process_vm_read(pid, address, got.__array_interface__["data"][0], got.nbytes)
        except OSError:
            return False
        self.input_ranges = _input_mappings(pid)
        return got.tobytes().hex() == want

    def _run_answer(
        self, go: bytes, index: int, timeout: float, max_bytes: int
    ) -> tuple[dict[str, Any], np.ndarray | None, int]:
        """Send one go frame and read the output frame it releases (hostile input: anything
        malformed is a protocol_violation, bounded in time and memory)."""
        deadline = time.monotonic() + timeout
        fd = self._from_worker
        try:
            wire._write_all(self._to_worker, go)
            self._await_reply(deadline)
            head = bytearray(run.OUT.size)
            wire._read_into(fd, memoryview(head), deadline)
            answered = time.perf_counter_ns()
            magic, idx, nbytes, address, status, ndim, flags, dt = run.OUT.unpack(head)
            in_memory = status == run.STATUS_IN_MEMORY
            if magic != run.OUT_MAGIC or idx != index or ndim > run.MAX_NDIM:
                raise wire.WireError("malformed output frame header")
            if status > 2 or in_memory != (self.reads_memory and status != run.STATUS_FRAME):
                raise wire.WireError("an output frame of the wrong kind")
            raw_shape = bytearray(8 * ndim)
            wire._read_into(fd, memoryview(raw_shape), deadline)
            shape = run.SHAPES[ndim].unpack(raw_shape)
            if status == run.STATUS_FRAME:
                reply = wire.recv(fd, timeout=max(deadline - time.monotonic(), 1e-3))
                if not isinstance(reply, dict):
                    raise wire.WireError("reply is not an object")
                return reply, None, answered
            dtype = wire._DTYPES.get(dt.rstrip(b"\0").decode("ascii", "replace"))
            count = math.prod(shape) if all(d >= 0 for d in shape) else -1
            if dtype is None or count < 0 or nbytes != count * dtype.itemsize:
                raise wire.WireError("output frame: shape, dtype and size disagree")
            desc = {"shape": list(shape), "dtype": dtype.str, "nbytes": nbytes}
            aliases = bool(flags & run.FLAG_ALIASES) or (
                in_memory
                and any(lo < address + nbytes and address < hi for lo, hi in self.input_ranges)
            )
            reply = {"ok": True, "aliases": aliases, "lazy": None}
            if nbytes > max_bytes:  # never read: the arm is rejected and the worker closed
                return {**reply, "output": {**desc, "too_large": True}}, None, answered
            data = np.empty(nbytes, dtype=np.uint8)
            if nbytes and in_memory:
                pid = self.sandbox.worker_pid
                assert pid is not None
                try:
                    process_vm_read(pid, address, data.__array_interface__["data"][0], nbytes)
                except OSError as e:
                    raise wire.WireError(
                        f"the output at {address:#x} cannot be read: {e}"
                    ) from None
            elif nbytes:
                wire._read_into(fd, data.data, deadline)
        except wire.WireTimeout:
            self.close(graceful=False)
            raise WorkerError("timeout", f"no answer within {timeout:.1f} s") from None
        except (wire.WireClosed, BrokenPipeError):
            code, detail = self._crash_detail()
            raise WorkerError(code, detail) from None
        except wire.WireError as e:
            self.close(graceful=False)
            raise WorkerError("protocol_violation", str(e)) from None
        return {**reply, "output": desc}, data.view(dtype).reshape(shape), answered

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
        if msg.get("op") == "hello":
            self.reads_memory = self._can_read_memory(reply.get("probe"))
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
