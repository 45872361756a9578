"""`WorkerClient.run_calls`: a slot's calls with the worker thawed throughout.

The windows tile, so nothing the worker's process does during a run escapes the count, wherever
it does it: after a reply, in a thread that outlives the call, before the next request.
"""

from __future__ import annotations

import os
from typing import Any

import numpy as np
import pytest

from optarena.sandbox import probe

# Each call returns at once and leaves a thread that burns 3 ms of CPU after the reply; the
# next call waits for it (so all but the last finish inside the run, on any machine).
AFTER_THE_REPLY = """
import threading
import time

import numpy as np

_left = []


def _burn():
    end = time.thread_time() + 0.003
    while time.thread_time() < end:
        pass


def rmsnorm(x, weight, *, eps):
    for t in _left:
        t.join()
    _left[:] = [threading.Thread(target=_burn)]
    _left[0].start()
    return np.zeros(x.shape, x.dtype)
"""

PLAIN = """
import numpy as np


def rmsnorm(x, weight, *, eps):
    return np.zeros(x.shape, x.dtype)
"""


needs_cgroup = pytest.mark.skipif(
    probe().cgroups.why_not.get("cpu") is not None, reason="no cgroup CPU accounting here"
)


@needs_cgroup
@pytest.mark.parametrize("source", ["plain", "in-a-child"])
def test_the_windows_tile_the_run(source: str, worker_of: Any, calls_of: Any) -> None:
    """Work moved into a child process is the worker's too: the windows tile the cgroup's
    count, children and all."""
    w = worker_of(PLAIN if source == "plain" else IN_A_CHILD)
    w.freeze()
    before = w.sandbox.cpu_ns()
    results = w.run_calls(0, calls_of(8), lambda: 30.0, 1 << 20)
    after = w.sandbox.cpu_ns()
    assert before is not None and after is not None
    assert all(r.reply["ok"] and r.cpu_ns is not None for r in results)
    assert sum(int(r.cpu_ns or 0) for r in results) == after - before
    assert all(r.output is not None and r.output.shape == (4, 256) for r in results)
    if source == "in-a-child":
        assert after - before >= 8 * 5_000_000 * 0.95


@needs_cgroup
def test_work_after_the_reply_is_charged_to_the_run(worker_of: Any, calls_of: Any) -> None:
    w = worker_of(AFTER_THE_REPLY)
    results = w.run_calls(0, calls_of(8), lambda: 30.0, 1 << 20)
    total = sum(int(r.cpu_ns or 0) for r in results)
    assert total >= 7 * 3_000_000 * 0.9, total


# Call n burns (n % 4 + 1) ms of CPU in its own thread.
BURN_PER_CALL = """
import time

import numpy as np

_n = [0]


def rmsnorm(x, weight, *, eps):
    end = time.thread_time() + 0.001 * (_n[0] % 4 + 1)
    _n[0] += 1
    while time.thread_time() < end:
        pass
    return np.zeros(x.shape, x.dtype)
"""

# Each call forks a child that burns 5 ms of CPU, and waits for it: CPU the worker process's
# own clock does not count (a reaped child's is its parent's `cutime`); the cgroup's does.
IN_A_CHILD = """
import os
import time

import numpy as np


def rmsnorm(x, weight, *, eps):
    pid = os.fork()
    if pid == 0:
        end = time.process_time() + 0.005
        while time.process_time() < end:
            pass
        os._exit(0)
    os.waitpid(pid, 0)
    return np.zeros(x.shape, x.dtype)
"""


@needs_cgroup
def test_each_call_is_charged_its_own_cpu(worker_of: Any, calls_of: Any) -> None:
    w = worker_of(BURN_PER_CALL)
    results = w.run_calls(0, calls_of(8), lambda: 30.0, 1 << 20)
    for n, r in enumerate(results):
        burn = 1_000_000 * (n % 4 + 1)
        assert r.cpu_ns is not None and burn * 0.95 <= r.cpu_ns, (n, r.cpu_ns)
    for n, r in enumerate(results[:-1]):  # the last takes the CPU until the freeze too
        assert r.cpu_ns < 1_000_000 * (n % 4 + 1) + 900_000, (n, r.cpu_ns)


