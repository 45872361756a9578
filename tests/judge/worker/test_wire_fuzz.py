"""Fuzzing the wire decoder: whatever bytes the candidate's process writes to the reply pipe,
`recv` ends in a decoded message of plain data or a `WireError`, never another exception, in
bounded time, and never allocates an array beyond its byte limit.

`hypothesis` is not a dependency, so this is a seeded `random` loop: valid frames, mutations of
them (bit flips, truncations, spliced headers, rewritten prefixes), random JSON of random depth,
nasty dtype strings, numbers JSON turns into huge ints or infinities, and plain noise. The seed
is fixed so that a failure replays; the failing case's bytes are in the assertion message.
"""

from __future__ import annotations

import fcntl
import json
import math
import os
import random
import struct
import time
from collections.abc import Callable
from typing import Any

import numpy as np
import pytest

# private: the worker's modules are loaded by path and have no public names
from optarena.judge.worker import _wire as wire

SEED = 20240917
CASES = 4000
MAX_BYTES = 1 << 20  # the fuzz's array byte limit: any larger np.empty is a failure
PIPE_BYTES = 1 << 20  # every fuzz frame fits the pipe, so no writer thread is needed
CASE_LIMIT_S = 0.5  # one recv, however hostile the frame
DTYPES = sorted(wire._DTYPES)
NASTY_DTYPES = [
    "(1,",
    "i4,(2,",
    "(99999999999,)f8",
    "(2147483647,2147483647)f8",
    "f8,",
    "f8," * 300,
    "a",
    "S0",
    "<U4",
    "|O",
    "|V8",
    "M8[fs]",
    "m8[2**80s]",
    "[('a', '<f4')]",
    '{"names":["a"],"formats":["f8"]}',
    "=f8",
    "float",
    "\x00",
    "",
    "f8\x00",
    "(2,)f8",
    "<f8]",
    "((",
]
NASTY_NUMBERS = [
    "1" + "0" * 400,
    "-1" + "0" * 30,
    "9223372036854775808",
    "-9223372036854775809",
    "1e400",
    "-1e999",
    "NaN",
    "Infinity",
    "-Infinity",
    "1" * 5000,
    "0." + "0" * 500 + "1",
    "1e-400",
    "true",
    "null",
]
DTYPE_ALPHABET = "<>|=biufcSUVOMmg?0123456789(),[]{}' :\"\\\x00é"


def _random_text(rng: random.Random, alphabet: str, n: int) -> str:
    return "".join(rng.choice(alphabet) for _ in range(rng.randrange(n + 1)))


def _random_value(rng: random.Random, depth: int, arrays: list[np.ndarray]) -> Any:
    """A message part `send` can encode: JSON data of random depth with arrays inside."""
    r = rng.random()
    if depth <= 0 or r < 0.35:
        kind = rng.randrange(7)
        if kind == 0:
            return rng.randrange(-(2**63), 2**63)
        if kind == 1:
            return rng.uniform(-1e300, 1e300)
        if kind == 2:
            return _random_text(rng, 'ab\\"[]{}:,é😀\n\x00', 12)
        if kind == 3:
            return rng.choice([None, True, False])
        dt = np.dtype(rng.choice(DTYPES))
        shape = tuple(rng.randrange(4) for _ in range(rng.randrange(3)))
        raw = rng.randbytes(math.prod(shape) * dt.itemsize)
        arr = np.frombuffer(raw, dtype=dt).reshape(shape).copy()
        arrays.append(arr)
        return arr
    if r < 0.7:
        return [_random_value(rng, depth - 1, arrays) for _ in range(rng.randrange(4))]
    return {f"k{i}": _random_value(rng, depth - 1, arrays) for i in range(rng.randrange(4))}


def _valid(rng: random.Random) -> tuple[bytes, dict[str, Any]]:
    msg = {"id": rng.randrange(100), "body": _random_value(rng, rng.randrange(6), [])}
    r, w = os.pipe()
    fcntl.fcntl(w, fcntl.F_SETPIPE_SZ, PIPE_BYTES)
    try:
        wire.send(w, msg)
        os.close(w)
        w = -1
        frame = b""
        while chunk := os.read(r, 1 << 16):
            frame += chunk
    finally:
        os.close(r)
        if w >= 0:
            os.close(w)
    return frame, msg


def _frame(header: bytes, count: int, payload: bytes = b"") -> bytes:
    return struct.pack("!4sII", wire.MAGIC, len(header), count) + header + payload


def _split(frame: bytes) -> tuple[bytes, int, bytes]:
    _, hlen, count = struct.unpack("!4sII", frame[:12])
    return frame[12 : 12 + hlen], count, frame[12 + hlen :]


def _bit_flips(rng: random.Random) -> bytes:
    frame = bytearray(_valid(rng)[0])
    for _ in range(rng.randrange(1, 9)):
        i = rng.randrange(len(frame))
        frame[i] ^= 1 << rng.randrange(8)
    return bytes(frame)


