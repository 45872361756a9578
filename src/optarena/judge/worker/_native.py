"""Entry points that are not a plain Python function: C compiled here, and CUDA calls.

Runs inside the worker, so, like `_loop.py`, it imports only the standard library and NumPy
(PyTorch, for CUDA entries, is imported by name when such an entry loads, never otherwise).

**C.** The candidate's C file is compiled *in this process's sandbox* (the compiler is a child
of the worker: same uid, namespaces, hidden task package, rlimits and cgroup as the code it
compiles), with the flags the judge sent, and loaded with ctypes. Nothing runs outside the
sandbox on candidate input: a `#include` of the oracle or of the judge's `/proc` entry reads what
the candidate's own code could read, which is nothing of the judge. The compiler's messages are
captured before any candidate code runs (constructors run at `dlopen`, after), so a failed
compile is reported exactly as the compiler wrote it.

**CUDA.** The wrapper copies each call's inputs to the device (fresh buffers per call, like the
host inputs), flushes the L2 cache by writing a buffer larger than it, and times the call with
CUDA events after a synchronisation, then copies the output back to a host ndarray. The event
time is measured in the candidate's process: it is reported beside the judge's own clocks and
checked against them (never above the judge's wall time of the request), not trusted.
"""

from __future__ import annotations

import ctypes
import importlib
import os
import random
import subprocess
from typing import Any

import numpy as np

MESSAGE_CHARS = 4000  # of the compiler's output kept in a reply (the end: the errors)


class LoadFailed(Exception):
    """The entry cannot be loaded; `code` is the reason code, the message the detail."""

    def __init__(self, code: str, detail: str) -> None:
        super().__init__(detail)
        self.code = code


def _tail(text: str) -> str:
    return text if len(text) <= MESSAGE_CHARS else "..." + text[-MESSAGE_CHARS:]


def compile_c(source: str, build: dict[str, Any]) -> tuple[str, str]:
    """Compile `source` into a shared object; returns (its path, the compiler's messages).

    `build` is the judge's: {"cc": path, "flags": [...], "libs": [...], "timeout_s": n}.
    Raises LoadFailed(compile_failed) with the compiler's output when it fails."""
    out_dir = os.path.join(os.getcwd(), ".optarena-build")
    os.makedirs(out_dir, exist_ok=True)
    out = os.path.join(out_dir, os.path.splitext(os.path.basename(source))[0] + ".so")
    argv = [str(build["cc"]), *map(str, build["flags"]), "-o", out, source, *build["libs"]]
    try:
        done = subprocess.run(
            argv,
            stdin=subprocess.DEVNULL,
            capture_output=True,
            timeout=float(build["timeout_s"]),
            check=False,
        )
    except subprocess.TimeoutExpired:
        raise LoadFailed(
            "compile_failed", f"the compiler ran past {build['timeout_s']} s"
        ) from None
    except OSError as e:
        raise LoadFailed("compile_failed", f"cannot run the compiler {build['cc']}: {e}") from None
    messages = (done.stdout + done.stderr).decode("utf-8", "replace")
    if done.returncode != 0 or not os.path.isfile(out):
        why = f"exit status {done.returncode}"
        raise LoadFailed("compile_failed", f"{why}: {_tail(messages) or '(no message)'}")
    return out, _tail(messages)