def test_a_changed_layout_is_bound_again_inside_the_run(worker_of: Any, calls_of: Any) -> None:
    """Calls whose arrays lie differently are bound again before they run (timed, like every
    arm's); the outputs stay right and every call is answered."""
    w = worker_of(PLAIN)
    calls = calls_of(4)
    wide = np.zeros((8, 256), np.float32)
    calls[2] = ([wide, calls[2][0][1]], calls[2][1])
    results = w.run_calls(0, calls, lambda: 30.0, 1 << 20)
    assert [r.output.shape for r in results if r.output is not None] == [
        (4, 256), (4, 256), (8, 256), (4, 256)
    ]  # fmt: skip


def test_an_output_is_read_from_the_worker_as_it_was_answered(
    worker_of: Any, calls_of: Any
) -> None:
    """The judge reads the output's bytes from the worker's memory (a root judge can): no copy
    in the worker that a loop of the candidate's could skip."""
    w = worker_of(PLAIN)
    assert w.reads_memory or os.geteuid() != 0
    results = w.run_calls(0, calls_of(3), lambda: 30.0, 1 << 20)
    assert all(r.output is not None and not r.output.any() for r in results)
    assert all(r.call_wall_ns is not None and 0 < r.call_wall_ns <= r.wall_ns for r in results)


# Each call answers with how many of its earlier outputs are still alive as it starts (the
# candidate keeps only weak references to them).
COUNTS_LIVE_OUTPUTS = """
import weakref

import numpy as np

_earlier = []


def rmsnorm(x, weight, *, eps):
    alive = sum(r() is not None for r in _earlier)
    out = np.full(x.shape, alive, x.dtype)
    _earlier.append(weakref.ref(out))
    return out
"""


def test_an_answered_output_is_let_go_before_the_next_call(worker_of: Any, calls_of: Any) -> None:
    """Once the judge has read an output (it has, when it sends the next go frame), the worker
    holds it no longer: each call starts with the heap a caller that discards its results would
    give it. Held through the next call, every call ran with one more output's memory in its
    heap and its cache than in-process timing gives it (a diluted ratio on large shapes)."""
    w = worker_of(COUNTS_LIVE_OUTPUTS)
    results = w.run_calls(0, calls_of(4), lambda: 30.0, 1 << 20)
    results += w.run_calls(0, calls_of(2), lambda: 30.0, 1 << 20)  # across runs too
    alive = [int(r.output.flat[0]) for r in results if r.output is not None]
    assert alive == [0] * 6


# Answers each call with zeros at once and writes the real value into that answer later, at the
# start of the next call: after the worker has let the output go, through its own reference.
FINISHES_LATER = """
import numpy as np

_answered = []


def rmsnorm(x, weight, *, eps):
    for earlier in _answered:
        earlier[...] = 7.0
    out = np.zeros(x.shape, x.dtype)
    _answered.append(out)
    return out
"""


def test_an_output_finished_after_it_was_let_go_is_judged_as_answered(
    worker_of: Any, calls_of: Any
) -> None:
    """Attack on the early release: work moved past the answer (to be fused with the next
    call's) never reaches the judge, which copied the output when it was answered."""
    w = worker_of(FINISHES_LATER)
    results = w.run_calls(0, calls_of(4), lambda: 30.0, 1 << 20)
    assert [float(r.output.max()) for r in results if r.output is not None] == [0.0] * 4


# The first call leaves a child that dies of a fatal timer some 30 ms later, while the worker
# is frozen between runs (a fatal signal gets through the freezer), tearing down 256 MiB of
# populated memory as it goes: CPU of the worker's cgroup outside any run.
DIES_WHILE_FROZEN = """
import os, signal, mmap
import numpy as np

_left = []


def rmsnorm(x, weight, *, eps):
    if not _left:
        r, w = os.pipe()
        pid = os.fork()
        if pid == 0:
            m = mmap.mmap(-1, 256 << 20, flags=mmap.MAP_PRIVATE | mmap.MAP_ANONYMOUS)
            np.frombuffer(m, dtype=np.uint8)[::4096] = 1  # populated (MAP_POPULATE is refused)
            signal.signal(signal.SIGALRM, signal.SIG_DFL)
            signal.setitimer(signal.ITIMER_REAL, 0.1)
            os.write(w, b"r")
            while True:
                signal.pause()
        os.read(r, 1)  # populated, its fatal timer set: return, and be frozen before it fires
        _left.append(pid)
    return np.zeros(x.shape, x.dtype)
"""


