"""The compiled turn (`_turn.c`) on hostile answers: it reads the reply head and the output
object's fields from memory the candidate can write, so every field is forged here, and what it
takes must be exactly what the Python reader (`ObjectReader`) takes, with the same bytes;
anything else it hands back, unread. The "worker" is this test's own process (one interpreter,
one NumPy: the same layout), its reply pipe filled by the test."""

from __future__ import annotations

import contextlib
import ctypes
import fcntl
import os
import random
import struct
import sys
import threading
from collections.abc import Iterator
from typing import Any

import numpy as np
import pytest

# private: the compiled turn and the reader it must agree with are the judge's internals
from optarena.judge.client import _turn
from optarena.judge.client._arena import Copy
from optarena.judge.client._objects import _HEAD, ObjectReader
from optarena.judge.worker import _run as run
from optarena.judge.worker._wire import WireError
from optarena.sandbox import process_vm_read

pytestmark = pytest.mark.skipif(
    _turn.native() is None, reason=f"no compiled turn: {_turn.why_not()}"
)

GO = run.go_frame(0, 1, 0, [1e-5])
OBJECT = _HEAD + 52  # the bytes of an ndarray object the turn reads (ob_type to flags)


@pytest.fixture
def pipes() -> Iterator[tuple[int, int, int, int]]:
    """(go read end, go write end, reply read end, reply write end), the judge's ends
    non-blocking as the worker client's are."""
    go_r, go_w = os.pipe()
    re_r, re_w = os.pipe()
    for fd in (go_w, re_r):
        fcntl.fcntl(fd, fcntl.F_SETFL, fcntl.fcntl(fd, fcntl.F_GETFL) | os.O_NONBLOCK)
    yield go_r, go_w, re_r, re_w
    for fd in (go_r, go_w, re_r, re_w):
        with contextlib.suppress(OSError):
            os.close(fd)


def _segment(pipes: tuple[int, int, int, int], max_bytes: int, copies: list[Copy] | None = None,
             inputs: np.ndarray | None = None) -> _turn.Segment:  # fmt: skip
    area = np.zeros(64, np.uint8) if inputs is None else inputs
    seg = _turn.Segment(
        _turn.native(),
        area.ctypes.data,
        [copies or []],
        [GO],
        (pipes[1], pipes[2]),
        os.getpid(),
        None,
        id(np.ndarray),
        max_bytes,
    )
    seg._keep = area  # type: ignore[attr-defined]
    return seg


def _answer(pipes: tuple[int, int, int, int], head: bytes) -> None:
    os.write(pipes[3], head)


def _ref(address: int, index: int = 0) -> bytes:
    return run.REF.pack(run.REF_MAGIC, index, address)


def _python_takes(address: int, max_bytes: int) -> tuple[Any, bytes] | None:
    """What the Python hot path takes by reference at `address`: (ArrayRef, bytes), or None."""
    try:
        got = ObjectReader(os.getpid(), id(np.ndarray)).read(address)
    except WireError:
        return None
    if got is None or got.nbytes > max_bytes:
        return None
    data = np.empty(got.nbytes, np.uint8)
    try:  # as `_read_memory` reads it: a range the kernel refuses is the reader's WireError
        if got.nbytes:
            process_vm_read(os.getpid(), got.address, data.ctypes.data, got.nbytes)
    except OSError:
        return None
    return got, data.tobytes()


def _turn_takes(pipes: tuple[int, int, int, int], address: int, max_bytes: int) -> Any:
    """What the compiled turn takes: (ArrayRef fields, bytes), or the stop it handed back."""
    seg = _segment(pipes, max_bytes)
    _answer(pipes, _ref(address))
    stop = seg.run(0, 0)
    assert os.read(pipes[0], 1 << 16) == GO  # the go frame went out, whole
    if stop.status != _turn.DONE:
        return stop
    c = seg.calls[0]
    data = _turn.adopt(c.data, c.nbytes).tobytes()
    shape = tuple(c.dims[: c.nd])
    return (c.address, shape, _turn.DTYPES[c.dtype], c.nbytes), data


def _agree(
    pipes: tuple[int, int, int, int], address: int, max_bytes: int = 1 << 20, stable: int = -1
) -> bool:
    """The turn and the Python reader agree on the object at `address`; True: taken. Bytes
    are compared up to `stable` (a forged data pointer can run past its buffer into memory of
    this process that changes between the two reads; -1: all)."""
    py, native = _python_takes(address, max_bytes), _turn_takes(pipes, address, max_bytes)
    if py is None:
        assert isinstance(native, _turn.OaStop), native
        assert native.status == _turn.HEAD and native.got == run.REF.size
        assert bytes(native.head) == _ref(address)  # handed back as it came, for the reader
        return False
    assert not isinstance(native, _turn.OaStop), (py, native.status)
    got, data = py
    assert native[0] == (got.address, got.shape, got.dtype, got.nbytes)
    n = len(data) if stable < 0 else min(len(data), max(stable, 0))
    assert len(native[1]) == len(data) and native[1][:n] == data[:n]
    return True