class CEntry:
    """A C function called like the task's Python entry: arrays in, a fresh array out.

    `binding` is the task's declared ABI (`CBinding`): the worker allocates the output, fills
    it with garbage (one finite value per call, drawn here, so code that reads the output
    before writing it is wrong by a wide margin), and passes sizes by value, arrays as
    pointers. `raw` is the ctypes function, for instruction counting (one `ffi_call` per call).
    """

    def __init__(self, library: str, function: str, binding: dict[str, Any]) -> None:
        self.binding = binding
        self.dtype = np.dtype(binding["dtype"])
        lib = ctypes.CDLL(library)  # the candidate's constructors run here
        try:
            raw = getattr(lib, function)
        except AttributeError:
            raise LoadFailed(
                "entry_missing", f"the compiled file defines no '{function}'"
            ) from None
        sizes = binding["sizes"]
        raw.restype = None
        raw.argtypes = [ctypes.c_int if p in sizes else ctypes.c_void_p for p in binding["params"]]
        self.raw = raw
        self._rng = random.Random(int.from_bytes(os.urandom(8), "little"))

    def prepare(self, args: Any, kwargs: dict[str, Any]) -> tuple[list[Any], np.ndarray]:
        """The C arguments for one call and the (garbage-filled) output they point into."""
        b = self.binding
        if kwargs or len(args) != len(b["inputs"]):
            raise TypeError(f"expected {len(b['inputs'])} positional arrays and no keywords")
        arrays: dict[str, np.ndarray] = {}
        for name, a in zip(b["inputs"], args, strict=True):
            if type(a) is not np.ndarray or a.dtype != self.dtype or not a.flags.c_contiguous:
                raise TypeError(f"input '{name}' must be a C-contiguous {self.dtype} ndarray")
            arrays[name] = a
        sizes = {}
        for size, where in b["sizes"].items():
            arg, _, axis = where.partition(".")
            sizes[size] = int(arrays[arg].shape[int(axis)])
        out = np.empty([sizes[d] for d in b["output_shape"]], dtype=self.dtype)
        out.fill(self._rng.choice((-1.0, 1.0)) * 10 ** self._rng.uniform(2.0, 4.0))
        params: list[Any] = []
        for p in b["params"]:
            if p in sizes:
                params.append(sizes[p])
            elif p == b["output"]:
                params.append(out.ctypes.data)
            else:
                params.append(arrays[p].ctypes.data)
        return params, out

    def __call__(self, *args: Any, **kwargs: Any) -> np.ndarray:
        params, out = self.prepare(args, kwargs)
        self.raw(*params)
        return out


def load_c(path: str, function: str, msg: dict[str, Any]) -> tuple[CEntry, str]:
    """Compile and load a C entry; (the callable, the compiler's messages). Raises LoadFailed."""
    library, messages = compile_c(path, msg["build"])
    return CEntry(library, function, msg["binding"]), messages


class CudaEntry:
    """A PyTorch entry on the GPU, timed with CUDA events (see the module docstring)."""

    L2_FLUSH_FACTOR = 2  # the flush buffer is this many times the L2 cache

    def __init__(self, fn: Any) -> None:
        self.fn = fn
        self.torch = importlib.import_module("torch")
        cuda = self.torch.cuda
        if not cuda.is_available():
            raise LoadFailed("import_failed", "torch sees no CUDA device in the worker")
        l2 = int(getattr(cuda.get_device_properties(0), "L2_cache_size", 0) or 64 << 20)
        size = self.L2_FLUSH_FACTOR * l2
        self.flush = self.torch.empty(size, dtype=self.torch.uint8, device="cuda")
        self.start = cuda.Event(enable_timing=True)
        self.end = cuda.Event(enable_timing=True)
        self.device_ns: int | None = None

    def _to_device(self, a: Any) -> Any:
        if isinstance(a, np.ndarray):
            host = np.array(a, order="C", copy=True)  # torch takes no read-only, reversed views
            return self.torch.from_numpy(host).to("cuda")  # a fresh device buffer per call
        return a

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        torch = self.torch
        dev_args = [self._to_device(a) for a in args]
        dev_kwargs = {k: self._to_device(v) for k, v in kwargs.items()}
        self.device_ns = None
        self.flush.zero_()  # evicts whatever the inputs' copy left in L2
        torch.cuda.synchronize()
        self.start.record()
        out = self.fn(*dev_args, **dev_kwargs)
        self.end.record()
        self.end.synchronize()
        torch.cuda.synchronize()  # work on other streams counts too (in the judge's clock)
        self.device_ns = int(self.start.elapsed_time(self.end) * 1e6)
        if type(out) is not torch.Tensor:
            return out  # described as what it is, and rejected as the wrong type
        if out.device.type != "cuda":
            raise TypeError(f"the output must stay on the CUDA device, got {out.device}")
        return out.detach().to("cpu").numpy()
