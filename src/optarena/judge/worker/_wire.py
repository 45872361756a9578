"""The judge <-> worker wire format: length-prefixed JSON plus raw array bytes.

Deliberately no pickle: what crosses from the candidate's process is plain data that the judge
parses, never objects it would execute. This module imports only the standard library and NumPy
because the worker loads it by path, before any candidate code, without importing optarena.

Frame: b"OAW1", u32 header length, u32 array count, JSON header (a UTF-8 object), then each
array's raw bytes (C order). Arrays inside the JSON are {"__nd__": index, "dtype": str, "shape":
[..]}, numbered in depth-first order.

The candidate runs in the worker and can write any bytes to the reply pipe, so `recv` treats a
frame as hostile: every malformed input ends in `WireError` (never another exception), within
the deadline, and with memory bounded by the limits below, each checked before the thing it
bounds is allocated: the header length before the header is read, the header's nesting depth
and size before it is parsed, each array's byte size (arithmetically) before `np.empty`.
"""

from __future__ import annotations

import json
import math
import os
import select
import struct
import time
from typing import Any

import numpy as np

MAGIC = b"OAW1"
_PREFIX = struct.Struct("!4sII")

# Headers carry requests, replies and array descriptions (array bytes travel after them), a few
# KiB in practice; the limit is the most the judge reads into memory before parsing anything.
MAX_HEADER = 4 * 1024 * 1024
# Bytes of all arrays of one frame: beyond any input or output a task's worker may hold.
MAX_ARRAY_BYTES = 4 * 1024 * 1024 * 1024
# Arrays per frame: requests carry a handful, a batch of calls some hundreds.
MAX_ARRAYS = 4096
# Nesting of the header's JSON: real messages nest 5 deep; the C parser recurses per level and
# would raise RecursionError (or exhaust the stack) on a header that is only brackets.
MAX_DEPTH = 64
# JSON values in a header: bounds the Python objects that parsing creates (a small JSON text can
# build ~20 times its size in objects: `[[],[],...]`), counted before parsing.
MAX_VALUES = 1 << 20
# Dimensions of one array (NumPy 2 allows 64; no task has more than a few).
MAX_NDIM = 32
# Integers in a header fit int64, like every count, id, seed and time the protocol carries:
# larger ones (`10**400`) turn into OverflowError wherever they meet a float or a C integer.
MAX_INT_DIGITS = 20
INT_MIN, INT_MAX = -(2**63), 2**63 - 1

_NUMERIC_KINDS = set("biufc")
_QUOTE, _BACKSLASH = ord('"'), ord("\\")


def _plain_dtypes() -> dict[str, np.dtype[Any]]:
    """Every plain numeric or boolean dtype by its `.str`, in both byte orders.

    `recv` looks the peer's dtype string up here and never hands it to `np.dtype`, whose parser
    accepts a small language (comma strings, subarray tuples, field dicts) and answers some
    inputs with SyntaxError, ValueError or deprecation warnings."""
    found: dict[str, np.dtype[Any]] = {}
    for scalar_type in set(np.sctypeDict.values()):
        dt = np.dtype(scalar_type)
        if dt.kind in _NUMERIC_KINDS and not dt.hasobject and dt.fields is None:
            for d in (dt, dt.newbyteorder()):
                found[d.str] = d
    return found


_DTYPES = _plain_dtypes()


class WireError(Exception):
    """The peer sent something that is not a valid frame."""


class WireTimeout(WireError):
    """No complete frame arrived before the deadline."""


class WireClosed(WireError):
    """The peer closed its end (for a worker: it exited or crashed)."""


def _flatten(obj: Any, arrays: list[np.ndarray]) -> Any:
    if isinstance(obj, np.ndarray):
        arr = obj if obj.flags.c_contiguous else obj.copy(order="C")  # keeps 0-d arrays 0-d
        arrays.append(arr)
        return {"__nd__": len(arrays) - 1, "dtype": arr.dtype.str, "shape": list(arr.shape)}
    if isinstance(obj, dict):
        return {str(k): _flatten(v, arrays) for k, v in obj.items()}
    if isinstance(obj, list | tuple):
        return [_flatten(v, arrays) for v in obj]
    if isinstance(obj, np.generic):
        return obj.item()
    return obj


