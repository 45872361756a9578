"""`ObjectReader`: an ndarray read back from a process's memory by its address, as the judge
reads a timed call's output. Read here from this test's own process (the layout is the same:
one interpreter, one NumPy)."""

from __future__ import annotations

import os
import sys
from typing import Any

import numpy as np
import pytest

# private: the reader is the judge's internal, tested on literal arrays
from optarena.judge.client._objects import ArrayRef, ObjectReader
from optarena.judge.worker._wire import WireError

pytestmark = pytest.mark.skipif(sys.platform != "linux", reason="process_vm_readv is Linux's")


def _reader() -> ObjectReader:
    return ObjectReader(os.getpid(), id(np.ndarray))


def _ref(a: np.ndarray) -> ArrayRef:
    return ArrayRef(a.__array_interface__["data"][0], a.shape, a.dtype, a.nbytes)


@pytest.mark.parametrize(
    "make",
    [
        lambda: np.arange(12, dtype=np.float32).reshape(3, 4),
        lambda: np.zeros((2, 3, 5), np.float64),
        lambda: np.array(1.5, np.float32),  # no dimensions
        lambda: np.zeros((0, 7), np.int32),  # no elements
        lambda: np.ones(9, np.bool_),
        lambda: np.ones(4, np.complex64),
        lambda: np.arange(6, dtype=">f4"),  # the other byte order
        lambda: np.arange(6, dtype=np.longlong),  # 'q', the same dtype as 'l' here
        lambda: np.arange(24, dtype=np.float32).reshape(4, 6)[1:3],  # a contiguous view
        lambda: np.zeros((1, 5), np.float32)[:, ::1],
    ],
)
def test_an_array_reads_back_as_it_is(make: Any) -> None:
    a = make()
    got = _reader().read(id(a))
    assert got == _ref(a)
    assert got is not None and got.dtype.str == a.dtype.str


@pytest.mark.parametrize(
    "make",
    [
        lambda: np.zeros((4, 6), np.float32).T,  # Fortran order
        lambda: np.arange(8, dtype=np.float32)[::-1],  # a reversed view
        lambda: np.arange(8, dtype=np.float32)[::2],
        lambda: np.array([object(), 1], dtype=object),
        lambda: np.zeros(3, dtype=[("a", "<f4"), ("b", "<i4")]),
        lambda: np.array(["ab", "c"]),
        lambda: np.zeros(3, "datetime64[s]"),
    ],
)
def test_an_array_not_to_take_by_reference_is_left_to_the_worker(make: Any) -> None:
    """Not C-contiguous, or not of a plain numeric dtype: the judge asks the worker instead."""
    assert _reader().read(id(make())) is None


def test_what_is_no_array_is_a_wire_error() -> None:
    reader = _reader()
    for thing in (b"x" * 100, [1.0, 2.0], np.float32(1.0), np.ma.masked_array([1.0])):
        with pytest.raises(WireError, match="names no ndarray"):
            reader.read(id(thing))
    with pytest.raises(WireError, match="cannot be read"):
        reader.read(8)  # never mapped


def test_the_probe_is_accepted_only_as_the_worker_made_it() -> None:
    """The hello probe (made before any candidate code) is read back field by field: a
    layout the judge does not expect, or a probe that says something else, means no reader
    (outputs then travel in output frames)."""
    held = np.frombuffer(b"optarena-probe-" + os.urandom(17), dtype=np.uint8).copy()
    probe_ = {
        "address": held.__array_interface__["data"][0],
        "hex": held.tobytes().hex(),
        "object": id(held),
        "ndarray": id(np.ndarray),
    }
    pid = os.getpid()
    assert ObjectReader.probe(pid, probe_) is not None
    wrong: list[dict[str, Any]] = [
        {**probe_, "address": probe_["address"] + 1},
        {**probe_, "hex": probe_["hex"] + "00"},
        {**probe_, "object": id(held[1:])},
        {**probe_, "ndarray": id(np.matrix)},
        {**probe_, "object": str(id(held))},
        {k: v for k, v in probe_.items() if k != "object"},
        {**probe_, "object": 8},
    ]
    for p in wrong:
        assert ObjectReader.probe(pid, p) is None, p