@pytest.mark.parametrize(
    "make",
    [
        lambda: np.arange(12, dtype=np.float32).reshape(3, 4),
        lambda: np.zeros((2, 3, 5), np.float64),
        lambda: np.array(1.5, np.float32),
        lambda: np.zeros((0, 7), np.int32),
        lambda: np.arange(6, dtype=">f4"),
        lambda: np.ones(4, np.complex64),
        lambda: np.zeros((4, 6), np.float32).T,  # not C-contiguous: handed back
        lambda: np.zeros(3, dtype=[("a", "<f4")]),  # not plain: handed back
        lambda: np.arange(1 << 16, dtype=np.float64),  # over the limit below: handed back
    ],
)
def test_a_real_array_is_taken_as_the_reader_takes_it(pipes: Any, make: Any) -> None:
    a = make()
    _agree(pipes, id(a), max_bytes=1 << 18)


def test_what_is_no_array_is_handed_back(pipes: Any) -> None:
    for thing in (b"x" * 100, [1.0, 2.0], np.float32(1.0)):
        assert not _agree(pipes, id(thing))
    assert not _agree(pipes, 8)  # never mapped
    assert not _agree(pipes, (1 << 64) - 8)  # the top of the address space


class _Forged:
    """An ndarray object's fields written where the test says, pointing where it says."""

    def __init__(self, template: np.ndarray) -> None:
        self.raw = ctypes.create_string_buffer(ctypes.string_at(id(template), OBJECT), OBJECT)
        self.descr = ctypes.create_string_buffer(
            ctypes.string_at(struct.unpack_from("<Q", self.raw, _HEAD + 40)[0], _HEAD + 11),
            _HEAD + 11,
        )
        self.dims = (ctypes.c_int64 * 40)()
        self.data = np.arange(4096, dtype=np.uint8)
        self.put("<Q", _HEAD + 40, ctypes.addressof(self.descr))
        self.put("<Q", _HEAD + 16, ctypes.addressof(self.dims))
        self.put("<Q", _HEAD, self.data.ctypes.data)

    def put(self, fmt: str, offset: int, value: Any) -> None:
        struct.pack_into(fmt, self.raw, offset, value)

    @property
    def address(self) -> int:
        return ctypes.addressof(self.raw)


def _mutate(f: _Forged, rng: random.Random) -> None:
    """Forge some fields: the type, nd, flags, the dims, the dtype's characters, the pointers."""
    if rng.random() < 0.1:
        f.put("<Q", _HEAD - 8, rng.choice([0, id(np.generic), id(np.ndarray) + 8]))
    nd = rng.choice([-1, 0, 1, 2, 3, 4, 32, 33, 2**31 - 1, -(2**31)])
    f.put("<i", _HEAD + 8, nd)
    if rng.random() < 0.2:
        f.put("<i", _HEAD + 48, rng.choice([0, 2, 0x7FFFFFFE, -2]))  # C-contiguous bit off
    # 2**59 and 2**60: a product of exactly 2**62 bytes with an 8- or 4-byte item, which no
    # array may have, even with a zero beside it (no bytes, but no shape NumPy accepts)
    sizes = [0, 1, 2, 3, 7, 255, -1, 2**31, 2**40, 2**59, 2**60, 2**61, 2**62, 2**63 - 1, -(2**63)]
    weights = [6, 8, 6, 4, 4, 2, 1, 1, 1, 2, 2, 1, 1, 1, 1]
    for k in range(40):
        f.dims[k] = rng.choices(sizes, weights)[0]
    chars = b"fdeFDbBhHiIlLqQ?gGOSUVMmx\x00\xff"
    if rng.random() < 0.5:
        f.descr[_HEAD + 9] = rng.choice(chars)
    if rng.random() < 0.3:
        f.descr[_HEAD + 10] = rng.choice(b"<>=|!\x00")
    pointer = rng.random()
    if pointer < 0.05:
        f.put("<Q", _HEAD + 16, 8)  # dims unmapped
    elif pointer < 0.1:
        f.put("<Q", _HEAD + 40, 8)  # descr unmapped
    elif pointer < 0.15:
        f.put("<Q", _HEAD, 8)  # data unmapped
    elif pointer < 0.2:
        f.put("<Q", _HEAD, f.data.ctypes.data + 4000)  # data running off its buffer's end


