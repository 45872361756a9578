"""Candidates that try to look faster than they are (issue 9, classes 1-5 and 8).

Each is a correct rmsnorm (or does the baseline's work) dressed up with one trick against the
speed phase: finding later inputs, editing in-process clocks, working in threads that exit,
sleeping, slowing the other arm, or being wrong only after many calls. None may be `improved`;
where the trick breaks the contract the candidate is rejected outright.
"""

from __future__ import annotations

import time
from pathlib import Path

import pytest

from adversarial._support import JudgeFn, copy_task
from optarena.judge import JudgeOptions
from optarena.tasks import Task

BASE = "x / np.sqrt(np.mean(x * x, axis=-1, keepdims=True) + eps) * weight"

ATTACKS = {
    # 1. look-ahead: search the process for arrays that are not this call's, compute their
    #    outputs now and answer later calls from that cache.
    "look-ahead-through-gc": f"""
import gc, sys
import numpy as np
_cache = {{}}
def rmsnorm(x, weight, *, eps):
    key = (x.tobytes()[:64], eps)
    if key in _cache:
        return _cache.pop(key)
    for obj in gc.get_objects():
        if type(obj) is np.ndarray and obj.shape == x.shape and obj is not x:
            _cache[(obj.tobytes()[:64], eps)] = (obj / np.sqrt(np.mean(obj * obj, axis=-1,
                keepdims=True) + eps) * weight)
    frame = sys._getframe(1)
    while frame is not None:
        for v in list(frame.f_locals.values()):
            if isinstance(v, list) and len(v) > 1 and isinstance(v[0], dict):
                _cache["seen-a-batch"] = True
        frame = frame.f_back
    return {BASE}
""",
    # 2. in-process clocks edited: whatever the worker loop might read runs 20x slow.
    "divides-the-clocks-by-20": f"""
import time
import numpy as np
_pc, _tt = time.perf_counter_ns, time.thread_time_ns
_t0 = _pc()
time.perf_counter_ns = lambda: _t0 + (_pc() - _t0) // 20
time.thread_time_ns = lambda: _tt() // 20
time.perf_counter = lambda: time.perf_counter_ns() / 1e9
def rmsnorm(x, weight, *, eps):
    out = {BASE}
    for _ in range(2):
        out = {BASE}
    return out
""",
    # 3. the work in a thread that exits before the call returns (thread CPU clocks miss it).
    "work-in-an-exited-thread": f"""
import threading
import numpy as np
def rmsnorm(x, weight, *, eps):
    box = []
    def work():
        out = {BASE}
        for _ in range(2):
            out = {BASE}
        box.append(out)
    t = threading.Thread(target=work)
    t.start()
    t.join()
    return box[0]
""",
    # 3a. work after the reply: the slot's calls run with the worker thawed, so a thread that
    #     keeps working once the call has returned (while the judge reads the output and
    #     writes the next input) is the gap a per-call window would miss. The windows tile.
    "work-after-the-reply": f"""
import threading
import numpy as np
def _more(x, weight, eps):
    for _ in range(2):
        {BASE}
def rmsnorm(x, weight, *, eps):
    out = {BASE}
    threading.Thread(target=_more, args=(x.copy(), weight.copy(), eps)).start()
    return out
""",
    # 3b. sleeping per call: CPU time would not see it.
    "sleeps-per-call": f"""
import time
import numpy as np
def rmsnorm(x, weight, *, eps):
    time.sleep(0.003)
    return {BASE}
""",
    # 5. slowing the other arm: a thread that burns CPU all the time, and signals to any
    #    other python process it can see.
    "burns-cpu-to-slow-the-other-arm": f"""
import os, signal, threading
import numpy as np
def _burn():
    while True:
        pass
threading.Thread(target=_burn, daemon=True).start()
for pid in os.listdir("/proc"):
    if pid.isdigit() and int(pid) != os.getpid():
        try:
            os.kill(int(pid), signal.SIGSTOP)
        except OSError:
            pass
def rmsnorm(x, weight, *, eps):
    return {BASE}
""",
}


