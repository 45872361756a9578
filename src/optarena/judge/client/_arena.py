"""Shared memory between the judge and one worker: sealed read-only inputs, an output area.

Why shared memory, and why sealed:

- **Inputs** are written by the judge into a memfd right before the call that uses them (the
  worker is frozen while that happens), so no call's input exists in the candidate's process
  before the previous call returned. The memfd is sealed with `F_SEAL_FUTURE_WRITE` after the
  judge mapped it writable: the worker, whatever uid it runs as, can only map it read-only
  (a writable shared mapping, `write()`, truncation are refused by the kernel), so the inputs
  the candidate sees are exactly the judge's bytes, and the judge checks after every call, on
  its own mapping, that they still are. Arrays keep their memory layout (strides, offset, a
  view into a larger buffer): a candidate correct only for C-contiguous inputs is caught.
- **The output** is copied by the worker loop into a second memfd at return; the judge freezes
  the worker and copies it out, so what is judged is the output as it was when the call ended,
  never a buffer the candidate fills in later.
"""

from __future__ import annotations

import contextlib
import ctypes
import fcntl
import math
import mmap
import os
import warnings
from dataclasses import dataclass
from typing import Any, NamedTuple

import numpy as np
from numpy.lib.array_utils import byte_bounds

from optarena.judge.worker._wire import shape_fits

F_SEAL_FUTURE_WRITE = 0x0010  # Linux 5.1; not exported by Python's fcntl module
_ALIGN = 64  # every array's span starts on a cache line, like a fresh allocation
_NUMERIC = set("biufc")


def _plain_dtype(spec: Any) -> np.dtype[Any] | None:
    """A plain numeric dtype from the worker's string, or None for anything else."""
    if not isinstance(spec, str) or len(spec) > 16:
        return None
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("error")  # a deprecated spelling is not a plain dtype either
            dt = np.dtype(spec)
    except Exception:  # numpy parses dtype strings with several parsers; any failure is a no
        return None
    if dt.kind not in _NUMERIC or dt.hasobject or dt.fields is not None or dt.subdtype:
        return None
    return dt


class ArenaFull(Exception):
    """A call's inputs do not fit the arena (the judge sized it wrong: a bug, not a finding)."""


def _round_up(n: int) -> int:
    return (n + _ALIGN - 1) // _ALIGN * _ALIGN


def span_bytes(arr: np.ndarray) -> int:
    """Bytes of memory an array's elements spread over (its layout kept)."""
    if arr.size == 0:
        return 0
    lo, hi = byte_bounds(arr)
    return int(hi - lo)


def arena_bytes(calls: list[list[np.ndarray]]) -> int:
    """The input area that holds any one of these calls' arrays, layouts kept."""
    need = max((sum(_round_up(span_bytes(a)) for a in arrays) for arrays in calls), default=0)
    return max(need, _ALIGN)


_libc = ctypes.CDLL(None)
_libc.memcmp.argtypes = [ctypes.c_void_p, ctypes.c_void_p, ctypes.c_size_t]
_libc.memcmp.restype = ctypes.c_int


def _memcmp(a: int, b: int, n: int) -> int:
    """Compare in place: copying both sides to bytes first (what `!=` on slices does) moved
    four times the input's size through the cache between two timed calls, and the next call
    ran that much colder."""
    return int(_libc.memcmp(a, b, n))


class _Memfd:
    def __init__(self, name: str, size: int) -> None:
        self.size = max(int(size), mmap.PAGESIZE)
        self.fd = os.memfd_create(name, os.MFD_CLOEXEC | os.MFD_ALLOW_SEALING)
        os.ftruncate(self.fd, self.size)
        self.map = mmap.mmap(self.fd, self.size, mmap.MAP_SHARED, mmap.PROT_READ | mmap.PROT_WRITE)
        self.view = np.frombuffer(self.map, dtype=np.uint8)

    def close(self) -> None:
        """Idempotent. A second `os.close` of the number would close whatever the process
        opened under it since (another worker's pipe or uid-lease lock, the ledger's file)."""
        self.view = np.zeros(0, dtype=np.uint8)
        with contextlib.suppress(BufferError, ValueError):
            self.map.close()
        if self.fd >= 0:
            with contextlib.suppress(OSError):
                os.close(self.fd)
            self.fd = -1


class Copy(NamedTuple):
    """One array of a call: its index among the call's arrays, where its span goes in the
    input area, where that span is in the judge's memory, and its length."""

    which: int  # the array's place among the call's arrays (what `changed` names)
    offset: int
    source: int
    nbytes: int


