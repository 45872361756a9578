"""`one_blas_thread`: while a pair is measured, and while the correctness phase runs the
worker's calls, the judge's BLAS runs on one thread, so no pool thread is left spinning on the
worker's CPU after the oracle's products (gemm-c's calls took twice their CPU time in wall
time, and its comparisons fell back to the wall clock)."""

from __future__ import annotations

import shutil
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from threadpoolctl import threadpool_info

from optarena.judge.client import one_blas_thread

# private: a correctness session and a pair session, their calls replaced by a probe
from optarena.judge.correctness import _phase, run_correctness
from optarena.judge.speed import _pair
from optarena.tasks import resolve_task


def _blas_threads() -> list[int]:
    np.ones((64, 64)) @ np.ones((64, 64))  # NumPy's BLAS, loaded and used
    return [i["num_threads"] for i in threadpool_info() if i["user_api"] == "blas"]


pytestmark = pytest.mark.skipif(
    not _blas_threads() or max(_blas_threads()) < 2,
    reason="no BLAS thread pool of two or more threads here: nothing to limit",
)


def test_one_thread_inside_the_pool_as_it_was_after() -> None:
    before = _blas_threads()
    with one_blas_thread():
        assert set(_blas_threads()) == {1}
        with one_blas_thread():  # nested: the inner exit keeps the setting
            pass
        assert set(_blas_threads()) == {1}
    assert _blas_threads() == before  # negative control: restored


def _on_a_thread(fn: Callable[[], Any]) -> Any:
    out: list[Any] = []
    t = threading.Thread(target=lambda: out.append(fn()))
    t.start()
    t.join()
    return out[0]


def test_one_thread_on_any_thread_after_another_thread_had_it() -> None:
    """An experiment measures its trials' pairs on worker threads, after a comparison may have
    run on the main thread: threadpoolctl let only the first thread that set the pool set it
    again, and every later thread's limit did nothing (the pool stayed at 2 threads)."""
    before = _blas_threads()

    def limited() -> list[int]:
        with one_blas_thread():
            return _blas_threads()

    assert set(limited()) == {1}  # the main thread first
    assert set(_on_a_thread(limited)) == {1}
    assert set(_on_a_thread(limited)) == {1}  # a third thread, after the second
    assert set(limited()) == {1}  # and the main thread again
    assert _blas_threads() == before


def test_set_on_one_thread_restored_on_another() -> None:
    """Concurrent holders: the first sets on its thread, the last restores on its own."""
    before = _blas_threads()
    first_in, second_in, first_out = threading.Event(), threading.Event(), threading.Event()
    seen: dict[str, list[int]] = {}

    def first() -> None:
        with one_blas_thread():
            first_in.set()
            second_in.wait(10)
        first_out.set()

    def second() -> None:
        first_in.wait(10)
        with one_blas_thread():
            second_in.set()
            first_out.wait(10)
            seen["after the first left"] = _blas_threads()
        seen["after both"] = _blas_threads()

    threads = [threading.Thread(target=first), threading.Thread(target=second)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert set(seen["after the first left"]) == {1}
    assert seen["after both"] == before and _blas_threads() == before


def test_a_pair_is_measured_on_one_blas_thread(monkeypatch: pytest.MonkeyPatch) -> None:
    seen: list[list[int]] = []

    def probe(self: Any) -> Any:
        seen.append(_blas_threads())
        return "record"

    monkeypatch.setattr(_pair.PairSession, "_run", probe)
    session = _pair.PairSession.__new__(_pair.PairSession)
    session.cpu = None
    assert session.run() == "record"
    assert seen == [[1] * len(seen[0])]
    assert max(_blas_threads()) >= 2


def test_the_correctness_phase_runs_on_one_blas_thread(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    """The oracle's products run between the worker's calls: on the default pool, its threads
    spun on the CPUs the calls ran on (a 2-CPU machine judged the built-in controls in 25% less
    CPU on one thread)."""
    seen: list[list[int]] = []

    def probe(self: Any) -> None:
        seen.append(_blas_threads())

    monkeypatch.setattr(_phase._Session, "run_calls", probe)
    task = resolve_task("rmsnorm")
    candidate = tmp_path / "candidate"
    shutil.copytree(task.baseline_dir, candidate)
    run_correctness(task, candidate, 1, tmp_path / "worker.log", time.monotonic() + 120)
    assert seen == [[1] * len(seen[0])]
    assert max(_blas_threads()) >= 2  # restored after