@pytest.mark.parametrize("seed", range(4))
def test_forged_objects_are_taken_exactly_where_the_reader_takes_them(
    pipes: Any, seed: int
) -> None:
    """Differential: 400 forged objects each, fields drawn from the values that break a
    parser (negative, huge, overflowing products, unmapped pointers, unknown dtypes); the
    turn must agree with the reader on every one, bytes included, and never crash."""
    rng = random.Random(seed)
    taken = 0
    for _ in range(400):
        f = _Forged(rng.choice([np.zeros(3, np.float32), np.zeros((2, 2), "<f8")]))
        _mutate(f, rng)
        max_bytes = rng.choice([0, 64, 4096, 1 << 30])
        data = struct.unpack_from("<Q", f.raw, _HEAD)[0]
        stable = f.data.ctypes.data + f.data.nbytes - data  # to the end of the forged buffer
        taken += _agree(pipes, f.address, max_bytes, stable)
    assert 0 < taken < 400  # both outcomes were exercised


@pytest.mark.parametrize(
    "dims",
    [
        (0, 2**60),  # no bytes, but 2**62 bytes' worth of shape: no array NumPy makes
        (2**60, 0),
        (0, 2**60 - 1),  # just inside: an empty array, taken
        (0, 2**31, 2**29),
        (2**61, 2**2, 0),  # a product that overflows int64 past the zero
        (3, -1, 0),
    ],
)
def test_shapes_at_the_limit_are_taken_exactly_where_the_reader_takes_them(
    pipes: Any, dims: tuple[int, ...]
) -> None:
    f = _Forged(np.zeros(3, np.float32))
    f.put("<i", _HEAD + 8, len(dims))
    for k, d in enumerate(dims):
        f.dims[k] = d
    assert _agree(pipes, f.address) == (dims == (0, 2**60 - 1))


@pytest.mark.parametrize(
    ("head", "got"),
    [
        (run.REF.pack(b"OAR0", 0, 0), run.REF.size),  # not a reference frame
        (run.REF.pack(run.REF_MAGIC, 1, 0), run.REF.size),  # another call's index
        (run.REF.pack(run.REF_MAGIC, 0, 0)[:10], 10),  # a part of a head
    ],
)
def test_a_head_the_turn_does_not_take_is_handed_back_as_it_came(
    pipes: Any, head: bytes, got: int
) -> None:
    a = np.zeros(3, np.float32)
    if head.startswith(run.REF_MAGIC) and len(head) == run.REF.size:
        head = _ref(id(a), index=1)
    seg = _segment(pipes, 1 << 20)
    _answer(pipes, head)
    stop = seg.run(0, 0)
    assert (stop.status, stop.index, stop.got) == (_turn.HEAD, 0, got)
    assert bytes(stop.head[:got]) == head[:got]


def test_no_answer_within_a_slice_hands_the_wait_back(pipes: Any) -> None:
    """The Python waiter looks at the worker between slices (a dead worker whose grandchild
    holds the pipe sends no EOF): the turn does not wait past one."""
    seg = _segment(pipes, 1 << 20)
    stop = seg.run(0, 0)
    assert (stop.status, stop.index, stop.got) == (_turn.SENT, 0, len(GO))


def test_a_full_request_pipe_hands_the_rest_of_the_frame_back(pipes: Any) -> None:
    while True:  # fill the go pipe
        try:
            os.write(pipes[1], b"x" * 4096)
        except BlockingIOError:
            break
    seg = _segment(pipes, 1 << 20)
    stop = seg.run(0, 0)
    assert (stop.status, stop.index) == (_turn.SENT, 0) and stop.got < len(GO)


def test_inputs_are_written_before_the_go_frame_and_compared_after(pipes: Any) -> None:
    src = np.arange(48, dtype=np.uint8)
    area = np.zeros(64, np.uint8)
    seg = _segment(pipes, 1 << 20, [Copy(0, 8, src.ctypes.data, 48)], area)
    out = np.ones(2, np.float32)
    _answer(pipes, _ref(id(out)))
    stop = seg.run(0, 0)
    assert stop.status == _turn.DONE
    assert bytes(area[8:56]) == src.tobytes() and not area[:8].any()
    assert seg.calls[0].changed == -1
    _turn.adopt(seg.calls[0].data, seg.calls[0].nbytes)  # freed with it


