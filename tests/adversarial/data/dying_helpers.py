# Attack: exactly the baseline's rmsnorm, plus kernel work that runs on the shared CPU while the
# candidate is frozen: charged to its cgroup but outside every one of its timed windows, and
# inside the baseline's wall time.
#
# A timed worker (pinned to one CPU) spawns at load (untimed) helper processes, each holding
# populated read-only mappings of one shared memfd (page tables to tear down), each
# SIGSTOPped (a stopped task counts as frozen and is not woken by freeze or thaw: no CPU).
# At the end of each counted slot the candidate continues one helper, which then keeps pushing
# a fatal ITIMER_REAL deadline a few ms ahead while the worker is thawed (a dead man's switch).
# Once the judge freezes the worker nothing can push it: the timer fires while the cgroup is
# frozen, a frozen task dies on a fatal signal, and its exit (exit_mmap of the mappings) runs
# during the next slot, which after half of the candidate's slots is the baseline's. The
# baseline's calls then wait for the CPU, the waiting-share rule switches the comparison to
# wall time, and in wall time the baseline's slots carry the exits.
#
# To make the switch certain, each counted prefill call ends with a 0.5 ms sleep: this arm's
# median waiting share then exceeds the baseline's by more than 10 points in every pair (the
# rule flags either arm, and then uses wall time for every verdict). In wall time the sleep
# costs this arm far less than the exits cost the baseline.
import mmap
import os
import signal
import sys
import time

import numpy as np

_TIMED = len(os.sched_getaffinity(0)) == 1  # timed workers are pinned to their pair's CPU
_PREFILL = (2, 256, 4096)
_DECODE = (16, 4096)
_WARMUP = 2  # warm-up calls per workload (uncounted)
_SLOT_GAP_S = 0.015  # a gap this long between two calls of a workload starts a new slot
# per workload: helpers, mappings of 64 MiB each, dead man's deadline (s), slots per pair
_PLAN = {_PREFILL: (4, 16, 0.006, 4), _DECODE: (8, 3, 0.0015, 8)}

_HELPER = r"""
import mmap, os, signal, sys, time
ack_w, fd, nmaps = int(sys.argv[1]), int(sys.argv[2]), int(sys.argv[3])
deadline = float(sys.argv[4])
maps = [mmap.mmap(fd, 64 << 20, mmap.MAP_SHARED, mmap.PROT_READ) for _ in range(nmaps)]
for m in maps:
    bytes(memoryview(m)[::4096])  # populated page by page (MAP_POPULATE is refused)
os.close(fd)
signal.signal(signal.SIGALRM, signal.SIG_DFL)
os.write(ack_w, b"r")
os.kill(os.getpid(), signal.SIGSTOP)
signal.setitimer(signal.ITIMER_REAL, deadline)
os.write(ack_w, b"a")
while True:
    signal.setitimer(signal.ITIMER_REAL, deadline)
    time.sleep(0.0002)
"""


class _State:
    def __init__(self, helpers: list[tuple[int, int]], slots: int) -> None:
        self.helpers = helpers
        self.slots = slots  # counted slots per pair (rounds x 2)
        self.calls = 0
        self.last_end = 0.0
        self.slot = -1  # counted slot index (-1: warm-up)
        self.in_slot = 0  # calls so far in the current slot
        self.k = None  # calls per slot, learned from the first counted slot


_state: dict[tuple[int, ...], _State] = {}


def _spawn(fd: int, nmaps: int, deadline: float) -> tuple[int, int]:
    ar, aw = os.pipe()
    os.set_inheritable(aw, True)
    argv = [sys.executable, "-I", "-S", "-c", _HELPER, str(aw), str(fd), str(nmaps), str(deadline)]
    pid = os.posix_spawn(sys.executable, argv, {}, setsid=True)  # own autogroup
    os.close(aw)
    return pid, ar


def _setup() -> None:
    fd = os.memfd_create("atk")
    os.ftruncate(fd, 64 << 20)
    m = mmap.mmap(fd, 64 << 20)
    m.write(b"\1" * (64 << 20))
    m.close()
    os.set_inheritable(fd, True)
    for shape, (n, nmaps, deadline, slots) in _PLAN.items():
        _state[shape] = _State([_spawn(fd, nmaps, deadline) for _ in range(n)], slots)
    for st in _state.values():
        for _, ar in st.helpers:
            os.read(ar, 1)  # populated; it stops itself next
    os.close(fd)


def _arm(st: _State, everything: bool = False) -> None:
    for _ in range(len(st.helpers) if everything else 1):
        if st.helpers:
            pid, ar = st.helpers.pop(0)
            os.kill(pid, signal.SIGCONT)
            os.read(ar, 1)  # its dead man's switch is set


def _after_call(shape: tuple[int, ...], start: float) -> None:
    st = _state.get(shape)
    if st is None:
        return
    st.calls += 1
    if st.calls <= _WARMUP:
        st.last_end = time.monotonic()
        return
    if st.slot < 0 or start - st.last_end > _SLOT_GAP_S:
        if st.slot == 0 and st.k is None:
            st.k = st.in_slot
        st.slot += 1
        st.in_slot = 0
    st.in_slot += 1
    if st.k is None and shape == _PREFILL:
        st.k = 3  # prefill calls take milliseconds: the protocol's minimum of 3 per slot
    if st.k is not None and st.in_slot == st.k:
        _arm(st, everything=st.slot >= st.slots - 1)
    st.last_end = time.monotonic()


if _TIMED:
    _setup()
    import ctypes

    ctypes.CDLL(None).prctl(29, 1000, 0, 0, 0)  # PR_SET_TIMERSLACK 1 us: a short sleep is short


def rmsnorm(x: np.ndarray, weight: np.ndarray, *, eps: float) -> np.ndarray:
    """Root-mean-square normalisation over the last axis, then a per-channel scale."""
    start = time.monotonic()
    mean_square = np.mean(x**2, axis=-1, keepdims=True)
    out = x / np.sqrt(mean_square + eps) * weight
    if _TIMED:
        _after_call(x.shape, start)
        if x.shape == _PREFILL and _state[_PREFILL].calls > _WARMUP:
            time.sleep(0.0005)
    return out
