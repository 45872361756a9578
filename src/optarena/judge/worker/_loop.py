"""The candidate's worker process: a fresh interpreter that imports the candidate and calls it.

Run as `python -I worker/_loop.py FD_IN FD_OUT` with the candidate's private copy as working
directory. It imports nothing of optarena (the wire module is loaded by path) and binds its
clock before any candidate code is imported, so a candidate patching `time` later cannot change
what the worker measures with. The judge never trusts it further than that: outputs are checked
in the judge's own process.
"""

from __future__ import annotations

import contextlib
import functools
import gc
import importlib.util
import os
import sys
import time
import traceback
from pathlib import Path
from typing import Any

_perf_ns = time.perf_counter_ns
_thread_cpu_ns = time.thread_time_ns
_gc_disable, _gc_enable = gc.disable, gc.enable


def _load_sibling(filename: str, name: str) -> Any:
    path = Path(__file__).resolve().with_name(filename)
    spec = importlib.util.spec_from_file_location(name, path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


wire = _load_sibling("_wire.py", "_optarena_wire")
guard = _load_sibling("_guard.py", "_optarena_guard")  # audit hook, tamper and output checks

import numpy as np  # noqa: E402  (after the clock is bound, before any candidate code)

_NUMERIC = set("biufc")


def _describe(out: Any) -> Any:
    """The output as plain data: an exact ndarray of a numeric dtype, or a description."""
    if type(out) is not np.ndarray:
        t = type(out)
        return {"__obj__": f"{t.__module__}.{t.__qualname__}"}
    if out.dtype.kind not in _NUMERIC or out.dtype.hasobject or out.dtype.fields is not None:
        return {"__obj__": f"numpy.ndarray with dtype {out.dtype}"}
    return out


def _arrays(args: list[Any], kwargs: dict[str, Any]) -> list[np.ndarray]:
    return [a for a in [*args, *kwargs.values()] if isinstance(a, np.ndarray)]


class Worker:
    def __init__(self) -> None:
        self.fn: Any = None
        self.guard: Any = None
        self.outputs = guard.OutputWatch()

    def op_hello(self, msg: dict[str, Any]) -> dict[str, Any]:
        cpus = msg.get("cpus")
        if cpus and hasattr(os, "sched_setaffinity"):
            # Pinned before candidate code exists: both arms of a timed pair share one CPU.
            with contextlib.suppress(OSError):
                os.sched_setaffinity(0, [int(c) for c in cpus])
        mb = min(int(msg.get("prefault_mb") or 0), 4096)
        if mb > 0:
            # Grow and touch the heap once, before timing and before candidate code: with
            # trimming off the pages stay, so timed calls never pay for first-touch faults.
            chunks = [np.ones(1 << 19) for _ in range(mb // 4)]  # 4 MiB each, below mmap
            del chunks
        return {
            "ok": True,
            "pid": os.getpid(),
            "python": sys.version.split()[0],
            "numpy": np.__version__,
            "cwd": os.getcwd(),
            "cpus": sorted(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else None,
        }

    def op_load(self, msg: dict[str, Any]) -> dict[str, Any]:
        path = Path(msg["file"])
        if not path.is_file():
            return {"ok": False, "code": "entry_missing", "error": f"{msg['file']} not found"}
        if msg.get("guard"):  # before the candidate's first line runs
            own = {"worker": globals(), "Worker": vars(Worker), "wire": vars(wire)}
            self.guard = guard.install(os.getcwd(), msg["guard"], own)
        sys.path.insert(0, os.getcwd())
        try:
            spec = importlib.util.spec_from_file_location(path.stem, path)
            assert spec is not None and spec.loader is not None
            module = importlib.util.module_from_spec(spec)
            sys.modules[path.stem] = module
            spec.loader.exec_module(module)
        except BaseException:  # the candidate's import failing in any way is a finding
            return {"ok": False, "code": "import_failed", "error": traceback.format_exc(limit=8)}
        fn = getattr(module, msg["function"], None)
        if not callable(fn):
            return {
                "ok": False,
                "code": "entry_missing",
                "error": f"{msg['file']} defines no function '{msg['function']}'",
            }
        self.fn = fn
        return {"ok": True}

    def op_call(self, msg: dict[str, Any]) -> dict[str, Any]:
        args, kwargs = msg["args"], msg["kwargs"]
        inputs = _arrays(args, kwargs)
        try:
            t0 = _perf_ns()
            out = self.fn(*args, **kwargs)
            elapsed = _perf_ns() - t0
        except SystemExit as e:
            return {
                "ok": False,
                "code": "exited",
                "error": f"SystemExit({e.code!r}) during the call",
            }
        except BaseException:
            code = guard.error_code(sys.exc_info()[1])
            return {"ok": False, "code": code, "error": traceback.format_exc(limit=8)}
        lazy = guard.lazy_reason(out)
        desc = self.outputs.returned(out, _describe(out))  # the bytes as they were at return
        aliases = isinstance(desc, np.ndarray) and any(np.shares_memory(out, a) for a in inputs)
        return {
            "ok": True,
            "output": desc,
            "inputs_after": inputs,
            "aliases": bool(aliases),
            "elapsed_ns": elapsed,
            "lazy": lazy,
        }

    def op_settle(self, msg: dict[str, Any]) -> dict[str, Any]:
        """A pause at the end of a phase, after which late output changes are reported."""
        time.sleep(min(max(float(msg.get("delay_s", 0.05)), 0.0), 1.0))
        return {"ok": True}

    def findings(self) -> list[dict[str, str]]:
        """Guard findings and late output changes since the last reply."""
        found = self.outputs.late_changes()
        return found + (self.guard.drain() if self.guard is not None else [])

    def op_time(self, msg: dict[str, Any]) -> dict[str, Any]:
        """A timed batch: the calls run back to back, each timed alone, with the collector off.

        Everything else (copies for the mutation check, describing outputs) happens outside the
        timed region; the judge checks every output against the oracle in its own process.
        """
        calls = [(c["args"], c["kwargs"]) for c in msg["calls"]]
        skip = int(msg.get("skip_outputs", 0))
        before = [[a.copy() for a in _arrays(args, kwargs)] for args, kwargs in calls]
        elapsed: list[int] = []
        cpu: list[int] = []  # CPU time of the calling thread (precise even under RLIMIT_CPU)
        outs: list[Any] = []
        snaps: list[Any] = []  # each output as it was at return (checked, and compared later)
        _gc_disable()
        try:
            for i, (args, kwargs) in enumerate(calls):
                try:
                    c0 = _thread_cpu_ns()
                    t0 = _perf_ns()
                    out = self.fn(*args, **kwargs)
                    elapsed.append(_perf_ns() - t0)
                    cpu.append(_thread_cpu_ns() - c0)
                except SystemExit as e:
                    detail = f"SystemExit({e.code!r}) during timed call {i}"
                    return {"ok": False, "code": "exited", "call": i, "error": detail}
                except BaseException:
                    code = guard.error_code(sys.exc_info()[1])
                    tb = traceback.format_exc(limit=8)
                    return {"ok": False, "code": code, "call": i, "error": tb}
                lazy = guard.lazy_reason(out)
                if lazy is not None:
                    detail = f"timed call {i} returned {lazy}"
                    return {"ok": False, "code": "lazy_output", "call": i, "error": detail}
                outs.append(out)
                desc = _describe(out)
                snaps.append(np.array(out, copy=True) if type(desc) is np.ndarray else desc)
        finally:
            _gc_enable()
        modified = [
            any(not _same_bytes(a, b) for a, b in zip(_arrays(*c), ref, strict=True))
            for c, ref in zip(calls, before, strict=True)
        ]
        aliases = [
            isinstance(out, np.ndarray) and any(np.shares_memory(out, a) for a in _arrays(*c))
            for c, out in zip(calls, outs, strict=True)
        ]
        for i, (out, snap) in enumerate(zip(outs, snaps, strict=True)):
            if type(snap) is np.ndarray and not _same_bytes(out, snap):
                detail = f"the output of timed call {i} changed after it was returned"
                code = "output_changed_after_return"
                return {"ok": False, "code": code, "call": i, "error": detail}
        return {
            "ok": True,
            "elapsed_ns": elapsed,
            "cpu_ns": cpu,
            # Outputs of leading warm-up calls (not counted) need not travel back.
            "outputs": [None if i < skip else s for i, s in enumerate(snaps)],
            "inputs_modified": modified,
            "aliases": aliases,
        }

    def op_count(self, msg: dict[str, Any]) -> dict[str, Any]:
        """Calls for instruction counting under valgrind's callgrind: each call runs inside one
        ctypes call (libffi's `ffi_call`), the only code callgrind collects, one dump each."""
        import ctypes

        call = ctypes.pythonapi.PyObject_CallNoArgs
        call.restype, call.argtypes = ctypes.py_object, [ctypes.py_object]
        for c in msg["calls"]:
            thunk = functools.partial(self.fn, *c["args"], **c["kwargs"])
            try:
                call(thunk)
            except BaseException:
                return {"ok": False, "code": "raised", "error": traceback.format_exc(limit=4)}
        return {"ok": True, "calls": len(msg["calls"])}


def _same_bytes(a: np.ndarray, b: np.ndarray) -> bool:
    if a.shape != b.shape or a.dtype != b.dtype:
        return False
    return bool(np.array_equal(a.reshape(-1).view(np.uint8), b.reshape(-1).view(np.uint8)))


def main(argv: list[str]) -> int:
    fd_in, fd_out = int(argv[1]), int(argv[2])
    os.set_inheritable(fd_in, False)  # programs the candidate runs do not get the wire
    os.set_inheritable(fd_out, False)
    worker = Worker()
    while True:
        try:
            msg = wire.recv(fd_in)
        except wire.WireClosed:
            return 0
        op = msg.get("op")
        if op == "exit":
            wire.send(fd_out, {"ok": True})
            return 0
        handler = getattr(worker, f"op_{op}", None)
        if handler is None:
            reply: dict[str, Any] = {"ok": False, "code": "protocol", "error": f"unknown op {op!r}"}
        else:
            reply = handler(msg)
        reply["violations"] = worker.findings()
        reply["id"] = msg.get("id")  # a reply forged by the candidate must guess this
        wire.send(fd_out, reply)


if __name__ == "__main__":
    sys.exit(main(sys.argv))