def _hash(data: bytes, key: Any) -> tuple[int, ...]:
    out = (ctypes.c_uint64 * _turn.LANES)()
    buf = ctypes.create_string_buffer(data, max(len(data), 1))
    _turn.native().oa_hash(ctypes.addressof(buf), len(data), ctypes.addressof(key), out)
    return tuple(out)


def test_the_input_hash_sees_every_change() -> None:
    """The compiled turn compares the input area by a keyed hash (`oa_hash`): every bit
    flipped, blocks swapped, a zero byte added or dropped, all change it; the same bytes
    never do."""
    rng = random.Random(1)
    key = (ctypes.c_uint64 * _turn.LANES)(*[rng.randrange(1, (1 << 61) - 1) for _ in range(4)])
    data = bytes(rng.randrange(256) for _ in range(45))  # two whole blocks and a tail
    base = _hash(data, key)
    assert _hash(bytes(data), key) == base
    seen = {base}
    for bit in range(8 * len(data)):
        flipped = bytearray(data)
        flipped[bit // 8] ^= 1 << (bit % 8)
        seen.add(_hash(bytes(flipped), key))
    assert len(seen) == 1 + 8 * len(data)
    assert _hash(data[16:32] + data[:16] + data[32:], key) != base
    assert _hash(data + b"\0", key) != base and _hash(data[:-1], key) != base
    zeros = _hash(bytes(32), key)
    assert zeros != _hash(bytes(48), key) and zeros != _hash(b"", key)
    other = (ctypes.c_uint64 * _turn.LANES)(*[k + 1 for k in key])
    assert _hash(data, other) != base  # another key, another value


@pytest.mark.parametrize("size", [45, (1 << 20) + 45])  # hashed; compared in full
@pytest.mark.parametrize("where", [0, 17, -1])
def test_an_input_changed_during_the_call_is_named(pipes: Any, size: int, where: int) -> None:
    """The "worker" (a thread here) changes one byte of the area after the go frame (the
    seals forbid it in a real worker: this checks that the compare would see it)."""
    src = np.arange(size, dtype=np.uint8)
    other = np.arange(16, dtype=np.uint8)
    area = np.zeros(size + 128, np.uint8)
    copies = [Copy(0, size + 64, other.ctypes.data, 16), Copy(1, 0, src.ctypes.data, size)]
    where %= size
    seg = _segment(pipes, 1 << 20, copies, area)
    out = np.ones(2, np.float32)

    def worker() -> None:
        go = b""
        while len(go) < len(GO):
            go += os.read(pipes[0], len(GO))
        area[where] ^= 0x40
        _answer(pipes, _ref(id(out)))

    t = threading.Thread(target=worker)
    t.start()
    stop = seg.run(0, 0)
    while stop.status == _turn.SENT:  # the thread was slow: as the caller, wait for it
        t.join()
        stop = seg.run(0, len(GO))
    t.join()
    assert stop.status == _turn.DONE
    assert seg.calls[0].changed == 1  # the second array, by its place among the call's arrays
    _turn.adopt(seg.calls[0].data, seg.calls[0].nbytes)


@pytest.mark.parametrize(
    ("text", "v1", "ns"),
    [
        (b"usage_usec 12345\nuser_usec 10000\nsystem_usec 2345\n", False, 12_345_000),
        (b"nr_periods 0\nusage_usec 7\n", False, 7_000),
        (b"987654321\n", True, 987_654_321),
        (b"user_usec 1\n", False, -1),  # none: the Python reader reads it (and says why not)
        (b"", True, -1),
    ],
)
def test_the_cgroup_cpu_count_reads_as_cpu_ns_reads_it(
    pipes: Any, tmp_path: Any, text: bytes, v1: bool, ns: int
) -> None:
    f = tmp_path / "cpu"
    f.write_bytes(text)
    fd = os.open(f, os.O_RDONLY)
    try:
        seg = _turn.Segment(
            _turn.native(), np.zeros(8, np.uint8).ctypes.data, [[]], [GO],
            (pipes[1], pipes[2]), os.getpid(), (fd, v1), id(np.ndarray), 1 << 20,
        )  # fmt: skip
        out = np.zeros(2, np.float32)
        _answer(pipes, _ref(id(out)))
        assert seg.run(0, 0).status == _turn.DONE
        assert seg.calls[0].cpu_now == ns
        _turn.adopt(seg.calls[0].data, seg.calls[0].nbytes)  # freed with it
    finally:
        os.close(fd)


@pytest.mark.skipif(sys.platform != "linux", reason="Linux only")
def test_without_a_compiler_there_is_no_compiled_turn(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PATH", "/nonexistent")
    lib, why = _turn._build()
    assert lib is None and why == "no C compiler (cc) on PATH"
