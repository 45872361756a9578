"""The shared areas: sealed read-only inputs with their layouts, a validated output read."""

from __future__ import annotations

import mmap
import os

import numpy as np
import pytest

from optarena.judge.client import arena_bytes

# private: the shared-memory arena's internals, attacked directly
from optarena.judge.client._arena import ArenaFull, InputArena, OutputArena, span_bytes
from optarena.tasks import inputs as gen


def _worker_view(arena: InputArena, desc: dict) -> np.ndarray:
    """What the worker loop builds from a descriptor, on a read-only mapping of its own."""
    fd = arena.worker_fd()
    try:
        m = mmap.mmap(fd, arena.size, mmap.MAP_SHARED, mmap.PROT_READ)
    finally:
        os.close(fd)
    return np.ndarray(
        tuple(desc["shape"]),
        dtype=np.dtype(desc["dtype"]),
        buffer=m,
        offset=desc["offset"],
        strides=tuple(desc["strides"]),
    )


def test_every_layout_arrives_with_its_values_and_strides() -> None:
    rng = np.random.default_rng(1)
    x = rng.standard_normal((5, 7, 33)).astype(np.float32)
    seen = set()
    for _ in range(60):
        v = gen.relayout(rng, x)
        seen.add(v.strides)
        arena = InputArena(arena_bytes([[v]]))
        try:
            args, _, _ = arena.place([v, 3.5], {})
            assert args[1] == 3.5  # plain values pass through
            w = _worker_view(arena, args[0])
            assert np.array_equal(w, x) and w.strides == v.strides
            assert not w.flags.writeable
        finally:
            arena.close()
    assert len(seen) >= 5  # strided, reversed, transposed, Fortran, contiguous ...
    assert span_bytes(x[:, :, ::2]) <= x.nbytes


def test_the_worker_cannot_write_the_inputs_through_any_descriptor() -> None:
    arena = InputArena(1 << 16)
    try:
        ro = arena.worker_fd()
        with pytest.raises(OSError):
            os.write(ro, b"x")
        with pytest.raises((OSError, PermissionError)):
            mmap.mmap(ro, arena.size, mmap.MAP_SHARED, mmap.PROT_READ | mmap.PROT_WRITE)
        os.close(ro)
        # Reopening the memfd for writing still meets the seal: no writable shared mapping.
        rw = os.open(f"/proc/self/fd/{arena.fd}", os.O_RDWR)
        try:
            with pytest.raises(PermissionError):
                mmap.mmap(rw, arena.size, mmap.MAP_SHARED, mmap.PROT_READ | mmap.PROT_WRITE)
            with pytest.raises(PermissionError):
                os.write(rw, b"x")
            with pytest.raises(PermissionError):
                os.ftruncate(rw, 0)
        finally:
            os.close(rw)
    finally:
        arena.close()


def test_a_changed_input_is_found_by_the_judge_itself() -> None:
    x = np.arange(64, dtype=np.float32).reshape(8, 8)[:, ::2]
    arena = InputArena(1 << 12)
    try:
        _, _, placed = arena.place([x], {})
        assert arena.changed(placed.copies) is None
        pos = placed.copies[0].offset
        arena.view[pos + 4] ^= 0xFF  # what a write by the worker would have done
        assert arena.changed(placed.copies) == 0
    finally:
        arena.close()


def test_copies_worked_out_before_a_run_write_what_place_writes() -> None:
    """The hot path's copies (`copies`, `write`, `changed`) put each array where `place`
    describes it, layout kept, and name a changed one by its place among the call's arrays
    (an empty array before it counts too)."""
    rng = np.random.default_rng(3)
    empty = np.zeros((0, 4), dtype=np.float32)
    x = rng.standard_normal((6, 10)).astype(np.float32)[:, ::-2]
    w = rng.standard_normal(5).astype(np.float64)
    arena = InputArena(1 << 12)
    try:
        args, kwargs, _ = arena.place([empty, x, 2.0], {"w": w}, write=False)
        copies = arena.copies([empty, x, 2.0], {"w": w})
        assert [c.which for c in copies] == [1, 2]  # the empty array has nothing to copy
        arena.write(copies)
        assert np.array_equal(_worker_view(arena, args[1]), x)
        assert np.array_equal(_worker_view(arena, kwargs["w"]), w)
        assert arena.changed(copies) is None
        arena.view[copies[1].offset + 3] ^= 0x10  # the third array, w
        assert arena.changed(copies) == 2
    finally:
        arena.close()
    with pytest.raises(ValueError, match="closed"):
        arena.write(copies)  # never into an unmapped area


def test_inputs_too_big_for_the_area_are_a_judge_bug() -> None:
    arena = InputArena(4096)
    try:
        with pytest.raises(ArenaFull):
            arena.place([np.zeros(10_000)], {})
    finally:
        arena.close()


def test_output_descriptors_are_validated() -> None:
    out = OutputArena(1 << 12)
    try:
        out.view[:16] = np.arange(16, dtype=np.uint8)
        good = out.read({"shape": [4], "dtype": "<f4", "nbytes": 16})
        assert good is not None and good.dtype == np.float32 and good.shape == (4,)
        out.view[0] = 99  # a later write in the area does not change what was read
        assert good.view(np.uint8)[0] == 0
        bad = [
            None,
            [],
            {"shape": [4], "dtype": "<f4", "nbytes": 15},
            {"shape": [4], "dtype": "O", "nbytes": 32},
            {"shape": [4], "dtype": "(2)f4,", "nbytes": 32},
            {"shape": [-4], "dtype": "<f4", "nbytes": -16},
            {"shape": [True], "dtype": "<f4", "nbytes": 4},
            {"shape": [1 << 40], "dtype": "<f4", "nbytes": 4 << 40},
            {"shape": [4], "dtype": "f" * 100, "nbytes": 16},
            {"shape": [4], "dtype": "V4", "nbytes": 16},
        ]
        for d in bad:
            assert out.read(d) is None, d
    finally:
        out.close()


def test_closing_an_area_twice_leaves_a_reused_descriptor_number_alone() -> None:
    """A worker that times out is closed at once and again when its `with` block ends: the
    second close must not close what was opened since under the same number (it was a lease
    lock or another worker's pipe: the lock went, and another process's sweep killed that
    worker with SIGKILL)."""
    for area in (InputArena(1 << 16), OutputArena(1 << 16)):
        number = area.fd
        area.close()
        r, w = os.pipe()
        os.dup2(r, number)  # something else now open under the freed number
        try:
            area.close()
            os.fstat(number)  # still open
        finally:
            for fd in {r, w, number}:  # the pipe may have got the freed number itself
                os.close(fd)