@needs_cgroup
def test_cpu_used_while_frozen_between_runs_is_charged_to_the_next_run(
    worker_of: Any, calls_of: Any
) -> None:
    """Runs tile the cgroup's CPU end to end, not only within each run: work done while the
    worker was frozen (an attack had helpers exit during the other arm's calls) is the
    next run's, so the tiles add up to everything the cgroup used."""
    w = worker_of(DIES_WHILE_FROZEN)
    w.freeze()
    start = w.sandbox.cpu_ns()
    first = w.run_calls(0, calls_of(2), lambda: 30.0, 1 << 20)
    import time

    time.sleep(0.5)  # frozen: the child dies now
    second = w.run_calls(0, calls_of(2), lambda: 30.0, 1 << 20)
    end = w.sandbox.cpu_ns()
    assert start is not None and end is not None
    tiles = sum(int(r.cpu_ns or 0) for r in [*first, *second])
    assert tiles == end - start
    assert w.sandbox.members() - {w.sandbox.worker_pid} <= w.sandbox._helpers  # it died


@needs_cgroup
def test_cpu_used_while_frozen_goes_to_the_first_counted_call_not_a_warm_up(
    worker_of: Any, calls_of: Any
) -> None:
    """A slot opens with an uncounted replay (`warm=1`): what the cgroup used while frozen (a
    helper's exit during the other arm's slot) must not land on that call, where it would
    escape the count, but on the first counted one."""
    import time

    w = worker_of(DIES_WHILE_FROZEN)
    w.freeze()
    start = w.sandbox.cpu_ns()
    first = w.run_calls(0, calls_of(2), lambda: 30.0, 1 << 20)
    time.sleep(0.5)  # frozen: the child dies now, its exit charged to the cgroup
    rest, frozen_now = w.cpu_at_rest, w.sandbox.cpu_ns()
    assert rest is not None and frozen_now is not None
    used_while_frozen = frozen_now - rest
    second = w.run_calls(0, calls_of(3), lambda: 30.0, 1 << 20, warm=1)
    end = w.sandbox.cpu_ns()
    assert start is not None and end is not None
    assert sum(int(r.cpu_ns or 0) for r in [*first, *second]) == end - start
    assert used_while_frozen > 0
    warm, counted = second[0], second[1]
    assert counted.cpu_ns is not None and counted.cpu_ns >= used_while_frozen
    assert warm.cpu_ns is not None and warm.cpu_ns < counted.cpu_ns


# The last call of a run answers first with a complete frame of its own: float64 claimed for the
# bytes of the float32 output, at the output's own address (readable: the hot path reads it).
FORMS = """
import numpy as np

FORM = "{form}"


def rmsnorm(x, weight, *, eps):
    out = x * 2
    if FORM == "fortran":
        return np.asfortranarray(out)
    if FORM == "reversed":
        return out[::-1]
    if FORM == "big-endian":
        return out.astype(">f4")
    if FORM == "flat":
        return out.reshape(-1)
    if FORM == "one-row":
        return out[:1]
    if FORM == "objects":
        return out.astype(object)
    return out
"""


@pytest.mark.parametrize(
    "form", ["plain", "fortran", "reversed", "big-endian", "flat", "one-row", "objects"]
)
def test_every_form_of_output_reads_as_the_candidate_returned_it(
    form: str, worker_of: Any, calls_of: Any
) -> None:
    """Taken by reference where it is a plain contiguous array; asked about (the `describe`
    frame, in the middle of a run and after its last call) where it is not: the same values
    either way, or, for an array of objects, the worker's description of it and the run's
    end."""
    w = worker_of(FORMS.format(form=form))
    assert w.objects is not None or os.geteuid() != 0
    calls = calls_of(3)
    results = w.run_calls(0, calls, lambda: 30.0, 1 << 20)
    if form == "objects":
        assert len(results) == 1 and results[0].output is None
        assert "object" in str(results[0].reply["output"])
        return
    assert len(results) == 3
    for (args, _), r in zip(calls, results, strict=True):
        want = args[0] * 2
        want = {"reversed": want[::-1], "flat": want.reshape(-1), "one-row": want[:1]}.get(
            form, want
        )
        assert r.output is not None and r.output.shape == want.shape
        assert np.array_equal(r.output, want)
        assert r.reply["aliases"] is False
        assert r.reply["output"]["dtype"] == (">f4" if form == "big-endian" else "<f4")


# On the run's last call, a ref frame of the candidate's own goes out before the worker's,
# naming something other than the output (the judge takes the first frame as the answer).