def send(fd: int, obj: Any, deadline: float | None = None) -> None:
    """Write `obj` (a dict of plain data and arrays) as one frame, by `deadline` (monotonic)
    where one is given (see `_write_all`).

    NaN and infinities are refused here (ValueError) because `recv` refuses them: a sender's
    mistake shows at the sender, not as a protocol violation blamed on the peer."""
    arrays: list[np.ndarray] = []
    header = json.dumps(_flatten(obj, arrays), allow_nan=False).encode()
    _write_all(fd, _PREFIX.pack(MAGIC, len(header), len(arrays)) + header, deadline)
    for arr in arrays:
        if arr.nbytes:
            _write_all(fd, _bytes_of(arr).data, deadline)


def _bytes_of(arr: np.ndarray) -> np.ndarray:
    """A C-contiguous array's bytes as uint8: unlike `memoryview(arr)`, their buffer works for
    every dtype (the buffer protocol refuses e.g. a non-native long double, '>f16')."""
    return arr.reshape(-1).view(np.uint8)


def _write_all(fd: int, data: bytes | memoryview, deadline: float | None = None) -> None:
    """Write all of `data`. On a non-blocking descriptor (the judge's end of the request pipe)
    a full pipe is waited on in poll, until `deadline`: a reader that never drains the pipe (a
    worker that shrank it and always leaves a byte in it) times the write out instead of holding
    the writer for ever."""
    view = memoryview(data)
    poller = None
    while view:
        try:
            n = os.write(fd, view)
        except BlockingIOError:
            n = 0
        view = view[n:]
        if not view:
            return
        if poller is None:
            poller = select.poll()
            poller.register(fd, select.POLLOUT)
        if deadline is None:
            poller.poll()
            continue
        left = deadline - time.monotonic()
        if left <= 0 or not poller.poll(math.ceil(left * 1000)):
            raise WireTimeout("timed out writing to the peer")


def _read_into(fd: int, buf: memoryview, deadline: float | None) -> None:
    """Fill `buf` from `fd`; poll, not select: select fails on descriptors above 1023."""
    poller = select.poll()
    poller.register(fd, select.POLLIN)
    while buf:
        if deadline is not None:
            left = deadline - time.monotonic()
            if left <= 0 or not poller.poll(math.ceil(left * 1000)):
                raise WireTimeout("timed out waiting for the peer")
        n = os.readv(fd, [buf])
        if n == 0:
            raise WireClosed("the peer closed the pipe")
        buf = buf[n:]


def recv(
    fd: int,
    timeout: float | None = None,
    *,
    max_bytes: int = MAX_ARRAY_BYTES,
    from_judge: bool = False,
    prefix: bytes = b"",
) -> Any:
    """Read one frame; raise only `WireError` (`WireTimeout`, `WireClosed`) for a bad one.

    `timeout` bounds the whole frame (None: wait forever, for the worker's side); `max_bytes`
    the total size of its arrays. `from_judge` is the worker reading the judge's requests: only
    the judge holds the write end of that pipe, so the frame is parsed as plain JSON, without
    the hostile-input checks (they cost the worker ~100 us per request, CPU that the judge
    counts against every timed call and that would dilute every ratio). `prefix`: the frame's
    first bytes, already read by the caller (the worker peeks at four to tell a go frame)."""
    deadline = None if timeout is None else time.monotonic() + timeout
    head = bytearray(_PREFIX.size)
    head[: len(prefix)] = prefix
    _read_into(fd, memoryview(head)[len(prefix) :], deadline)
    magic, hlen, count = _PREFIX.unpack(head)
    if magic != MAGIC:
        raise WireError("malformed frame prefix (bad magic)")
    if hlen > MAX_HEADER:
        raise WireError(f"frame header of {hlen} bytes exceeds {MAX_HEADER}")
    if count > MAX_ARRAYS:
        raise WireError(f"frame announces {count} arrays, more than {MAX_ARRAYS}")
    raw = bytearray(hlen)
    _read_into(fd, memoryview(raw), deadline)
    if from_judge and count == 0:
        header = json.loads(raw)
        if not isinstance(header, dict):
            raise WireError("frame header must be a JSON object")
        return header
    header = parse_header(bytes(raw))
    specs = _array_specs(header)
    if len(specs) != count:
        raise WireError(f"the prefix announces {count} arrays, the header describes {len(specs)}")
    plans = _plan_arrays(specs, max_bytes)
    arrays: list[np.ndarray] = []
    for shape, dt, nbytes in plans:
        try:
            arr = np.empty(shape, dtype=dt)
        except (ValueError, MemoryError) as e:  # sizes are checked above; belt and braces
            raise WireError(f"cannot allocate an array of {nbytes} bytes: {e}") from None
        if nbytes:
            _read_into(fd, _bytes_of(arr).data, deadline)
        arrays.append(arr)
    return _rebuild(header, arrays)