def _truncated(rng: random.Random) -> bytes:
    frame = _valid(rng)[0]
    return frame[: rng.randrange(len(frame))]


def _spliced(rng: random.Random) -> bytes:
    """Pieces of two valid frames: one header's start with another's end, the prefix of one
    with the header of the other, or a random slice of a header overwritten."""
    h1, c1, p1 = _split(_valid(rng)[0])
    h2, c2, p2 = _split(_valid(rng)[0])
    way = rng.randrange(3)
    if way == 0:
        header = h1[: rng.randrange(len(h1) + 1)] + h2[rng.randrange(len(h2) + 1) :]
        return _frame(header, rng.choice([c1, c2]), rng.choice([p1, p2]))
    if way == 1:
        return struct.pack("!4sII", wire.MAGIC, len(h1), c1) + h2 + p2
    i = rng.randrange(len(h1) + 1)
    j = min(len(h1), i + rng.randrange(12))
    junk = rng.choice([rng.randbytes(j - i), h2[: j - i], b"[" * (j - i), b'"' * (j - i)])
    return _frame(h1[:i] + junk + h1[j:], c1, p1)


def _prefix_rewritten(rng: random.Random) -> bytes:
    header, count, payload = _split(_valid(rng)[0])
    hlen = rng.choice([0, 1, len(header) - 1, len(header) + 1, 2**31, 2**32 - 1, wire.MAX_HEADER])
    count = rng.choice([count, count + 1, max(count - 1, 0), 2**32 - 1, wire.MAX_ARRAYS + 1])
    magic = rng.choice([wire.MAGIC, wire.MAGIC, b"OAW2", b"\0\0\0\0"])
    return struct.pack("!4sII", magic, max(hlen, 0) % 2**32, count) + header + payload


def _random_json(rng: random.Random, depth: int) -> str:
    """JSON-ish text of random depth, with nasty numbers and duplicate or fake array keys."""
    if depth <= 0 or rng.random() < 0.3:
        return rng.choice(
            [
                rng.choice(NASTY_NUMBERS),
                str(rng.randrange(-(2**70), 2**70)),
                json.dumps(_random_text(rng, 'ab\\"[]é', 6)),
                '"\\ud800"',
                '"\\udc00x"',
            ]
        )
    n = rng.randrange(4)
    if rng.random() < 0.5:
        return "[" + ",".join(_random_json(rng, depth - 1) for _ in range(n)) + "]"
    keys = [rng.choice(['"a"', '"b"', '"__nd__"', '"dtype"', '"shape"']) for _ in range(n)]
    return "{" + ",".join(f"{k}:{_random_json(rng, depth - 1)}" for k in keys) + "}"


def _json_header(rng: random.Random) -> bytes:
    depth = rng.choice([rng.randrange(8), rng.randrange(60, 70)])
    if rng.random() < 0.2:  # deeper than any parser's recursion
        n = rng.choice([wire.MAX_DEPTH, wire.MAX_DEPTH + 1, 2000, 50_000])
        body = rng.choice(["[" * n + "]" * n, '{"a":' * n + "0" + "}" * n])
    else:
        body = _random_json(rng, depth)
    header = '{"id": 1, "x": ' + body + "}" if rng.random() < 0.7 else body
    return _frame(header.encode(), rng.randrange(3), rng.randbytes(rng.randrange(64)))


def _array_spec(rng: random.Random) -> bytes:
    """Array descriptions with nasty dtypes, shapes and indices."""
    dtype: Any = rng.choice(
        [
            rng.choice(NASTY_DTYPES),
            rng.choice(DTYPES),
            _random_text(rng, DTYPE_ALPHABET, 10),
            rng.choice([5, None, True, ["<f8"], {"a": 1}, 1.5]),
        ]
    )
    dim = rng.choice([0, 1, 3, 2**31, 2**62, 2**63 - 1, -1, True, 1.5, "2", None, [1]])
    ndim = rng.choice([0, 1, 2, 3, 33])
    shape: Any = [rng.choice([dim, rng.randrange(5)]) for _ in range(ndim)]
    if rng.random() < 0.1:
        shape = rng.choice(["x", 3, None, {"0": 1}])
    index: Any = rng.choice([0, 0, 0, 1, -1, True, False, 0.0, "0", None])
    spec = {"__nd__": index, "dtype": dtype, "shape": shape}
    if rng.random() < 0.1:
        spec["extra"] = 1
    text = json.dumps({"id": 3, "ok": True, "output": spec})
    if rng.random() < 0.1:  # a duplicate __nd__ that a last-wins parser would accept
        text = text.replace('"__nd__": ', '"__nd__": 9, "__nd__": ', 1)
    payload = rng.randbytes(rng.choice([0, 8, 64, 1000]))
    return _frame(text.encode(), rng.choice([1, 1, 0, 2]), payload)


def _noise(rng: random.Random) -> bytes:
    data = rng.randbytes(rng.randrange(200))
    return wire.MAGIC + data if rng.random() < 0.5 else data


