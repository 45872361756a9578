"""Reading a worker's output array by reference: the worker names the object (`id(out)`), the
judge reads its fields, its dimensions and its bytes out of the worker's memory.

Why the judge and not the worker: whatever the worker does per timed call to describe its
output is timed in the baseline's arm and in the null arm, and a candidate that takes the
worker's loop over can skip it, a saving the null arm's subtraction then credits to the
candidate (see `worker/_run`). Reading the object costs the worker nothing.

What the judge trusts here is the layout, learnt before any candidate code existed: the
hello probe names an array object, its data and its type's address, and `ObjectReader.probe`
reads the object back and checks every field it will rely on. What it reads per call is the
candidate's to forge (the object lies in its memory), and forging gains nothing: the bytes
the fields point to are what the judge judges, read while the worker waits.

The fields, after the object head (`ob_refcnt`, `ob_type`; its size is this interpreter's):
NumPy's `PyArrayObject_fields` (data, nd, dimensions, strides, base, descr, flags) and
`PyArray_Descr` (typeobj, kind, type, byteorder), both unchanged from NumPy 1.7 to 2.x.
"""

from __future__ import annotations

import ctypes
import math
import struct
import sys
from typing import Any, NamedTuple

import numpy as np

from optarena.judge.worker import _run as run
from optarena.judge.worker import _wire as wire
from optarena.sandbox import process_vm_read

_HEAD = object.__basicsize__  # ob_refcnt and ob_type (more in a free-threaded build)
# ob_type, data, nd, dimensions, (strides, base), descr, flags
_ARRAY = struct.Struct(f"<{_HEAD - 8}xQQi4xQ16xQi")
# (typeobj), kind, type, byteorder
_DESCR = struct.Struct(f"<{_HEAD + 8}xccc")
_C_CONTIGUOUS = 0x1  # NPY_ARRAY_C_CONTIGUOUS


def _plain_by_char() -> dict[tuple[bytes, bytes], np.dtype[Any]]:
    """(type character, byte order) -> dtype, for the plain dtypes outputs may have."""
    native = b"<" if sys.byteorder == "little" else b">"
    found: dict[tuple[bytes, bytes], np.dtype[Any]] = {}
    for char in np.typecodes["All"]:
        try:
            dt = np.dtype(char)
        except TypeError:
            continue
        if dt.str not in wire._DTYPES or dt.itemsize == 0:
            continue
        for d in (dt, dt.newbyteorder()):
            order = d.byteorder.encode()
            found[(char.encode(), order)] = d
            if order in (b"=", native):  # NumPy writes '=' for native; '<' or '>' is the same
                found[(char.encode(), b"=")] = found[(char.encode(), native)] = d
    return found


_PLAIN = _plain_by_char()


class ArrayRef(NamedTuple):
    """An output as its object says it is: where its bytes are, its shape and dtype."""

    address: int
    shape: tuple[int, ...]
    dtype: np.dtype[Any]
    nbytes: int

    @property
    def end(self) -> int:
        return self.address + self.nbytes


class ObjectReader:
    """Reads ndarray objects out of one worker's memory (see the module docstring)."""

    def __init__(self, pid: int, ndarray_type: int) -> None:
        self.pid = pid
        self.ndarray_type = ndarray_type
        self._buf = ctypes.create_string_buffer(max(_ARRAY.size, 8 * run.MAX_NDIM, _DESCR.size))
        self._at = ctypes.addressof(self._buf)

    @classmethod
    def probe(cls, pid: int, probe: dict[str, Any]) -> ObjectReader | None:
        """A reader, where the hello probe's array reads back as the probe says it is (its
        type, data, one dimension of its length, uint8, contiguous); else None."""
        obj, typ, address = probe.get("object"), probe.get("ndarray"), probe.get("address")
        hexed = probe.get("hex")
        if type(obj) is not int or type(typ) is not int or type(address) is not int:
            return None
        if not isinstance(hexed, str):
            return None
        reader = cls(pid, typ)
        try:
            got = reader.read(obj)
        except wire.WireError:
            return None
        size = len(hexed) // 2
        return reader if got == ArrayRef(address, (size,), np.dtype(np.uint8), size) else None

    def _read(self, address: int, nbytes: int) -> None:
        try:
            process_vm_read(self.pid, address, self._at, nbytes)
        except OSError as e:
            raise wire.WireError(f"the output object at {address:#x} cannot be read: {e}") from None

    def read(self, address: int) -> ArrayRef | None:
        """The array at `address`; None where it is one the judge must ask about (a dtype
        outside the plain ones, not C-contiguous, too many dimensions); WireError where no
        ndarray can be read there."""
        self._read(address, _ARRAY.size)
        typ, data, nd, dims, descr, flags = _ARRAY.unpack_from(self._buf)
        if typ != self.ndarray_type or nd < 0:
            raise wire.WireError(f"the output reference {address:#x} names no ndarray")
        if nd > run.MAX_NDIM or not flags & _C_CONTIGUOUS:
            return None
        self._read(descr, _DESCR.size)
        _, char, order = _DESCR.unpack_from(self._buf)
        dtype = _PLAIN.get((char, order))
        if dtype is None:
            return None
        shape: tuple[int, ...] = ()
        if nd:
            self._read(dims, 8 * nd)
            shape = run.SHAPES[nd].unpack_from(self._buf)
        if not wire.shape_fits(shape, dtype.itemsize):
            raise wire.WireError(f"the output object's shape {shape!r:.120} is no array's")
        return ArrayRef(data, shape, dtype, math.prod(shape) * dtype.itemsize)