@dataclass
class Placed:
    """Where one call's arrays are in the input area, and their bytes in the judge's memory:
    a copy per array that has any (what `write` writes and `changed` compares)."""

    copies: list[Copy]


class InputArena(_Memfd):
    """Inputs of one call at a time; the worker's mapping is read-only (sealed)."""

    def __init__(self, size: int) -> None:
        super().__init__("optarena-inputs", size)
        seals = fcntl.F_SEAL_SHRINK | fcntl.F_SEAL_GROW | F_SEAL_FUTURE_WRITE | fcntl.F_SEAL_SEAL
        fcntl.fcntl(self.fd, fcntl.F_ADD_SEALS, seals)

    def worker_fd(self) -> int:
        """A read-only descriptor for the worker (the seals forbid writing through any)."""
        fd = os.open(f"/proc/self/fd/{self.fd}", os.O_RDONLY | os.O_CLOEXEC)
        return fd

    def place(
        self, args: list[Any], kwargs: dict[str, Any], write: bool = True
    ) -> tuple[Any, Any, Placed]:
        """Write a call's arrays into the area; returns args/kwargs with arrays replaced by
        descriptors the worker turns into read-only views of the same layout. `write=False`:
        only where they would go (the layout depends on shapes and strides, not values)."""
        copies: list[Copy] = []
        count = pos = 0

        def put(a: Any) -> Any:
            nonlocal count, pos
            if not isinstance(a, np.ndarray):
                return a
            if a.dtype.kind not in _NUMERIC or a.dtype.hasobject:
                raise ValueError(f"inputs must be numeric arrays, got dtype {a.dtype}")
            n = span_bytes(a)
            if pos + n > self.size:
                raise ArenaFull(f"inputs need more than the {self.size} bytes of the input area")
            first = 0
            if n:
                lo, _ = byte_bounds(a)
                copies.append(Copy(count, pos, int(lo), n))
                first = a.__array_interface__["data"][0] - lo
            desc = {
                "__shm__": count,
                "offset": pos + first,
                "shape": list(a.shape),
                "strides": list(a.strides),
                "dtype": a.dtype.str,
            }
            count += 1
            pos = _round_up(pos + n)
            return desc

        new_args = [put(a) for a in args]
        new_kwargs = {k: put(v) for k, v in kwargs.items()}
        if write:
            self.write(copies)
        return new_args, new_kwargs, Placed(copies)

    def copies(self, args: list[Any], kwargs: dict[str, Any]) -> list[Copy]:
        """A call's arrays as `write` and `changed` take them, worked out before a run, so
        that the judge's turn between two timed calls runs one C call per array for each and
        little Python. That turn runs on the worker's CPU while the worker waits, and the next
        call pays for what it took of the caches (`_calls`)."""
        return self.place(args, kwargs, write=False)[2].copies

    def write(self, copies: list[Copy]) -> None:
        """Write a call's arrays into the area (their sources must still be alive: the caller
        holds the arrays the copies were made from)."""
        if self.fd < 0:
            raise ValueError("the input area is closed")
        base = self.view.ctypes.data
        for c in copies:
            ctypes.memmove(base + c.offset, c.source, c.nbytes)

    def changed(self, copies: list[Copy]) -> int | None:
        """None if every array's bytes in the area are still the judge's; else the index of
        the first that changed (only the kernel's seals stand between them, so this is a check
        that they held)."""
        if self.fd < 0:
            raise ValueError("the input area is closed")
        base = self.view.ctypes.data
        for c in copies:
            if _memcmp(base + c.offset, c.source, c.nbytes) != 0:
                return c.which
        return None


class OutputArena(_Memfd):
    """Where the worker loop copies each call's output at return; the judge reads it frozen."""

    def __init__(self, size: int) -> None:
        super().__init__("optarena-output", size)

    def read(self, desc: Any) -> np.ndarray | None:
        """The output the worker says it copied, as the judge's own array (None: malformed)."""
        if not isinstance(desc, dict):
            return None
        shape, nbytes = desc.get("shape"), desc.get("nbytes")
        dt = _plain_dtype(desc.get("dtype"))
        if dt is None or not isinstance(shape, list) or not shape_fits(shape, dt.itemsize):
            return None
        count = math.prod(shape)
        if type(nbytes) is not int or nbytes != count * dt.itemsize or nbytes > self.size:
            return None
        return self.view[:nbytes].copy().view(dt).reshape(shape)
