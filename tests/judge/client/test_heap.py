"""`kept_heap`: while a pair is measured, the judge's freed memory is reused, not faulted in
again (the outputs it reads between two timed calls land in warm pages)."""

from __future__ import annotations

import resource

import numpy as np
import pytest

from optarena.judge.client import kept_heap

# private: whether this C library has the knobs at all (glibc)
from optarena.judge.client._heap import _LIBC

pytestmark = pytest.mark.skipif(_LIBC is None, reason="not glibc: kept_heap is a no-op")

_MIB = 40  # above glibc's largest dynamic mmap threshold (32 MiB): a fresh mapping each time


def _faults_per_array(n: int = 3) -> list[int]:
    """Page faults of allocating, touching and freeing a 40 MiB array, n times in a row."""
    faults = []
    for _ in range(n):
        before = resource.getrusage(resource.RUSAGE_SELF).ru_minflt
        a = np.empty(_MIB << 20, dtype=np.uint8)
        a.fill(1)
        del a
        faults.append(resource.getrusage(resource.RUSAGE_SELF).ru_minflt - before)
    return faults


def test_freed_memory_is_reused_inside_and_given_back_after() -> None:
    with kept_heap(), kept_heap():  # nested: the inner exit keeps the setting
        pass
    with kept_heap():
        first, *later = _faults_per_array()
    assert first > 0
    assert max(later) * 10 < first, (first, later)  # no new pages for the same size again
    # negative control, and the defaults are back: each array is a new mapping again
    outside = _faults_per_array()
    assert min(outside[1:]) * 2 > first, (first, outside)
