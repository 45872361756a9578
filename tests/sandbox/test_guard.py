"""The worker guard's decisions, the precision check and the judge seal, as pure functions.

The audit hook itself is never installed here (it cannot be removed from the test process);
its dispatcher is called directly with the arguments CPython's audit events carry.
"""

from __future__ import annotations

import errno
import mmap
import os
import socket
from pathlib import Path

import numpy as np
import pytest

# private: the seal's, the checks' and the worker guard's internals, attacked directly
from optarena.judge._seal import broken, take_seal
from optarena.judge.correctness._checks import check_precision, downcast_width
from optarena.judge.worker import _guard
from optarena.tasks import Task


@pytest.fixture
def guard(tmp_path: Path) -> _guard.Guard:
    (tmp_path / "work").mkdir()
    return _guard.Guard(str(tmp_path / "work"), [(str(tmp_path / "task"), "oracle_access")])


def test_reads_of_protected_paths_are_named_and_blocked(guard: _guard.Guard) -> None:
    task = Path(guard.protected[0][0])
    with pytest.raises(PermissionError):
        guard._dispatch("open", (str(task / "oracle.py"), "r", os.O_RDONLY))
    with pytest.raises(PermissionError):
        guard._dispatch("os.listdir", (str(task),))
    assert [code for code, _ in guard.found] == ["oracle_access", "oracle_access"]


def test_writes_inside_the_workdir_pass_and_outside_do_not(guard: _guard.Guard) -> None:
    guard._dispatch("open", ("scratch.bin", "w", os.O_WRONLY | os.O_CREAT))
    guard._dispatch("open", ("/dev/null", "w", os.O_WRONLY))
    guard._dispatch("open", ("/etc/hostname", "r", os.O_RDONLY))
    assert guard.found == []
    with pytest.raises(PermissionError):
        guard._dispatch("open", ("../escape.txt", None, os.O_WRONLY | os.O_CREAT))
    with pytest.raises(PermissionError):
        guard._dispatch("os.rename", ("a", "/tmp/b", -1, -1))
    assert {code for code, _ in guard.found} == {"write_outside_workdir"}


def test_inet_sockets_are_network_access_unix_pairs_are_not(guard: _guard.Guard) -> None:
    a, b = socket.socketpair()
    inet = socket.socket()
    try:
        guard._dispatch("socket.connect", (a, "x"))
        with pytest.raises(PermissionError):
            guard._dispatch("socket.connect", (inet, ("127.0.0.1", 80)))
    finally:
        for s in (a, b, inet):
            s.close()
    assert [code for code, _ in guard.found] == ["network_access"]


def test_replaced_attributes_are_reported_once(guard: _guard.Guard) -> None:
    ns = {"perf_counter": len, "monotonic": abs}
    guard.watch("time", "clock_patched", ns, callables_only=False)
    assert guard.drain() == []
    ns["perf_counter"] = lambda: 0
    first = guard.drain()
    assert [f["code"] for f in first] == ["clock_patched"]
    assert "time.perf_counter" in first[0]["detail"]
    assert guard.drain() == []


def test_lazy_reasons() -> None:
    class Sub(np.ndarray):
        pass

    class Proxy:
        def __array__(self, dtype: object = None, copy: object = None) -> np.ndarray:
            return np.zeros(3)

    assert _guard.lazy_reason(np.zeros(3)) is None
    assert _guard.lazy_reason(np.zeros(3)[1:]) is None
    assert "subclass" in str(_guard.lazy_reason(np.zeros(3).view(Sub)))
    assert "proxy" in str(_guard.lazy_reason(Proxy()))
    assert _guard.lazy_reason([1, 2]) is None
    buf = mmap.mmap(-1, 64)
    assert "memory map" in str(_guard.lazy_reason(np.frombuffer(buf, dtype=np.uint8)[:8]))


def test_error_codes_name_the_limit() -> None:
    assert _guard.error_code(MemoryError()) == "memory_limit"
    assert _guard.error_code(OSError(errno.EFBIG, "big")) == "file_size_limit"
    assert _guard.error_code(OSError(errno.EMFILE, "fds")) == "open_files_limit"
    assert _guard.error_code(BlockingIOError(errno.EAGAIN, "fork")) == "process_limit"
    assert _guard.error_code(RuntimeError("can't start new thread")) == "process_limit"
    assert _guard.error_code(ValueError("x")) == "raised"
    assert _guard.error_code(ValueError("assignment destination is read-only")) == "input_mutated"


def test_precision_downcast_needs_many_narrow_values() -> None:
    rng = np.random.default_rng(0)
    honest = rng.standard_normal(1000).astype(np.float32)
    assert downcast_width(honest) is None
    assert downcast_width(honest.astype(np.float16).astype(np.float32)) == "float16"
    wide = (honest * np.float32(1e20)).astype(np.float32)  # beyond float16's range
    bf = (wide.view(np.uint32) & np.uint32(0xFFFF0000)).view(np.float32)
    assert downcast_width(bf) == "bfloat16"
    assert downcast_width(wide) is None
    assert downcast_width(np.full(1000, 0.25, dtype=np.float32)) is None  # few distinct values
    assert check_precision(honest).passed


def test_seal_names_what_changed(task_copy: object) -> None:
    task: Task = task_copy("softmax")  # type: ignore[operator]
    before = take_seal(task)
    assert broken(before, take_seal(task)) == []
    with (task.root / "oracle.py").open("a") as f:
        f.write("\n# changed\n")
    assert broken(before, take_seal(task)) == ["the task package", "the oracle"]
