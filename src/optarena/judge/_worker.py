"""The candidate's worker process: a fresh interpreter that imports the candidate and calls it.

Run as `python -I _worker.py FD_IN FD_OUT` with the candidate's private copy as working
directory. It imports nothing of optarena (the wire module is loaded by path) and binds its
clock before any candidate code is imported, so a candidate patching `time` later cannot change
what the worker measures with. The judge never trusts it further than that: outputs are checked
in the judge's own process.
"""

from __future__ import annotations

import importlib.util
import os
import sys
import time
import traceback
from pathlib import Path
from typing import Any

_perf_ns = time.perf_counter_ns
_thread_cpu_ns = time.thread_time_ns


def _load_wire() -> Any:
    path = Path(__file__).resolve().with_name("_wire.py")
    spec = importlib.util.spec_from_file_location("_optarena_wire", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


wire = _load_wire()

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

    def op_hello(self, msg: dict[str, Any]) -> dict[str, Any]:
        return {
            "ok": True,
            "pid": os.getpid(),
            "python": sys.version.split()[0],
            "numpy": np.__version__,
            "cwd": os.getcwd(),
        }

    def op_load(self, msg: dict[str, Any]) -> dict[str, Any]:
        path = Path(msg["file"])
        if not path.is_file():
            return {"ok": False, "code": "entry_missing", "error": f"{msg['file']} not found"}
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
            return {"ok": False, "code": "raised", "error": traceback.format_exc(limit=8)}
        desc = _describe(out)
        aliases = isinstance(desc, np.ndarray) and any(np.shares_memory(out, a) for a in inputs)
        return {
            "ok": True,
            "output": desc,
            "inputs_after": inputs,
            "aliases": bool(aliases),
            "elapsed_ns": elapsed,
        }


def main(argv: list[str]) -> int:
    fd_in, fd_out = int(argv[1]), int(argv[2])
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
        wire.send(fd_out, reply)


if __name__ == "__main__":
    sys.exit(main(sys.argv))
