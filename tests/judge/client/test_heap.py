"""`kept_heap`: while a pair is measured, the judge's freed memory is reused, not faulted in
again (the outputs it reads between two timed calls land in warm pages)."""

from __future__ import annotations

import contextlib
import mmap
import resource
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pytest

from optarena.judge.client import kept_heap

# private: whether this C library has the knobs at all (glibc)
from optarena.judge.client._heap import _LIBC


def _thp_always() -> bool:
    try:
        return "[always]" in Path("/sys/kernel/mm/transparent_hugepage/enabled").read_text()
    except OSError:
        return False


pytestmark = [
    pytest.mark.skipif(_LIBC is None, reason="not glibc: kept_heap is a no-op"),
    # huge pages fault 2 MiB at a time: the page counts below would not tell fresh from reused
    pytest.mark.skipif(_thp_always(), reason="transparent huge pages are always on here"),
]

_BYTES = 40 << 20  # above glibc's largest dynamic mmap threshold (32 MiB): a fresh mapping
_PAGES = _BYTES // mmap.PAGESIZE


@contextlib.contextmanager
def _small_pages() -> Iterator[None]:
    """NumPy asks for huge pages for large arrays (madvise); counted in 4 KiB pages here."""
    from numpy._core import multiarray

    was = multiarray._set_madvise_hugepage(False)
    try:
        yield
    finally:
        multiarray._set_madvise_hugepage(was)


def _faults_per_array(n: int = 3) -> list[int]:
    """Page faults of allocating, touching and freeing a 40 MiB array, n times in a row."""
    faults = []
    for _ in range(n):
        before = resource.getrusage(resource.RUSAGE_SELF).ru_minflt
        a = np.empty(_BYTES, dtype=np.uint8)
        a.fill(1)
        del a
        faults.append(resource.getrusage(resource.RUSAGE_SELF).ru_minflt - before)
    return faults


def test_freed_memory_is_reused_inside_and_given_back_after() -> None:
    with kept_heap(), kept_heap():  # nested: the inner exit keeps the setting
        pass
    with _small_pages():
        with kept_heap():
            _, *later = _faults_per_array()
        # negative control, and the defaults are back: each array is a new mapping again
        outside = _faults_per_array()
    assert max(later) * 10 < _PAGES, later  # the same size again: no new pages
    assert min(outside) * 2 > _PAGES, outside
