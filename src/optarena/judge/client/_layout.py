"""The timed path's pieces that need no worker: call layouts, runs of equal layouts, where a
worker mapped its inputs, and room in a pipe (see `WorkerClient.run_calls`, `worker/_run`).

A call's *layout* is what `bind` fixes once: where its arrays lie in the input area, and the
place and kind of every numeric scalar, whose values travel in each go frame. Calls with equal
layouts run as one run; a change of layout is bound again.
"""

from __future__ import annotations

import fcntl
import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
from numpy.lib.array_utils import byte_bounds

from optarena.judge.worker import _run as run
from optarena.judge.worker import _wire as wire


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
    return int(a.__array_interface__["data"][0] - byte_bounds(a)[0])


def segments(layouts: Sequence[CallLayout]) -> list[tuple[int, int]]:
    """[start, end) runs of calls with the same layout."""
    out: list[tuple[int, int]] = []
    for i, layout in enumerate(layouts):
        if out and layouts[out[-1][0]] == layout:
            out[-1] = (out[-1][0], i + 1)
        else:
            out.append((i, i + 1))
    return out


def input_mappings(pid: int) -> list[tuple[int, int]]:
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


def grow_pipe(fd: int, size: int) -> None:
    """Room for `size` bytes in a pipe, so that a worker's write of an output frame does not
    wait for the judge (each wait is two context switches on the shared CPU, timed)."""
    f_setpipe_sz = 1031
    for want in (size, 1 << 20):
        try:
            fcntl.fcntl(fd, f_setpipe_sz, max(want, 1 << 16))
            return
        except OSError:
            continue


@dataclass(frozen=True)
class OutHeader:
    """An output frame's fixed header, checked (see `worker/_run`)."""

    nbytes: int
    address: int
    status: int
    ndim: int
    aliases: bool
    dtype: str

    @property
    def in_memory(self) -> bool:
        return self.status == run.STATUS_IN_MEMORY

    @property
    def end(self) -> int:
        return self.address + self.nbytes


def read_out_header(raw: bytes | bytearray, index: int, reads_memory: bool) -> OutHeader:
    """The header of call `index`'s output frame, or WireError: the magic, the call it
    answers, the number of dimensions and the kind (in memory exactly when the judge said it
    reads memory; a wire frame for a failed call either way) are the candidate's to forge."""
    magic, idx, nbytes, address, status, ndim, flags, dt = run.OUT.unpack(raw)
    if magic != run.OUT_MAGIC or idx != index or ndim > run.MAX_NDIM or status > 2:
        raise wire.WireError("malformed output frame header")
    if status != run.STATUS_FRAME and (status == run.STATUS_IN_MEMORY) != reads_memory:
        raise wire.WireError("an output frame of the wrong kind")
    text = dt.rstrip(b"\0").decode("ascii", "replace")
    return OutHeader(nbytes, address, status, ndim, bool(flags & run.FLAG_ALIASES), text)


def output_dtype(header: OutHeader, shape: tuple[int, ...]) -> np.dtype[Any]:
    """The output's dtype, from the fixed table of plain numeric dtypes, its size checked
    against the shape (WireError: they disagree, or the dtype is not a plain one)."""
    dtype = wire._DTYPES.get(header.dtype)
    fits = dtype is not None and wire.shape_fits(list(shape), dtype.itemsize)
    if dtype is None or not fits or header.nbytes != math.prod(shape) * dtype.itemsize:
        raise wire.WireError("output frame: shape, dtype and size disagree")
    return dtype
