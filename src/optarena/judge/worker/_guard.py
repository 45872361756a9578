"""The worker's guard: an audit hook and tamper checks, installed before candidate code runs.

This is *not* the security boundary. The candidate runs in this interpreter, and determined code
(ctypes, a C extension, rewriting this module's state) can evade it. The boundary is the OS
sandbox (network namespace, dedicated uid, hidden task package, private scratch). The guard's
job is to *name* what a candidate tried, precisely and early, so the verdict says "wrote outside
its working directory" rather than a vague crash, and to block the attempt in-process even where
the OS measures are unavailable.

It also holds the worker's output bookkeeping: the snapshot taken the moment a call returns
(what the judge checks), the check that a returned output did not change afterwards (a buffer
filled later by a background thread, or reused by the next call), and the naming of outputs
that could be computed after return (ndarray subclasses, array-like proxies, memory maps).

Like `_wire.py` it imports only the standard library and NumPy, because the worker loads it by
path without importing optarena. Findings are {code, detail} dicts drained into each reply.
"""

from __future__ import annotations

import errno
import mmap
import os
import socket
import sys
from collections.abc import Mapping
from types import ModuleType
from typing import Any

import numpy as np

_WRITE_FLAGS = os.O_WRONLY | os.O_RDWR | os.O_CREAT | os.O_TRUNC | os.O_APPEND
_ALLOWED_WRITES = ("/dev/null", "/dev/stdout", "/dev/stderr", "/dev/shm")
_PATH_EVENTS = {  # event -> indices of path arguments that are written
    "os.remove": (0,),
    "os.rmdir": (0,),
    "os.mkdir": (0,),
    "os.rename": (0, 1),
    "os.symlink": (1,),
    "os.link": (1,),
    "os.truncate": (0,),
    "os.chmod": (0,),
    "os.chown": (0,),
    "os.utime": (0,),
    "shutil.rmtree": (0,),
}
_READ_EVENTS = {"os.listdir": 0, "os.scandir": 0}
_INET = (socket.AF_INET, socket.AF_INET6)
_SOCKET_EVENTS = ("socket.connect", "socket.bind", "socket.sendto", "socket.sendmsg")
# Ways to reach objects the candidate was never handed: the worker loop's state (its pipes,
# its input area, the templates of the timed path) is only reachable through them. A numeric
# kernel needs none; a loop taken over found the worker's objects this way.
_REACH_EVENTS = ("gc.get_objects", "gc.get_referrers", "gc.get_referents", "sys._current_frames")
_EVENTS = frozenset(
    {"open", "sys._getframe", *_PATH_EVENTS, *_READ_EVENTS, *_SOCKET_EVENTS, *_REACH_EVENTS}
)

# Which modules' attributes a candidate must leave alone, and what replacing one is called.
WATCHED = (
    ("time", "clock_patched"),
    ("numpy", "numpy_patched"),
    ("numpy.linalg", "numpy_patched"),
    ("numpy.random", "numpy_patched"),
    ("builtins", "worker_tampered"),
)


def _snapshot(namespace: Mapping[str, Any], callables_only: bool) -> dict[str, Any]:
    return {
        k: v
        for k, v in namespace.items()
        if not callables_only or callable(v) or isinstance(v, ModuleType)
    }


