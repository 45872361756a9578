"""`kept_heap`: while a pair is measured, the judge's freed memory is reused, not faulted in
again (the outputs it reads between two timed calls land in warm pages)."""

from __future__ import annotations

import json
import mmap
import subprocess
import sys
from pathlib import Path

import pytest

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

# Run in a fresh interpreter: the malloc settings and the heap are the process's. In a test
# worker that has run other tests, another thread may hold `kept_heap` (its exit then keeps the
# setting, as it must) or may have allocated above the freed array (the array's chunk is then
# reused from the free list, not mapped again): neither is what this test is about.
_PROBE = """
import json, resource, sys
import numpy as np
from numpy._core import multiarray
from optarena.judge.client import kept_heap

N = int(sys.argv[1])
multiarray._set_madvise_hugepage(False)  # NumPy asks for huge pages (madvise): 4 KiB here


def faults(n=3):
    out = []
    for _ in range(n):
        before = resource.getrusage(resource.RUSAGE_SELF).ru_minflt
        a = np.empty(N, dtype=np.uint8)
        a.fill(1)
        del a
        out.append(resource.getrusage(resource.RUSAGE_SELF).ru_minflt - before)
    return out


with kept_heap(), kept_heap():  # nested: the inner exit keeps the setting
    pass
with kept_heap():
    _, *later = faults()
outside = faults()  # negative control, and the defaults are back: a new mapping each time

# a concurrent holder (another judge thread) keeps the setting past this block's exit
import threading
held, release = threading.Event(), threading.Event()


def hold():
    with kept_heap():
        held.set()
        release.wait()


other = threading.Thread(target=hold)
other.start()
held.wait()
with kept_heap():
    faults(1)
shared = faults(2)
release.set()
other.join()
print(json.dumps([later, outside, shared]))
"""


def test_freed_memory_is_reused_inside_and_given_back_after() -> None:
    done = subprocess.run(
        [sys.executable, "-c", _PROBE, str(_BYTES)], capture_output=True, text=True, timeout=120
    )
    assert done.returncode == 0, done.stderr
    later, outside, shared = json.loads(done.stdout)
    assert max(later) * 10 < _PAGES, later  # the same size again: no new pages
    assert min(outside) * 2 > _PAGES, outside
    assert max(shared) * 10 < _PAGES, shared