@pytest.fixture(scope="module")
def timed_task(tmp_path_factory: pytest.TempPathFactory) -> Task:
    """rmsnorm with a short measurement: enough pairs for a verdict, a few seconds each."""
    limits = """
[limits]
call_timeout_s = 5.0
load_timeout_s = 20.0
total_timeout_s = 120.0
"""
    return copy_task(tmp_path_factory.mktemp("timing"), "rmsnorm", limits)


@pytest.mark.slow
@pytest.mark.parametrize("name", sorted(ATTACKS))
def test_a_timing_trick_never_earns_improved(
    name: str, timed_task: Task, judge_source: JudgeFn
) -> None:
    opts = JudgeOptions(budget_s=6.0, min_effect=0.03)
    result = judge_source(timed_task, ATTACKS[name], opts)
    if result.verdict == "accepted":
        assert result.metrics is not None
        overall = result.metrics.overall
        assert overall.verdict != "improved", (name, overall)
        # does at least the baseline's work: never measured clearly below it (an interval,
        # when there is one, reaches above 0.9; a lone estimate without one is noise)
        ci = overall.ratio_ci
        assert ci is None or ci[1] > 0.9, (name, overall)
    else:
        assert result.metrics is None


@pytest.mark.slow
def test_wrong_only_after_many_calls_with_the_collector_on(
    timed_task: Task, judge_source: JudgeFn
) -> None:
    """Correct for the first 45 calls, then zeros while gc is enabled (the timed phase used to
    turn it off): the correctness phase makes 30 to 60 calls, at random, and the speed phase
    about 50 per process with the same gc setting and checks every output; either catches it.
    (A candidate that turns wrong only after more calls than any judged process makes is not
    caught: docs/guarantees.md.)"""
    source = f"""
import gc
import numpy as np
_n = [0]
def rmsnorm(x, weight, *, eps):
    _n[0] += 1
    if _n[0] > 45 and gc.isenabled():
        return np.zeros(x.shape, np.float32)
    return {BASE}
"""
    result = judge_source(timed_task, source, JudgeOptions(budget_s=6.0))
    if result.verdict == "accepted":
        # What the protocol guarantees, not what a quiet machine gives: on a loaded machine the
        # budget can end every process pair early, and the correctness phase can draw 45 calls
        # or fewer; then no judged process ever called it a 46th time (the documented limit).
        assert result.metrics is not None
        per_process: dict[int, int] = {}
        for w in result.metrics.workloads:
            for pair in w.pairs:
                calls = pair.warmup_calls + len(pair.b_ns)
                per_process[pair.pair] = per_process.get(pair.pair, 0) + calls
        assert max(per_process.values()) <= 45, per_process
        return
    assert "out_of_tolerance" in result.reason_codes, result.reasons


@pytest.mark.slow
def test_the_total_time_limit_is_a_hard_deadline(tmp_path: Path, judge_source: JudgeFn) -> None:
    """Sleeping just under the per-call limit in every call must not stretch a judgement
    far beyond its total limit (it did: 92 s for a 20 s limit)."""
    task = copy_task(
        tmp_path, "rmsnorm", "[limits]\ncall_timeout_s = 2.0\ntotal_timeout_s = 12.0\n"
    )
    source = f"""
import time
import numpy as np
_n = [0]
def rmsnorm(x, weight, *, eps):
    _n[0] += 1
    if _n[0] > 40:
        time.sleep(1.8)
    return {BASE}
"""
    t0 = time.monotonic()
    result = judge_source(task, source, JudgeOptions(budget_s=60.0))
    took = time.monotonic() - t0
    assert took < 12.0 + 6.0, took  # the limit, plus starting and ending workers
    if result.verdict == "accepted":
        assert result.metrics is not None
        assert result.metrics.stop.reason == "deadline"
        assert result.metrics.overall.verdict != "improved"
    else:
        assert {"timeout"} & set(result.reason_codes), result.reasons
