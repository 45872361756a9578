"""The wire format: exact round trips, and refusal of anything that is not plain numeric data."""

from __future__ import annotations

import json
import os
import struct

import numpy as np
import pytest

from optarena.judge.worker import _wire as wire


def _roundtrip(obj: object) -> object:
    r, w = os.pipe()
    try:
        wire.send(w, obj)
        return wire.recv(r, timeout=5)
    finally:
        os.close(r)
        os.close(w)


def test_roundtrip_arrays_scalars_nesting() -> None:
    x = np.arange(12, dtype=np.float32).reshape(3, 4)
    msg = {"op": "call", "args": [x, x[:, ::2]], "kwargs": {"eps": 1e-6, "n": np.int64(3)}}
    got = _roundtrip(msg)
    assert isinstance(got, dict)
    assert got["op"] == "call"
    np.testing.assert_array_equal(got["args"][0], x)
    np.testing.assert_array_equal(got["args"][1], x[:, ::2])
    assert got["args"][1].flags.c_contiguous and got["args"][1].flags.writeable
    assert got["kwargs"] == {"eps": 1e-6, "n": 3}
    empty = _roundtrip([np.zeros((0, 5), np.float64)])
    assert isinstance(empty, list) and empty[0].shape == (0, 5)


def _raw_frame(header: dict[str, object], count: int, payload: bytes = b"") -> bytes:
    h = json.dumps(header).encode()
    return struct.pack("!4sII", wire.MAGIC, len(h), count) + h + payload


@pytest.mark.parametrize("dtype", ["|O", "<U4", "|V8", "[('a', '<f4')]", 5])
def test_non_numeric_dtypes_refused(dtype: object) -> None:
    frame = _raw_frame({"x": {"__nd__": 0, "dtype": dtype, "shape": [1]}}, 1, b"\0" * 8)
    r, w = os.pipe()
    os.write(w, frame)
    with pytest.raises(wire.WireError):
        wire.recv(r, timeout=5)
    os.close(r)
    os.close(w)


def test_malformed_frames() -> None:
    for frame in (b"XXXX" + b"\0" * 8, _raw_frame({"a": 1}, 2)):
        r, w = os.pipe()
        os.write(w, frame)
        with pytest.raises(wire.WireError):
            wire.recv(r, timeout=5)
        os.close(r)
        os.close(w)


def test_timeout_and_closed() -> None:
    r, w = os.pipe()
    with pytest.raises(wire.WireTimeout):
        wire.recv(r, timeout=0.05)
    os.close(w)
    with pytest.raises(wire.WireClosed):
        wire.recv(r, timeout=1)
    os.close(r)