def parse_header(raw: bytes) -> dict[str, Any]:
    """The frame header as a dict of plain JSON data, or WireError.

    Strict UTF-8 (no other encoding `json` would sniff), depth and value count checked on the
    raw text before parsing, no NaN/Infinity, integers within int64, floats finite, no duplicate
    keys, no lone surrogates (they would fail later, when a verdict quoting them is written)."""
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as e:
        raise WireError(f"frame header is not UTF-8: {e}") from None
    depth, values = json_structure(raw)
    if depth > MAX_DEPTH:
        raise WireError(f"frame header nests {depth} deep, more than {MAX_DEPTH}")
    if values > MAX_VALUES:
        raise WireError(f"frame header holds about {values} values, more than {MAX_VALUES}")
    try:
        header = _DECODER.decode(text)
    except (ValueError, RecursionError) as e:  # JSONDecodeError is a ValueError
        raise WireError(f"frame header is not JSON: {e}") from None
    if not isinstance(header, dict):
        raise WireError(f"frame header must be a JSON object, not {type(header).__name__}")
    _check_strings(header)
    return header


def json_structure(raw: bytes) -> tuple[int, int]:
    """(deepest nesting, upper bound on the number of values) of a JSON text, without parsing.

    Vectorised over the bytes so that neither recursion nor a Python loop per character is
    involved: brackets and separators count only outside strings, and a string ends at a quote
    preceded by an even run of backslashes. Exact for valid JSON; for invalid JSON any answer
    is fine, because the parser rejects it afterwards. UTF-8 continuation bytes are never ASCII,
    so scanning bytes is scanning characters."""
    b = np.frombuffer(raw, np.uint8)
    if b.size == 0:
        return 0, 0
    quotes = np.flatnonzero(b == _QUOTE)
    if quotes.size:
        backslash = b == _BACKSLASH
        index = np.arange(b.size, dtype=np.int32)  # MAX_HEADER < 2**31
        last_plain = np.maximum.accumulate(np.where(backslash, -1, index))
        before = quotes - 1
        run = np.where(before >= 0, before - last_plain[np.maximum(before, 0)], 0)
        real = np.zeros(b.size, dtype=bool)
        real[quotes[run % 2 == 0]] = True
        outside = ~np.logical_xor.accumulate(real)  # True outside strings (and at closing quotes)
    else:
        outside = np.ones(b.size, dtype=bool)
    opens = ((b == ord("[")) | (b == ord("{"))) & outside
    closes = ((b == ord("]")) | (b == ord("}"))) & outside
    brackets = np.flatnonzero(opens | closes)
    depth = 0
    if brackets.size:
        depth = int(np.cumsum(np.where(opens[brackets], 1, -1)).max())
    separators = (b == ord(",")) | (b == ord(":"))
    values = int(np.count_nonzero(separators & outside) + np.count_nonzero(opens)) + 1
    return max(depth, 0), values


def _parse_int(s: str) -> int:
    if len(s.lstrip("-")) > MAX_INT_DIGITS:
        raise WireError(f"integer with {len(s)} digits in the frame header")
    v = int(s)
    if not INT_MIN <= v <= INT_MAX:
        raise WireError(f"integer {v} in the frame header is outside int64")
    return v


