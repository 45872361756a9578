"""The judge's handle on one worker process: start it, talk to it, end it."""

from __future__ import annotations

import contextlib
import itertools
import math
import os
import select
import sys
import time
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from types import TracebackType
from typing import Any

import numpy as np

from optarena.judge.client._arena import InputArena, OutputArena
from optarena.judge.client._calls import CallRun
from optarena.judge.client._layout import (
    call_layout,
    grow_pipe,
    input_mappings,
)
from optarena.judge.client._objects import ObjectReader
from optarena.judge.client._results import CallResult, WorkerError
from optarena.judge.client._worker_env import exit_reason, resource_limits, worker_env
from optarena.judge.worker import _wire as wire
from optarena.sandbox import Sandbox, SandboxPolicy, process_vm_read
from optarena.tasks import WorkerLimits

WORKER_SCRIPT = Path(__file__).resolve().parents[1] / "worker" / "_loop.py"  # judge/worker/


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
        self.sealed_inputs = False  # the worker sealed its input area's mapping (`mseal`)
        self.objects: ObjectReader | None = None  # ... and by reference (see `_objects`)
        self.cpu_at_rest: int | None = None  # the cgroup's CPU when last frozen between runs
        self.input_ranges: list[tuple[int, int]] = []  # where the input area is mapped there
        self.bound: dict[int, Any] = {}  # template -> the layout it was bound with
        self._to_worker = self._from_worker = -1
        # The reply pipe's poll set, made once (not select(): it fails on descriptors above
        # 1023); a fresh one per call was part of the judge's turn between two timed calls.
        self._reply_poll = select.poll()
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
            grow_pipe(judge_r, self.reply_pipe_bytes)
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
        # Every read of the reply pipe waits in poll, with a deadline: non-blocking, a frame
        # the worker wrote only part of cannot hold the judge (see `_calls._take`). And every
        # write to the request pipe: a worker that never drains it (it can shrink the pipe to
        # one page and always leave a byte unread) cannot hold the judge either.
        os.set_blocking(judge_r, False)
        os.set_blocking(judge_w, False)
        self._reply_poll.register(judge_r, select.POLLIN)

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
            input_changed=self.inputs.changed(placed.copies),
        )

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
            self._rest()

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
        msg["by_ref"] = self.objects is not None
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
        warm: int = 0,
    ) -> list[CallResult]:
        """Calls of one bound template in a row, thawed from the first go frame to the last
        output; the windows tile like `call_run`'s (every cycle of the worker's tree during
        the run is charged to one of its calls, and the run's total is exact).

        Per call: the judge writes the inputs, then the go frame; the worker answers with the
        output's bytes, which are what is judged (read at the answer, so nothing the candidate
        does later changes them). A call whose layout differs from the bound one is bound
        again first, inside the run (its cost is timed, as in every arm). The run stops at
        the first call that did not deliver a plain array (its result says why). The judge's
        side of it is `_calls.CallRun`.

        `warm`: the first calls are the caller's uncounted warm-up; the CPU the cgroup used
        while frozen is then charged to the first call after them, never to a call that does
        not count (the tiles still add up to all the cgroup used). Raises WorkerError like
        `request`."""
        return CallRun(self, template, calls, max_output_bytes).run(timeout, warm)

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
        self.input_ranges = input_mappings(pid)
        return got.tobytes().hex() == want

    def _read_memory(self, address: int, into: np.ndarray) -> None:
        pid = self.sandbox.worker_pid
        assert pid is not None
        try:
            process_vm_read(pid, address, into.__array_interface__["data"][0], into.nbytes)
        except OSError as e:
            raise wire.WireError(f"the output at {address:#x} cannot be read: {e}") from None

    def guard_config(self) -> dict[str, Any]:
        """What the worker's guard protects: the task package and the judge's /proc entry."""
        protected = [[str(p), "oracle_access"] for p in self.protect]
        protected.append([f"/proc/{os.getpid()}", "judge_memory_access"])
        return {"protected": protected}

    def _await_reply(self, deadline: float) -> None:
        """Wait until the reply starts arriving; if the worker has died, do not wait for an EOF
        that a grandchild holding the pipe open would never send."""
        poller = self._reply_poll
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
        if msg.get("op") == "hello":  # answered before any candidate code exists
            self.sealed_inputs = reply.get("sealed") is True
            self.reads_memory = self._can_read_memory(reply.get("probe"))
            pid = self.sandbox.worker_pid
            if self.reads_memory and pid is not None:
                self.objects = ObjectReader.probe(pid, reply["probe"])
        if self.inputs is not None:
            self._rest()
        return reply

    def _rest(self) -> None:
        """Freeze after an untimed request; the CPU count from here on is a run's (see
        `run_calls`)."""
        self.freeze()
        self.cpu_at_rest = self.sandbox.cpu_ns() if self.frozen else None

    def _exchange(self, msg: dict[str, Any], timeout: float) -> dict[str, Any]:
        msg = {**msg, "id": next(self._ids)}
        with self._worker_errors(timeout):
            deadline = time.monotonic() + timeout
            wire.send(self._to_worker, msg, deadline)
            self._await_reply(deadline)
            reply = wire.recv(self._from_worker, timeout=max(deadline - time.monotonic(), 1e-3))
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

    @contextlib.contextmanager
    def _worker_errors(self, timeout: float) -> Iterator[None]:
        """A wire failure as the WorkerError it means (see `_wire_failure`)."""
        try:
            yield
        except (wire.WireError, BrokenPipeError) as e:
            raise self._wire_failure(e, timeout) from None

    def _wire_failure(self, e: Exception, timeout: float) -> WorkerError:
        """The WorkerError a wire failure means; the worker is closed where it cannot be
        trusted to answer again."""
        if isinstance(e, wire.WireTimeout):
            self.close(graceful=False)
            return WorkerError("timeout", f"no answer within {timeout:.1f} s")
        if isinstance(e, wire.WireClosed | BrokenPipeError):
            code, detail = self._crash_detail()
            return WorkerError(code, detail)
        self.close(graceful=False)
        return WorkerError("protocol_violation", str(e))

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
                wire.send(self._to_worker, {"op": "exit"}, time.monotonic() + 1)
                self.proc.wait(timeout=1)
            except Exception:  # a stuck or dead worker is killed below either way
                pass
        self.sandbox.close()  # the worker and all it started, detached daemons included
        if self._from_worker >= 0:  # before the number can name another file
            with contextlib.suppress(KeyError, ValueError):
                self._reply_poll.unregister(self._from_worker)
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
