"""The candidate's worker process: a fresh interpreter that imports the candidate and calls it.

Run as `python -I worker/_loop.py FD_IN FD_OUT` with the candidate's private copy as working
directory. It imports nothing of optarena (the wire module is loaded by path). It measures
nothing: the candidate runs in this process and could rewrite anything the loop reports, so
the judge times every call from outside (its own clock around the request, the kernel's CPU
accounting of this process's cgroup), reads inputs and outputs through shared memory it checks
itself, and treats what this loop says only as a way to reject, never to pass.
"""

from __future__ import annotations

import contextlib
import functools
import importlib.util
import mmap
import os
import struct
import sys
import time
import traceback
from pathlib import Path
from typing import Any


def _load_sibling(filename: str, name: str) -> Any:
    path = Path(__file__).resolve().with_name(filename)
    spec = importlib.util.spec_from_file_location(name, path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


wire = _load_sibling("_wire.py", "_optarena_wire")
run = _load_sibling("_run.py", "_optarena_run")  # the timed call path's frames
guard = _load_sibling("_guard.py", "_optarena_guard")  # audit hook, tamper and output checks
native = _load_sibling("_native.py", "_optarena_native")  # C and CUDA entries

import numpy as np  # noqa: E402  (before any candidate code)

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


_CONVERT = {"f": float, "i": int, "b": bool}


class Template:
    """One workload's calls as `bind` described them: views of the input area built once, and
    the arguments that are scalars, whose values each go frame carries (set in place: the
    callee gets `*args` and `**kwargs` unpacked, never these containers).

    Why the shapes below: every Python-level step of a timed call touches interpreter code and
    data that the judge's turn between calls has pushed out of the caches, so a step costs
    several times what it costs in a warm loop (a helper method, a `zip` and a conversion per
    scalar cost 3.5 us of an 84 us call, measured against a loop that skipped them). The
    worker's loop is the baseline's and the null arm's; a candidate's own loop need not take
    those steps. So `args` is a tuple unless a positional scalar needs it to be a list, and
    one float scalar (an `eps`, a `scale`: the common case) is set inline by the loop."""

    __slots__ = ("args", "fn", "kwargs", "one", "slots", "unpack")

    def __init__(self, fn: Any, args: list[Any], kwargs: dict[str, Any], scalars: list[Any]):
        self.fn = fn
        positional = any(w == "a" for w, _, _ in scalars)
        self.args: list[Any] | tuple[Any, ...] = args if positional else tuple(args)
        self.kwargs = kwargs
        self.slots: list[tuple[Any, Any, Any]] = [
            (args, int(k), _CONVERT[c]) if w == "a" else (kwargs, str(k), _CONVERT[c])
            for w, k, c in scalars
        ]
        self.unpack = struct.Struct(f"<{len(scalars)}d").unpack_from
        # (where, key) of the one float scalar, which the loop sets itself; else None
        one = len(self.slots) == 1 and scalars[0][2] == "f"
        self.one: tuple[Any, Any] | None = self.slots[0][:2] if one else None

    def place(self, frame: bytes) -> None:
        """The scalars' values of the go frame `frame`, into the arguments."""
        values = self.unpack(frame, run.GO.size)
        for (into, key, convert), v in zip(self.slots, values, strict=True):
            into[key] = convert(v)


def _null_entry(out: np.ndarray) -> Any:
    """The judge's null function: the call path's own cost, with an output of the right size
    to deliver (never allocated per call: allocating is the candidate's work)."""

    def null(*args: Any, **kwargs: Any) -> np.ndarray:
        return out

    return null


def _read_exact(fd: int, n: int) -> bytes:
    data = os.read(fd, n)
    while len(data) < n:
        more = os.read(fd, n - len(data))
        if not more:
            raise wire.WireClosed("the judge closed the pipe")
        data += more
    return data


def _write_all(fd: int, parts: list[Any]) -> None:
    left = sum(memoryview(p).nbytes for p in parts)
    done = os.writev(fd, parts)
    if done < left:  # only after a signal: finish byte by byte from where it stopped
        rest = b"".join(bytes(memoryview(p).cast("B")) for p in parts)[done:]
        wire._write_all(fd, rest)


class Worker:
    def __init__(self) -> None:
        self.fn: Any = None
        self.guard: Any = None
        self.inputs: mmap.mmap | None = None  # the judge's input area, read-only here
        self.outputs: mmap.mmap | None = None  # where each call's output is copied at return
        self.last: Any = None  # the previous call's output, to see it change after return
        self.late: list[dict[str, str]] = []
        self.templates: dict[int, Template] = {}
        self.in_area: np.ndarray | None = None  # the input area as bytes (aliasing check)
        self.null = False  # the judge's null arm: no candidate, `_null_entry` per template
        self.in_memory = False  # the judge reads outputs from this process's memory
        self.by_ref = False  # ... and the objects themselves: a call answers with `id(out)`
        self.held: Any = None  # the last output, alive until the judge has read it

    def op_hello(self, msg: dict[str, Any]) -> dict[str, Any]:
        cpus = msg.get("cpus")
        if cpus and hasattr(os, "sched_setaffinity"):
            # Pinned before candidate code exists: both arms of a timed pair share one CPU.
            with contextlib.suppress(OSError):
                os.sched_setaffinity(0, [int(c) for c in cpus])
        arena = msg.get("arena")
        sealed = False
        if arena:  # mapped before candidate code exists; the descriptors are closed at once
            self.inputs = _map(int(arena["in_fd"]), int(arena["in_size"]), writable=False)
            self.outputs = _map(int(arena["out_fd"]), int(arena["out_size"]), writable=True)
            self.in_area = np.frombuffer(self.inputs, dtype=np.uint8)
            sealed = _seal(self.in_area)
        mb = min(int(msg.get("prefault_mb") or 0), 4096)
        if mb > 0:
            # Grow and touch the heap once, before timing and before candidate code: with
            # trimming off the pages stay, so timed calls never pay for first-touch faults.
            chunks = [np.ones(1 << 19) for _ in range(mb // 4)]  # 4 MiB each, below mmap
            del chunks
        # Bytes at a known address: the judge tries to read them to choose how outputs travel.
        self.held = np.frombuffer(b"optarena-probe-" + os.urandom(17), dtype=np.uint8).copy()
        probe = {
            "address": self.held.__array_interface__["data"][0],
            "hex": self.held.tobytes().hex(),
            "object": id(self.held),  # ... and the array object itself, with its type's
            "ndarray": id(np.ndarray),  # address: how the judge reads outputs by reference
        }
        return {
            "ok": True,
            "probe": probe,
            "pid": os.getpid(),
            "python": sys.version.split()[0],
            "numpy": np.__version__,
            "cwd": os.getcwd(),
            "cpus": sorted(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else None,
            "sealed": sealed,
        }

    def op_load(self, msg: dict[str, Any]) -> dict[str, Any]:
        """Load the entry: a Python module, or a C file compiled here first (see `_native`);
        a `device = cuda` entry is wrapped to run and be timed on the GPU. `null`: load no
        candidate at all (the judge's null arm)."""
        if msg.get("null"):
            self.null = True
            return {"ok": True}
        path = Path(msg["file"])
        if not path.is_file():
            return {"ok": False, "code": "entry_missing", "error": f"{msg['file']} not found"}
        language = msg.get("language", "python")
        reply: dict[str, Any] = {"ok": True}
        library = ""
        if language == "c":  # before any candidate code exists: constructors run at dlopen
            try:
                library, reply["compiler_messages"] = native.compile_c(str(path), msg["build"])
            except native.LoadFailed as e:
                return {"ok": False, "code": e.code, "error": str(e)}
        if msg.get("guard"):  # before the candidate's first line runs
            own = {
                "worker": globals(),
                "Worker": vars(Worker),
                "wire": vars(wire),
                "run": vars(run),
                "native": vars(native),
                "CEntry": vars(native.CEntry),
                "CudaEntry": vars(native.CudaEntry),
            }
            self.guard = guard.install(os.getcwd(), msg["guard"], own)
        try:
            if language == "c":
                self.fn = native.CEntry(library, msg["function"], msg["binding"])
            else:
                self.fn = self._load_python(path, msg)
            if msg.get("device") == "cuda":
                self.fn = native.CudaEntry(self.fn)
        except native.LoadFailed as e:
            return {"ok": False, "code": e.code, "error": str(e)}
        except BaseException:  # the candidate's load failing in any way is a finding
            return {"ok": False, "code": "import_failed", "error": traceback.format_exc(limit=8)}
        return reply

    def _load_python(self, path: Path, msg: dict[str, Any]) -> Any:
        sys.path.insert(0, os.getcwd())
        spec = importlib.util.spec_from_file_location(path.stem, path)
        assert spec is not None and spec.loader is not None
        module = importlib.util.module_from_spec(spec)
        sys.modules[path.stem] = module
        spec.loader.exec_module(module)
        fn = getattr(module, msg["function"], None)
        if not callable(fn):
            raise native.LoadFailed(
                "entry_missing", f"{msg['file']} defines no function '{msg['function']}'"
            )
        return fn

    def op_call(self, msg: dict[str, Any]) -> dict[str, Any]:
        """One call on inputs the judge just wrote into the input area (read-only views).

        Nothing here times anything: the judge times the request from outside and reads the
        kernel's accounting of this process's cgroup. The output is copied into the output
        area before the reply, so the judge judges it as it was at return.
        """
        try:
            args = [self._input(a) for a in msg["args"]]
            kwargs = {k: self._input(v) for k, v in msg["kwargs"].items()}
        except (KeyError, TypeError, ValueError, AttributeError) as e:
            return {"ok": False, "code": "protocol", "error": f"bad call message: {e}"}
        inputs = _arrays(args, kwargs)
        self._check_last()
        try:
            out = self.fn(*args, **kwargs)
        except SystemExit as e:
            detail = f"SystemExit({e.code!r}) during the call"
            return {"ok": False, "code": "exited", "error": detail}
        except BaseException:
            code = guard.error_code(sys.exc_info()[1])
            return {"ok": False, "code": code, "error": traceback.format_exc(limit=8)}
        lazy = guard.lazy_reason(out)
        last = self.last
        reused = type(out) is np.ndarray and type(last) is np.ndarray
        if reused and np.may_share_memory(out, last) and np.shares_memory(out, last):
            self._late("the output reuses the memory of the previous call's output")
        output = self._put_output(out)
        self.last = out if type(out) is np.ndarray else None
        aliases = type(out) is np.ndarray and any(np.shares_memory(out, a) for a in inputs)
        reply = {"ok": True, "output": output, "aliases": bool(aliases), "lazy": lazy}
        if isinstance(self.fn, native.CudaEntry) and self.fn.device_ns is not None:
            reply["device_ns"] = self.fn.device_ns  # the candidate's process measured it
        return reply

    def _input(self, d: Any) -> Any:
        if not (isinstance(d, dict) and "__shm__" in d):
            return d
        if self.inputs is None:
            raise ValueError("no input area mapped")
        return np.ndarray(
            tuple(d["shape"]),
            dtype=np.dtype(d["dtype"]),
            buffer=self.inputs,
            offset=int(d["offset"]),
            strides=tuple(d["strides"]),
        )

    def _late(self, detail: str) -> None:
        self.late.append({"code": "output_changed_after_return", "detail": detail})

    def _check_last(self) -> None:
        """Did the previous output change after it was returned? The output area still holds
        its bytes as they were at return; a sample of elements is compared (a rewrite touches
        almost all), cheap enough for every call. Only ever a reason to reject."""
        last = self.last
        if last is None or self.outputs is None or last.nbytes > len(self.outputs):
            return
        then = np.ndarray(last.shape, dtype=last.dtype, buffer=self.outputs).reshape(-1)
        now = last.reshape(-1)
        step = max(1, now.size // 1024)
        if then[::step].tobytes() != now[::step].tobytes():  # bytes: NaN equals NaN here
            self._late("the previous call's output changed after it was returned")

    def _put_output(self, out: Any) -> dict[str, Any]:
        desc = _describe(out)
        if type(desc) is not np.ndarray:
            return desc
        info = {"shape": list(out.shape), "dtype": out.dtype.str, "nbytes": int(out.nbytes)}
        if self.outputs is None or out.nbytes > len(self.outputs):
            return {**info, "too_large": True}
        dst = np.ndarray(out.shape, dtype=out.dtype, buffer=self.outputs)
        np.copyto(dst, out, casting="no")
        return info

    def op_bind(self, msg: dict[str, Any]) -> dict[str, Any]:
        """Describe the calls of template `msg["template"]` (untimed, once per workload): the
        views of the input area they take and which arguments are scalars."""
        try:
            args = [self._input(a) for a in msg["args"]]
            kwargs = {k: self._input(v) for k, v in msg["kwargs"].items()}
            null = msg.get("null_output")
            if self.null and null is not None:
                fn = _null_entry(np.zeros(tuple(null["shape"]), dtype=np.dtype(null["dtype"])))
            elif self.fn is not None and not self.null:
                fn = self.fn
            else:
                raise ValueError("nothing loaded to bind")
            self.templates[int(msg["template"])] = Template(fn, args, kwargs, msg["scalars"])
            self.in_memory = bool(msg.get("in_memory"))
            self.by_ref = self.in_memory and bool(msg.get("by_ref"))
        except (KeyError, TypeError, ValueError, AttributeError) as e:
            return {"ok": False, "code": "protocol", "error": f"bad bind message: {e}"}
        return {"ok": True}

    def run(self, fd_in: int, fd_out: int, head: bytes) -> None:
        """A run of calls of one template, each released by a go frame (see `_run`).

        This is the whole timed path, and it is kept to what any loop must do: call, answer
        with the output object's address (the judge reads the rest itself), block for the
        next go frame. Nothing else happens between the frames; the aliasing check, the
        guard's findings and the namespaces are the judge's business or asked for after the
        run. A loop the candidate wrote in place of this one has left to skip the call of the
        entry itself (its arithmetic inline): 1.8 us of an 81 us rmsnorm decode call, cold
        (docs/measurement.md, "A loop taken over")."""
        _, index, calls, t, m = run.GO.unpack(head + _read_exact(fd_in, run.GO.size - 4))
        tmpl = self.templates.get(t)
        if tmpl is None or m != len(tmpl.slots):
            self._run_reply(fd_out, index, {"ok": False, "code": "protocol", "error": "bad go"})
            return
        size = run.GO.size + 8 * m
        fn, args, kwargs, place = tmpl.fn, tmpl.args, tmpl.kwargs, tmpl.place
        if m:
            place(bytes(run.GO.size) + _read_exact(fd_in, 8 * m))
        into, key = tmpl.one or (None, None)
        many = bool(m) and into is None
        by_ref = self.by_ref
        pack, magic, go, ndarray, write, read = (
            run.REF.pack,
            run.REF_MAGIC,
            run.GO_MAGIC,
            np.ndarray,
            os.write,
            os.read,
        )
        value, at = run.SCALAR.unpack_from, run.GO.size
        while True:
            # The judge has read the previous output before it sent this go frame: let it go
            # now, as a caller that discards a result would, so this call may reuse its memory
            # (held through the call, it made every call's heap one output larger and colder
            # than in a caller's loop: prefill's 8 MiB output pushed the arms out of the cache).
            self.held = out = None
            try:
                out = fn(*args, **kwargs)
            except SystemExit as e:
                detail = f"SystemExit({e.code!r}) during the call"
                self._run_reply(fd_out, index, {"ok": False, "code": "exited", "error": detail})
                return
            except BaseException:
                code = guard.error_code(sys.exc_info()[1])
                error = traceback.format_exc(limit=8)
                self._run_reply(fd_out, index, {"ok": False, "code": code, "error": error})
                return
            if by_ref and type(out) is ndarray:
                write(fd_out, pack(magic, index, id(out)))
            elif not self._deliver(fd_out, index, out):
                return
            index += 1
            if index >= calls:
                if by_ref and type(out) is ndarray:
                    self.held = out  # alive until the judge has read it
                return
            frame = read(fd_in, size)
            if len(frame) != size or not frame.startswith(go):
                frame = self._next_go(fd_in, fd_out, size, frame, out)
                if frame is None:
                    return
            if into is not None:
                into[key] = value(frame, at)[0]
            elif many:
                place(frame)

    def _next_go(self, fd_in: int, fd_out: int, size: int, frame: bytes, out: Any) -> Any:
        """The next go frame, past a read in pieces or a `describe` frame for the output just
        returned; None (after a reply that says why) when the run ends instead."""
        while True:
            if frame and len(frame) < size:
                frame += _read_exact(fd_in, size - len(frame))
            if len(frame) == size and frame.startswith(run.GO_MAGIC):
                return frame
            index = run.GO.unpack_from(frame)[1] if len(frame) == size else 0
            if len(frame) != size or not frame.startswith(run.DESCRIBE_MAGIC):
                self._run_reply(fd_out, index, {"ok": False, "code": "protocol", "error": "go?"})
                return None
            if not self._deliver(fd_out, index, out):
                return None
            frame = os.read(fd_in, size)

    def describe_held(self, fd_in: int, fd_out: int, head: bytes) -> None:
        """A `describe` frame after a run's last call: that output in full."""
        _, index, _, _, m = run.GO.unpack(head + _read_exact(fd_in, run.GO.size - 4))
        if m:
            _read_exact(fd_in, 8 * m)  # the scalars' room, unused
        self._deliver(fd_out, index, self.held)

    def _deliver(self, fd: int, index: int, out: Any) -> bool:
        """The output frame of a call the fast path did not take: a non-contiguous array (made
        contiguous: the candidate's cost), bytes through the pipe where the judge cannot read
        this process's memory, else (no plain array at all) a wire reply that says what."""
        if type(out) is np.ndarray and out.dtype.str in wire._DTYPES and out.ndim <= run.MAX_NDIM:
            if not out.flags.c_contiguous:
                out = np.ascontiguousarray(out)
            if self.in_memory:
                self.held = out
                address = out.__array_interface__["data"][0]
                header = run.out_header(
                    index, out.nbytes, address, run.STATUS_IN_MEMORY, out.shape, 0, out.dtype.str
                )
                os.write(fd, header)
                return True
            area = self.in_area
            aliases = (
                area is not None and np.may_share_memory(out, area) and np.shares_memory(out, area)
            )
            header = run.out_header(
                index, out.nbytes, 0, run.STATUS_ARRAY, out.shape, int(aliases), out.dtype.str
            )
            _write_all(fd, [header, out.reshape(-1).view(np.uint8)])
            return True
        reply = {"ok": True, "output": _describe(out), "aliases": False, "lazy": None}
        reply["lazy"] = guard.lazy_reason(out)
        self._run_reply(fd, index, reply)
        return False

    def _run_reply(self, fd: int, index: int, reply: dict[str, Any]) -> None:
        reply["violations"] = self.findings(full=False)
        wire._write_all(fd, run.out_header(index, 0, 0, run.STATUS_FRAME, (), 0, ""))
        try:
            wire.send(fd, reply)
        except ValueError:  # NaN in a message the candidate shaped: say so without it
            wire.send(fd, {"ok": False, "code": "protocol", "error": "unsendable reply"})

    def op_settle(self, msg: dict[str, Any]) -> dict[str, Any]:
        """A pause at the end of a phase, after which the guard reports what it saw."""
        time.sleep(min(max(float(msg.get("delay_s", 0.05)), 0.0), 1.0))
        return {"ok": True}

    def findings(self, full: bool) -> list[dict[str, str]]:
        """Guard findings and late output changes since the last reply (`full`: with the
        guard's namespace comparison)."""
        late, self.late = self.late, []
        return late + (self.guard.drain(full) if self.guard is not None else [])

    def op_count(self, msg: dict[str, Any]) -> dict[str, Any]:
        """Calls for instruction counting under valgrind's callgrind: each call runs inside one
        ctypes call (libffi's `ffi_call`), the only code callgrind collects, one dump each. For
        a C entry that call is the C function's own: its output is prepared outside it, so the
        count is the candidate's instructions alone, without the interpreter's."""
        import ctypes

        call = ctypes.pythonapi.PyObject_CallNoArgs
        call.restype, call.argtypes = ctypes.py_object, [ctypes.py_object]
        for c in msg["calls"]:
            try:
                if isinstance(self.fn, native.CEntry):  # the C function is the ffi_call itself
                    params, _out = self.fn.prepare(c["args"], c["kwargs"])
                    self.fn.raw(*params)
                    continue
                call(functools.partial(self.fn, *c["args"], **c["kwargs"]))
            except BaseException:
                return {"ok": False, "code": "raised", "error": traceback.format_exc(limit=4)}
        return {"ok": True, "calls": len(msg["calls"])}


_MSEAL = 462  # the generic system call table's number: x86_64 and aarch64 alike


def _seal(area: np.ndarray) -> bool:
    """Seal the input area's mapping (`mseal`, Linux 6.10): from now on it cannot be moved,
    resized, mapped a second time by `mremap`, unmapped or made writable. The judge looks for
    outputs over the inputs where the area was mapped at hello; a red-team candidate returned
    its input through a second mapping made later (2026-12-07). False where the kernel has
    no `mseal` (the seccomp filter still refuses a second mapping; a move is not refused)."""
    if sys.platform != "linux":  # the number is Linux's own
        return False
    import ctypes

    try:
        libc = ctypes.CDLL(None, use_errno=True)
    except OSError:
        return False
    libc.syscall.restype = ctypes.c_long
    size = -(-area.nbytes // mmap.PAGESIZE) * mmap.PAGESIZE
    at = ctypes.c_void_p(area.ctypes.data)
    return bool(libc.syscall(_MSEAL, at, ctypes.c_size_t(size), ctypes.c_ulong(0)) == 0)


def _map(fd: int, size: int, writable: bool) -> mmap.mmap:
    prot = mmap.PROT_READ | (mmap.PROT_WRITE if writable else 0)
    try:
        return mmap.mmap(fd, size, mmap.MAP_SHARED, prot)
    finally:
        os.close(fd)


def main(argv: list[str]) -> int:
    fd_in, fd_out = int(argv[1]), int(argv[2])
    os.set_inheritable(fd_in, False)  # programs the candidate runs do not get the wire
    os.set_inheritable(fd_out, False)
    worker = Worker()
    while True:
        try:
            head = _read_exact(fd_in, 4)
            if head == run.GO_MAGIC:
                worker.run(fd_in, fd_out, head)
                continue
            if head == run.DESCRIBE_MAGIC:
                worker.describe_held(fd_in, fd_out, head)
                continue
            msg = wire.recv(fd_in, from_judge=True, prefix=head)
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
        # The namespaces are compared where a phase ends (load, settle): every reply's findings
        # are read by the judge, but a finding is reported once, so comparing them in a reply
        # the judge reads less carefully would use it up.
        reply["violations"] = worker.findings(full=op in ("load", "settle", "hello"))
        reply["id"] = msg.get("id")  # a reply forged by the candidate must guess this
        wire.send(fd_out, reply)


if __name__ == "__main__":
    sys.exit(main(sys.argv))