def _parse_float(s: str) -> float:
    v = float(s)
    if not math.isfinite(v):
        raise WireError(f"number {s[:40]!r} in the frame header is not a finite float")
    return v


def _parse_constant(s: str) -> Any:
    raise WireError(f"{s} in the frame header (JSON has no NaN or Infinity)")


def _unique_keys(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    out = dict(pairs)
    if len(out) != len(pairs):
        raise WireError("duplicate key in a frame header object")
    return out


_DECODER = json.JSONDecoder(
    object_pairs_hook=_unique_keys,
    parse_int=_parse_int,
    parse_float=_parse_float,
    parse_constant=_parse_constant,
)


def _check_strings(header: dict[str, Any]) -> None:
    """Lone surrogates (from `\\ud800` escapes) are valid JSON but not encodable text."""
    stack: list[Any] = [header]
    while stack:
        obj = stack.pop()
        if isinstance(obj, dict):
            stack.extend(obj.keys())
            stack.extend(obj.values())
        elif isinstance(obj, list):
            stack.extend(obj)
        elif isinstance(obj, str) and not obj.isascii():
            try:
                obj.encode("utf-8")
            except UnicodeEncodeError:
                raise WireError("lone surrogate in a frame header string") from None


_SPEC_KEYS = {"__nd__", "dtype", "shape"}


def _array_specs(header: dict[str, Any]) -> list[dict[str, Any]]:
    """The array descriptions in depth-first order (the order `send` numbered them in).

    Iterative, so that it does not depend on the depth check having run first."""
    specs: list[dict[str, Any]] = []
    stack: list[Any] = [header]
    while stack:
        obj = stack.pop()
        if isinstance(obj, dict):
            if "__nd__" in obj:
                index = obj["__nd__"]
                if type(index) is not int or index != len(specs) or set(obj) != _SPEC_KEYS:
                    raise WireError(f"bad or out-of-order array reference {obj!r:.120}")
                specs.append(obj)
            else:
                stack.extend(reversed(obj.values()))
        elif isinstance(obj, list):
            stack.extend(reversed(obj))
    return specs


def _plan_arrays(
    specs: list[dict[str, Any]], max_bytes: int
) -> list[tuple[tuple[int, ...], np.dtype[Any], int]]:
    """(shape, dtype, byte size) per array, all sizes checked before anything is allocated."""
    plans = []
    total = 0
    for spec in specs:
        dt = _DTYPES.get(spec["dtype"]) if isinstance(spec["dtype"], str) else None
        if dt is None:
            raise WireError(f"dtype {spec['dtype']!r:.60} is not a plain numeric or boolean dtype")
        shape = spec["shape"]
        if not isinstance(shape, list) or not shape_fits(shape, dt.itemsize):
            raise WireError(f"array shape {shape!r:.120} is not a list of sizes")
        nbytes = math.prod(shape) * dt.itemsize  # Python ints: no overflow
        total += nbytes
        if total > max_bytes:
            raise WireError(f"the frame's arrays exceed {max_bytes} bytes")
        plans.append((tuple(shape), dt, nbytes))
    return plans


def shape_fits(shape: Any, itemsize: int) -> bool:
    """Whether NumPy can make an array of this shape: a list of at most MAX_NDIM sizes, each a
    non-negative int, whose product without its zeros still fits an index. (0, 2**62) holds no
    element, yet `np.empty` and `reshape` refuse it with ValueError: a shape the peer sends
    must fail here, as a WireError, never there.)"""
    if not isinstance(shape, list | tuple) or len(shape) > MAX_NDIM:
        return False
    if not all(type(s) is int and s >= 0 for s in shape):
        return False
    return math.prod(max(s, 1) for s in shape) * max(itemsize, 1) < 2**62


def _rebuild(obj: Any, arrays: list[np.ndarray]) -> Any:
    """The header with each description replaced by its array (depth <= MAX_DEPTH here)."""
    if isinstance(obj, dict):
        if "__nd__" in obj:
            return arrays[obj["__nd__"]]
        return {k: _rebuild(v, arrays) for k, v in obj.items()}
    if isinstance(obj, list):
        return [_rebuild(v, arrays) for v in obj]
    return obj
