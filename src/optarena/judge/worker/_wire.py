"""The judge <-> worker wire format: length-prefixed JSON plus raw array bytes.

Deliberately no pickle: what crosses from the candidate's process is plain data that the judge
parses, never objects it would execute. This module imports only the standard library and NumPy
because the worker loads it by path, before any candidate code, without importing optarena.

Frame: b"OAW1", u32 header length, u32 array count, JSON header, then each array's raw bytes
(C order). Arrays inside the JSON are {"__nd__": index, "dtype": str, "shape": [..]}.
"""

from __future__ import annotations

import json
import os
import select
import struct
import time
from typing import Any

import numpy as np

MAGIC = b"OAW1"
_PREFIX = struct.Struct("!4sII")
MAX_HEADER = 16 * 1024 * 1024
MAX_ARRAY_BYTES = 4 * 1024 * 1024 * 1024
_NUMERIC_KINDS = set("biufc")


class WireError(Exception):
    """The peer sent something that is not a valid frame."""


class WireTimeout(WireError):
    """No complete frame arrived before the deadline."""


class WireClosed(WireError):
    """The peer closed its end (for a worker: it exited or crashed)."""


def _flatten(obj: Any, arrays: list[np.ndarray]) -> Any:
    if isinstance(obj, np.ndarray):
        arr = np.ascontiguousarray(obj)
        arrays.append(arr)
        return {"__nd__": len(arrays) - 1, "dtype": arr.dtype.str, "shape": list(arr.shape)}
    if isinstance(obj, dict):
        return {str(k): _flatten(v, arrays) for k, v in obj.items()}
    if isinstance(obj, list | tuple):
        return [_flatten(v, arrays) for v in obj]
    if isinstance(obj, np.generic):
        return obj.item()
    return obj


def send(fd: int, obj: Any) -> None:
    arrays: list[np.ndarray] = []
    header = json.dumps(_flatten(obj, arrays)).encode()
    _write_all(fd, _PREFIX.pack(MAGIC, len(header), len(arrays)) + header)
    for arr in arrays:
        if arr.nbytes:
            _write_all(fd, memoryview(arr).cast("B"))  # type: ignore[arg-type]


def _write_all(fd: int, data: bytes | memoryview) -> None:
    view = memoryview(data)
    while view:
        n = os.write(fd, view)
        view = view[n:]


def _read_into(fd: int, buf: memoryview, deadline: float | None) -> None:
    while buf:
        if deadline is not None:
            left = deadline - time.monotonic()
            if left <= 0:
                raise WireTimeout("timed out waiting for the peer")
            ready, _, _ = select.select([fd], [], [], left)
            if not ready:
                raise WireTimeout("timed out waiting for the peer")
        n = os.readv(fd, [buf])
        if n == 0:
            raise WireClosed("the peer closed the pipe")
        buf = buf[n:]


def _checked_dtype(spec: Any) -> np.dtype[Any]:
    if not isinstance(spec, str):
        raise WireError(f"array dtype must be a string, got {type(spec).__name__}")
    try:
        dt = np.dtype(spec)
    except TypeError as e:
        raise WireError(f"bad dtype {spec!r}") from e
    if dt.kind not in _NUMERIC_KINDS or dt.hasobject or dt.fields is not None:
        raise WireError(f"dtype {spec!r} is not a plain numeric or boolean dtype")
    return dt


def recv(fd: int, timeout: float | None = None) -> Any:
    deadline = None if timeout is None else time.monotonic() + timeout
    prefix = bytearray(_PREFIX.size)
    _read_into(fd, memoryview(prefix), deadline)
    magic, hlen, count = _PREFIX.unpack(prefix)
    if magic != MAGIC or hlen > MAX_HEADER or count > 4096:
        raise WireError("malformed frame prefix")
    header_buf = bytearray(hlen)
    _read_into(fd, memoryview(header_buf), deadline)
    try:
        header = json.loads(header_buf)
    except ValueError as e:
        raise WireError("frame header is not JSON") from e
    specs: list[dict[str, Any]] = []
    _collect(header, specs)
    if len(specs) != count:
        raise WireError("array count does not match the header")
    arrays: list[np.ndarray] = []
    total = 0
    for spec in sorted(specs, key=lambda s: s["__nd__"]):
        dt = _checked_dtype(spec.get("dtype"))
        shape = spec.get("shape")
        if not isinstance(shape, list) or not all(isinstance(s, int) and s >= 0 for s in shape):
            raise WireError("array shape must be a list of non-negative integers")
        arr = np.empty(shape, dtype=dt)
        total += arr.nbytes
        if total > MAX_ARRAY_BYTES:
            raise WireError("frame too large")
        if arr.nbytes:
            _read_into(fd, memoryview(arr).cast("B"), deadline)  # type: ignore[arg-type]
        arrays.append(arr)
    return _rebuild(header, arrays)


def _collect(obj: Any, out: list[dict[str, Any]]) -> None:
    if isinstance(obj, dict):
        if "__nd__" in obj:
            if not isinstance(obj["__nd__"], int) or obj["__nd__"] != len(out):
                raise WireError("array references out of order")
            out.append(obj)
            return
        for v in obj.values():
            _collect(v, out)
    elif isinstance(obj, list):
        for v in obj:
            _collect(v, out)


def _rebuild(obj: Any, arrays: list[np.ndarray]) -> Any:
    if isinstance(obj, dict):
        if "__nd__" in obj:
            return arrays[obj["__nd__"]]
        return {k: _rebuild(v, arrays) for k, v in obj.items()}
    if isinstance(obj, list):
        return [_rebuild(v, arrays) for v in obj]
    return obj