class Guard:
    """Records (and blocks) reads of protected paths, writes outside the working directory and
    network use; compares watched namespaces with their state before the candidate loaded."""

    def __init__(self, workdir: str, protected: list[tuple[str, str]]) -> None:
        self.workdir = os.path.realpath(workdir)
        self.protected = [(os.path.realpath(p), code) for p, code in protected]
        self.found: list[tuple[str, str]] = []
        self._reported: set[tuple[str, str]] = set()
        self._busy = False
        self._watched: list[tuple[str, str, Mapping[str, Any], dict[str, Any]]] = []
        self.own_files: frozenset[str] = frozenset()  # the worker's source files

    # -- tamper checks ----------------------------------------------------------------------

    def watch(
        self, label: str, code: str, namespace: Mapping[str, Any], callables_only: bool
    ) -> None:
        """Remember `namespace` as it is now; `tampering()` reports what was replaced."""
        self._watched.append((label, code, namespace, _snapshot(namespace, callables_only)))

    def watch_defaults(self) -> None:
        for name, code in WATCHED:
            mod = sys.modules.get(name)
            if mod is not None:
                # `time`: its functions only. `time.tzset()` rebinds tzname, timezone, altzone
                # and daylight, which measure nothing: an honest call was clock_patched.
                self.watch(name, code, vars(mod), callables_only=name == "time")

    def tampering(self) -> list[tuple[str, str]]:
        out = []
        for label, code, namespace, before in self._watched:
            changed = [k for k, v in before.items() if namespace.get(k, _MISSING) is not v]
            if changed:
                shown = ", ".join(f"{label}.{k}" for k in sorted(changed)[:5])
                out.append((code, f"replaced or removed after the candidate loaded: {shown}"))
        return out

    # -- audit hook -------------------------------------------------------------------------

    def install(self) -> None:
        sys.addaudithook(self._hook)

    def _flag(self, code: str, detail: str) -> None:
        self.found.append((code, detail))
        raise PermissionError(f"optarena sandbox: {detail}")

    def _resolve(self, path: Any) -> str | None:
        if isinstance(path, int) or path is None:
            return None
        try:
            p = os.fsdecode(os.fspath(path))
        except TypeError:
            return None
        return os.path.realpath(os.path.join(self.workdir, p) if not os.path.isabs(p) else p)

    def _check_read(self, path: str) -> None:
        for prefix, code in self.protected:
            if path == prefix or path.startswith(prefix + "/"):
                self._flag(code, f"read {path}")

    def _check_write(self, path: str) -> None:
        if path == self.workdir or path.startswith(self.workdir + "/"):
            return
        if path.startswith(_ALLOWED_WRITES) or path.startswith("/proc/self/"):
            return
        self._flag("write_outside_workdir", f"wrote {path} (outside its working directory)")

    def _hook(self, event: str, args: tuple[Any, ...]) -> None:
        if event not in _EVENTS or self._busy:  # cheap for the events nobody watches
            return
        self._busy = True
        try:
            self._dispatch(event, args)
        finally:
            self._busy = False

    def _dispatch(self, event: str, args: tuple[Any, ...]) -> None:
        if event == "open":
            path = self._resolve(args[0])
            if path is not None:
                flags = args[2] if len(args) > 2 and isinstance(args[2], int) else 0
                mode = args[1] if len(args) > 1 and isinstance(args[1], str) else ""
                if flags & _WRITE_FLAGS or any(c in mode for c in "wax+"):
                    self._check_write(path)
                else:
                    self._check_read(path)
        elif event in _READ_EVENTS:
            path = self._resolve(args[_READ_EVENTS[event]])
            if path is not None:
                self._check_read(path)
        elif event in _PATH_EVENTS:
            for i in _PATH_EVENTS[event]:
                path = self._resolve(args[i]) if i < len(args) else None
                if path is not None:
                    self._check_write(path)
        elif event in _SOCKET_EVENTS:
            sock = args[0]
            if getattr(sock, "family", None) in _INET:
                self._flag("network_access", f"{event.split('.')[1]} to {args[-1]!r}")
        elif event in _REACH_EVENTS:
            self._flag("worker_tampered", f"called {event} (reaches the worker's own objects)")
        elif event == "sys._getframe" and args:
            code = getattr(args[0], "f_code", None)
            if getattr(code, "co_filename", None) in self.own_files:
                self._flag("worker_tampered", "took a frame of the worker loop (sys._getframe)")

    # -- reporting --------------------------------------------------------------------------

    def drain(self, full: bool = True) -> list[dict[str, str]]:
        """New findings since the last drain (each distinct one once). `full` also compares
        the watched namespaces: hundreds of entries, too slow for every call, and since the
        judge's clocks, inputs and outputs live outside this process, a replaced name here can
        only hide findings or change what the candidate returns, never make a wrong result
        pass; it is checked at the end of each phase (settle)."""
        out = []
        for code, detail in [*self.found, *(self.tampering() if full else [])]:
            if (code, detail) not in self._reported:
                self._reported.add((code, detail))
                out.append({"code": code, "detail": detail})
        self.found.clear()
        return out


_MISSING = object()


def install(workdir: str, config: dict[str, Any], own: dict[str, Mapping[str, Any]]) -> Guard:
    """Snapshot the watched namespaces (the worker's `own` ones too) and add the audit hook."""
    protected = [(str(p), str(c)) for p, c in config.get("protected", [])]
    # The judge names its own /proc entry, but in a PID namespace the worker cannot see the
    # judge: its parent there is the sandbox's init, a fork of the judge. Any ancestor's
    # /proc entry is the judge side, whatever pid this process sees it under.
    for pid in {os.getppid(), 1} - {0, os.getpid()}:
        protected.append((f"/proc/{pid}", "judge_memory_access"))
    guard = Guard(workdir, protected)
    guard.own_files = frozenset(
        str(ns.get("__file__")) for ns in own.values() if isinstance(ns.get("__file__"), str)
    ) | {__file__}
    guard.watch_defaults()
    for label, namespace in {**own, "guard": globals(), "Guard": vars(Guard)}.items():
        guard.watch(label, "worker_tampered", namespace, callables_only=True)
    guard.install()
    return guard


def error_code(exc: BaseException | None) -> str:
    """The reason code for an exception escaping the candidate: a hit limit gets its name."""
    if isinstance(exc, MemoryError):
        return "memory_limit"
    if isinstance(exc, RuntimeError) and "can't start new thread" in str(exc):
        return "process_limit"
    if isinstance(exc, ValueError) and "read-only" in str(exc):
        # Inputs are read-only views of the judge's sealed memory: writing one is an attempt
        # to modify the caller's input (it only ever rejects, so the candidate gains nothing).
        return "input_mutated"
    if isinstance(exc, OSError):
        if exc.errno == errno.EFBIG:
            return "file_size_limit"
        if exc.errno in (errno.EMFILE, errno.ENFILE):
            return "open_files_limit"
        if exc.errno == errno.EAGAIN:  # fork/clone refused by RLIMIT_NPROC or pids.max
            return "process_limit"
    return "raised"


def lazy_reason(out: Any) -> str | None:
    """Why an output could still be computed or change after return, or None.

    Uses `type()` only: a proxy's own `__class__` or `__getattr__` never runs here.
    """
    t = type(out)
    if issubclass(t, np.ndarray) and t is not np.ndarray:
        return f"an ndarray subclass ({t.__module__}.{t.__qualname__})"
    if not issubclass(t, np.ndarray):
        hooks = [
            h
            for h in ("__array__", "__array_interface__", "__array_function__")
            if any(h in vars(k) for k in t.__mro__ if k is not object)
        ]
        if hooks:
            return f"an array-like proxy ({t.__module__}.{t.__qualname__} defines {hooks[0]})"
        return None
    base, depth = out.base, 0
    while base is not None and depth < 32:
        if isinstance(base, mmap.mmap) or type(base) is np.memmap:
            return "an ndarray backed by a memory map (its bytes can change after return)"
        if type(base) is memoryview:
            base = base.obj
        elif isinstance(base, np.ndarray):
            base = base.base
        else:
            base = None
        depth += 1
    return None