GENERATORS: list[Callable[[random.Random], bytes]] = [
    _bit_flips,
    _truncated,
    _spliced,
    _prefix_rewritten,
    _json_header,
    _array_spec,
    _noise,
]


def _plain(value: Any, depth: int = 0) -> bool:
    """A decoded message holds only plain data within the limits recv promises."""
    if depth > wire.MAX_DEPTH:
        return False
    if isinstance(value, dict):
        return all(isinstance(k, str) and _plain(v, depth + 1) for k, v in value.items())
    if isinstance(value, list):
        return all(_plain(v, depth + 1) for v in value)
    if isinstance(value, np.ndarray):
        return type(value) is np.ndarray and value.dtype.str in wire._DTYPES
    if isinstance(value, bool) or value is None:
        return True
    if isinstance(value, int):
        return wire.INT_MIN <= value <= wire.INT_MAX
    if isinstance(value, float):
        return math.isfinite(value)
    if isinstance(value, str):
        value.encode("utf-8")  # raises on a lone surrogate
        return True
    return False


def _feed(frame: bytes, *, close: bool, timeout: float) -> tuple[str, Any]:
    """('value', decoded) or ('wire', WireError) or ('other', exception)."""
    r, w = os.pipe()
    try:
        fcntl.fcntl(w, fcntl.F_SETPIPE_SZ, PIPE_BYTES)
        os.write(w, frame)
        if close:
            os.close(w)
            w = -1
        try:
            return "value", wire.recv(r, timeout=timeout, max_bytes=MAX_BYTES)
        except wire.WireError as e:
            return "wire", e
        except BaseException as e:  # the property under test: nothing else escapes
            return "other", e
    finally:
        os.close(r)
        if w >= 0:
            os.close(w)


@pytest.fixture
def bounded_allocations(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """Every np.empty during the fuzz, in bytes; one beyond MAX_BYTES fails the test."""
    sizes: list[int] = []
    real = np.empty

    def empty(shape: Any, dtype: Any = float, *a: Any, **k: Any) -> np.ndarray:
        n = math.prod(shape if isinstance(shape, tuple | list) else (shape,))
        sizes.append(n * np.dtype(dtype).itemsize)
        assert sizes[-1] <= MAX_BYTES, f"np.empty({shape!r}, {dtype!r}) beyond the limit"
        return real(shape, dtype, *a, **k)

    monkeypatch.setattr(np, "empty", empty)
    return sizes


def _canonical(msg: Any) -> str:
    """JSON with each array as its dtype, shape and bytes (NaN payloads compare exactly)."""

    def array(a: np.ndarray) -> list[Any]:
        return [a.dtype.str, list(a.shape), a.tobytes().hex()]

    return json.dumps(msg, default=array)


def test_valid_frames_round_trip() -> None:
    rng = random.Random(SEED)
    for _ in range(300):
        frame, msg = _valid(rng)
        kind, got = _feed(frame, close=True, timeout=2)
        assert kind == "value", (got, frame[:300])
        assert _canonical(got) == _canonical(msg)


def test_fuzzed_frames_decode_or_raise_wire_error(bounded_allocations: list[int]) -> None:
    rng = random.Random(SEED)
    outcomes = {"value": 0, "wire": 0}
    t_start = time.monotonic()
    for case in range(CASES):
        generate = GENERATORS[case % len(GENERATORS)]
        frame = generate(rng)
        t0 = time.monotonic()
        kind, got = _feed(frame, close=True, timeout=2)
        elapsed = time.monotonic() - t0
        where = f"case {case} ({generate.__name__}), frame {frame[:200]!r}... ({len(frame)} B)"
        assert kind != "other", f"{type(got).__name__}: {got} from {where}"
        assert elapsed < CASE_LIMIT_S, f"{elapsed:.2f} s for {where}"
        if kind == "value":
            assert isinstance(got, dict) and _plain(got), where
        outcomes[kind] += 1
    total = time.monotonic() - t_start
    # Both outcomes occur: mutations are not all caught by the magic, nor all harmless.
    assert outcomes["value"] > CASES // 50 and outcomes["wire"] > CASES // 2, outcomes
    assert bounded_allocations, "no array was ever allocated: the fuzz misses the array path"
    assert total < 20, f"{CASES} cases took {total:.1f} s"


def test_fuzzed_frames_from_a_peer_that_stays_silent_end_at_the_deadline() -> None:
    """With the writer left open, a truncated or over-announced frame is a WireTimeout at the
    deadline, not a wait for bytes that never come."""
    rng = random.Random(SEED + 1)
    for case in range(40):
        frame = rng.choice([_truncated, _prefix_rewritten])(rng)
        t0 = time.monotonic()
        kind, got = _feed(frame, close=False, timeout=0.05)
        elapsed = time.monotonic() - t0
        assert kind != "other", f"case {case}: {type(got).__name__}: {got} from {frame[:200]!r}"
        assert elapsed < 0.05 + CASE_LIMIT_S, f"case {case}: {elapsed:.2f} s"
