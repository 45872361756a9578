"""Candidates against the timed call path itself (issue 26): the worker loop, the null arm,
the levers of the softirq attack, and the ways a timed worker could go wrong unnamed.

Each is a correct rmsnorm, or a copy of the baseline's work, that behaves differently only in
timed workers (recognised, as the attack did, by being pinned to one CPU). A copy of the
baseline must never read `improved`; where the trick breaks the contract, the candidate is
rejected with the trick's name, never a `judge_error`.
"""

from __future__ import annotations

import os
import time
from pathlib import Path

import pytest

from adversarial._support import JudgeFn, copy_task
from optarena.judge import JudgeOptions, JudgeResult
from optarena.tasks import Task, load_task

BASE = "x / np.sqrt(np.mean(x * x, axis=-1, keepdims=True) + eps) * weight"
# a candidate's own loop: the worker's wire and run modules, its object, its input area
LOOP_PARTS = (Path(__file__).resolve().parent / "data" / "loop_parts.py").read_text()
TIMED = """
import os
def _timed():
    try:
        return len(os.sched_getaffinity(0)) == 1
    except OSError:
        return False
"""

# The loop taken over: at import, in a timed worker, answer the pending `load` request with
# its (predictable) id, never return from the import, and serve every later request with a
# lean loop of our own; the input area is found by walking frames up to the worker object.
TAKEOVER = (
    TIMED
    + """
import importlib.util, struct, sys
import numpy as np

def _base(x, weight, *, eps):
    return """
    + BASE
    + """

rmsnorm = _base

"""
    + LOOP_PARTS
    + """

def _serve():
    wire, run = _sibling("_wire.py"), _sibling("_run.py")
    fd_in, fd_out = int(sys.argv[1]), int(sys.argv[2])
    area = _worker_object().inputs
    wire.send(fd_out, {"ok": True, "violations": [], "id": 2})  # hello was 1, load is 2
    templates, held = {}, [None]
    while True:
        head = os.read(fd_in, 4)
        if not head:
            os._exit(0)
        if head != run.GO_MAGIC:
            msg = wire.recv(fd_in, from_judge=True, prefix=head)
            if msg.get("op") == "bind":
                args = [_view(area, a) for a in msg["args"]]
                kwargs = {k: _view(area, v) for k, v in msg["kwargs"].items()}
                templates[msg["template"]] = (args, kwargs, msg.get("in_memory"),
                                              msg.get("by_ref"))
            wire.send(fd_out, {"ok": True, "violations": [], "id": msg.get("id")})
            if msg.get("op") == "exit":
                os._exit(0)
            continue
        _, index, calls, t, m = run.GO.unpack(head + os.read(fd_in, run.GO.size - 4))
        args, kwargs, in_memory, by_ref = templates[t]
        kw = dict(kwargs)
        frame = b"\\0" * run.GO.size + os.read(fd_in, 8 * m)
        while True:
            kw["eps"] = struct.unpack_from("<d", frame, run.GO.size)[0]
            out = _base(*args, **kw)
            held[0] = out
            shape = run.SHAPES[out.ndim].pack(*out.shape)
            if by_ref:  # the least any loop can answer: the object, which the judge reads
                os.write(fd_out, run.REF.pack(run.REF_MAGIC, index, id(out)))
            elif in_memory:
                address = out.__array_interface__["data"][0]
                os.write(fd_out, run.OUT.pack(run.OUT_MAGIC, index, out.nbytes, address,
                                             run.STATUS_IN_MEMORY, out.ndim, 0, b"<f4") + shape)
            else:
                os.writev(fd_out, [run.OUT.pack(run.OUT_MAGIC, index, out.nbytes, 0,
                                                run.STATUS_ARRAY, out.ndim, 0, b"<f4") + shape,
                                   out.reshape(-1).view(np.uint8)])
            index += 1
            if index == calls:
                break
            frame = os.read(fd_in, run.GO.size + 8 * m)

if _timed():
    _serve()
"""
)

# Replaced during the first timed call (after the load, whose reply compares namespaces), each
# still computing the right thing: timed replies drained the guard without comparing them,
# and the timed phase never sent `settle`.
TIMED_PATCH = (
    TIMED
    + """
import time
import numpy as np
_T = _timed()
def rmsnorm(x, weight, *, eps):
    if _T and not hasattr(np, "_patched"):
        _real_sqrt, _real_pc = np.sqrt, time.perf_counter_ns
        np.sqrt = lambda a, *args, **kw: _real_sqrt(a, *args, **kw)
        time.perf_counter_ns = lambda: _real_pc()
        np._patched = True
    return """
    + BASE
    + "\n"
)

# Correct values as complex64, only when timed: a wrong dtype, never a judge_error.
COMPLEX_WHEN_TIMED = (
    TIMED
    + """
import numpy as np
_T = _timed()
def rmsnorm(x, weight, *, eps):
    out = """
    + BASE
    + """
    return out.astype(np.complex64) if _T else out
"""
)

# An honest candidate that sets the time zone (rebinds time.tzname and friends).
TZSET = (
    """
import time
import numpy as np
time.tzset()
def rmsnorm(x, weight, *, eps):
    time.tzset()
    return """
    + BASE
    + "\n"
)

# The levers of the softirq attack, tried from a timed worker: a user and network namespace
# of its own, a move to another CPU. Where either works, the candidate gives itself away by
# answering zeros (so the test sees the lever was there); refused, it is an honest rmsnorm.
LEVERS = (
    TIMED
    + """
import ctypes
import numpy as np
_open = []
if _timed():
    libc = ctypes.CDLL(None, use_errno=True)
    if libc.unshare(0x10000000 | 0x40000000) == 0:
        _open.append("a new user and network namespace")
    pinned = os.sched_getaffinity(0)
    try:
        os.sched_setaffinity(0, range(os.cpu_count() or 1))
    except OSError:
        pass
    if os.sched_getaffinity(0) != pinned:
        _open.append("another CPU")
def rmsnorm(x, weight, *, eps):
    if _open:
        return np.zeros(x.shape, x.dtype)
    return """
    + BASE
    + "\n"
)

DEEP = f"optarena-deep-marker-{os.getpid()}"  # this run's: a judging beside it is not ours
# A correct candidate that nests a directory 3,000 deep in its working directory.
DEEP_DIR = f"""
import os
import numpy as np
fd = os.open(".", os.O_RDONLY)
for _ in range(3000):
    os.mkdir("{DEEP}", dir_fd=fd)
    sub = os.open("{DEEP}", os.O_RDONLY, dir_fd=fd)
    os.close(fd)
    fd = sub
os.close(fd)
def rmsnorm(x, weight, *, eps):
    return {BASE}
"""

# Leaves the caches cold for whoever runs next (the null arm's slots follow the arms'):
# a 64 MiB sweep after each call, inside its own call, so it only ever costs itself.
COLD_CACHES = f"""
import numpy as np
_sweep = np.ones(8 << 20)
def rmsnorm(x, weight, *, eps):
    out = {BASE}
    _sweep.sum()
    return out
"""


# Remembers its answers (keyed by the first bytes of each input) and answers an input it has
# seen with a copy: each slot opens with a replay of an input its worker already answered, so
# this earns something only if a counted call ever gets an input its worker has seen.
MEMO = f"""
import numpy as np
_memo = {{}}
def rmsnorm(x, weight, *, eps):
    key = (x.shape, x.reshape(-1)[:16].tobytes(), weight[:16].tobytes(), float(eps))
    hit = _memo.get(key)
    if hit is not None:
        return hit.copy()
    out = {BASE}
    if len(_memo) > 64:
        _memo.clear()
    _memo[key] = out.copy()
    return out
"""


@pytest.fixture(scope="module")
def timed_task(tmp_path_factory: pytest.TempPathFactory) -> Task:
    limits = """
[limits]
call_timeout_s = 5.0
load_timeout_s = 20.0
total_timeout_s = 120.0
"""
    return copy_task(tmp_path_factory.mktemp("protocol"), "rmsnorm", limits)


# For attacks that end in the call's timeout: a short one, so the test is short.
SHORT_CALLS = """
[limits]
call_timeout_s = 2.0
load_timeout_s = 20.0
total_timeout_s = 120.0
"""


def _never_improved(result: JudgeResult, name: str) -> None:
    metrics = result.metrics
    if result.verdict == "accepted":
        assert metrics is not None
        overall = metrics.overall
        assert overall.verdict != "improved", (name, overall)
        ci = overall.ratio_ci
        assert ci is None or ci[1] > 0.9, (name, overall)
    else:
        assert metrics is None


@pytest.mark.slow
@pytest.mark.parametrize("seed", [11, 12])
def test_a_loop_taken_over_never_reads_improved(
    seed: int, timed_task: Task, judge_source: JudgeFn
) -> None:
    """The lean loop saved the real loop's timed bookkeeping (0.81-0.89 for a copy of the
    baseline; later 0.91-0.93, a red team's loop that skipped the worker's description of
    each output). Now a call is answered with the output object's address, which the judge
    reads itself, and the worker's loop sets one scalar inline: this loop, which answers the
    same way, keeps only the worker's call of the entry to skip."""
    result = judge_source(timed_task, TAKEOVER, JudgeOptions(budget_s=8.0, seed=seed))
    _never_improved(result, "takeover")


@pytest.mark.slow
def test_patching_numpy_or_the_clock_only_when_timed_is_named(
    timed_task: Task, judge_source: JudgeFn
) -> None:
    result = judge_source(timed_task, TIMED_PATCH, JudgeOptions(budget_s=4.0))
    assert result.verdict == "rejected", result.reasons
    assert {"numpy_patched", "clock_patched"} & set(result.reason_codes), result.reasons
    assert result.metrics is None


@pytest.mark.slow
def test_a_complex_output_only_when_timed_is_a_wrong_dtype(
    timed_task: Task, judge_source: JudgeFn
) -> None:
    result = judge_source(timed_task, COMPLEX_WHEN_TIMED, JudgeOptions(budget_s=4.0))
    assert result.verdict == "rejected"
    assert "wrong_dtype" in result.reason_codes and "judge_error" not in result.reason_codes


def test_an_honest_tzset_is_not_a_patched_clock(timed_task: Task, judge_source: JudgeFn) -> None:
    result = judge_source(timed_task, TZSET)
    assert result.verdict == "accepted", result.reasons


@pytest.mark.slow
def test_the_levers_of_the_softirq_attack_are_closed_in_timed_workers(
    timed_task: Task, judge_source: JudgeFn
) -> None:
    result = judge_source(timed_task, LEVERS, JudgeOptions(budget_s=4.0))
    assert result.verdict == "accepted", result.reasons
    sandbox = result.sandbox
    assert sandbox["seccomp"].startswith("filter"), sandbox


@pytest.mark.slow
def test_a_directory_nested_3000_deep_is_judged_and_removed(
    timed_task: Task, judge_source: JudgeFn, tmp_path: Path
) -> None:
    import glob
    import tempfile

    def deep_dirs() -> set[str]:
        root = tempfile.gettempdir()
        return {
            p
            for pattern in ("*", "*/*", "*/*/*", "*/*/*/*")
            for p in glob.glob(f"{root}/optarena-judge-*/{pattern}/{DEEP}")
        }

    before = deep_dirs()
    result = judge_source(timed_task, DEEP_DIR, JudgeOptions(budget_s=3.0))
    assert result.verdict == "accepted", result.reasons
    assert deep_dirs() <= before  # nothing of this judgement's is left


@pytest.mark.slow
def test_cold_caches_left_for_the_null_arm_earn_nothing(
    timed_task: Task, judge_source: JudgeFn
) -> None:
    result = judge_source(timed_task, COLD_CACHES, JudgeOptions(budget_s=6.0))
    _never_improved(result, "cold caches")


@pytest.mark.slow
def test_remembering_the_replayed_input_earns_nothing(
    timed_task: Task, judge_source: JudgeFn
) -> None:
    """The slot's replay is an input the worker answered before, never a counted one: a
    replay of the slot's first counted input (look-ahead) answered it for free."""
    result = judge_source(timed_task, MEMO, JudgeOptions(budget_s=6.0))
    _never_improved(result, "memo")
    assert "judge_error" not in result.reason_codes, result.reasons


# Against verdicts from the interval (an effect of 1.5-3% whose interval excludes no change now
# reads improved where the estimate once had to pass 3%): a copy of the baseline that keeps
# every temporary and output of its counted calls alive and lets them all go in the slot's
# uncounted replay (the input it answered last, told apart by its first bytes), so the frees
# a caller's loop pays per call fall outside every counted window.
DEFER_TO_REPLAY = """
import numpy as np
_kept = []
_last = None
def rmsnorm(x, weight, *, eps):
    global _last
    key = (x.shape, x.reshape(-1)[:16].tobytes())
    if key == _last:
        _kept.clear()
    _last = key
    sq = x * x
    ms = np.mean(sq, axis=-1, keepdims=True)
    den = np.sqrt(ms + eps)
    normed = x / den
    out = normed * weight
    _kept.extend((sq, ms, den, normed, out))
    return out
"""


@pytest.mark.slow
def test_frees_deferred_to_the_replay_earn_nothing(timed_task: Task, judge_source: JudgeFn) -> None:
    """The replay carries no new input, but a candidate can tell it apart and do there what it
    put off in its counted calls (here: freeing their temporaries and outputs). CPU the worker
    spends in it is still the run's, but not a counted call's."""
    result = judge_source(timed_task, DEFER_TO_REPLAY, JudgeOptions(budget_s=6.0))
    _never_improved(result, "frees deferred to the replay")
    assert "judge_error" not in result.reason_codes, result.reasons


REACH = {
    # the loop's objects through the collector: its Worker, pipes, input area, templates
    "gc": "import gc\n_found = [o for o in gc.get_objects() if type(o).__name__ == 'Worker']\n",
    # a frame of the worker loop itself, taken by depth
    "frame": "import sys\n_f = sys._getframe(3)\n",
    # every thread's frames, the loop's among them
    "threads": "import sys\n_f = sys._current_frames()\n",
}


@pytest.mark.parametrize("how", sorted(REACH))
def test_reaching_for_the_worker_loops_objects_is_named(
    how: str, timed_task: Task, judge_source: JudgeFn
) -> None:
    source = (
        REACH[how] + f"import numpy as np\ndef rmsnorm(x, weight, *, eps):\n    return {BASE}\n"
    )
    result = judge_source(timed_task, source)
    assert result.verdict == "rejected"
    assert "worker_tampered" in result.reason_codes, result.reasons


def test_an_honest_look_at_its_own_frame_is_fine(timed_task: Task, judge_source: JudgeFn) -> None:
    """`logging` and `warnings` take the caller's frame: the candidate's own, not the loop's."""
    source = f"""
import logging, sys, warnings
import numpy as np
logging.getLogger("cand").warning("loaded")
def rmsnorm(x, weight, *, eps):
    sys._getframe(0)
    warnings.warn("a warning from the candidate", stacklevel=1)
    return {BASE}
"""
    result = judge_source(timed_task, source)
    assert result.verdict == "accepted", result.reasons


DATA = Path(__file__).resolve().parent / "data"


@pytest.mark.slow
def test_helpers_dying_in_the_other_arms_slots_earn_nothing(
    timed_task: Task, judge_source: JudgeFn
) -> None:
    """An independent attack (10 of 10 `improved` at about 0.45): helper processes spawned at
    load, stopped, then let die of a fatal timer while the candidate is frozen, so their exits
    ran during the baseline's calls; and a sleep per call that switched the verdict to the
    wall clock, which carried those exits. Now a process left after the load or a slot is
    named at once, CPU the cgroup uses while frozen is charged to its next run, and an
    improvement must show on both clocks."""
    source = (DATA / "dying_helpers.py").read_text()
    result = judge_source(timed_task, source, JudgeOptions(budget_s=10.0, seed=121))
    _never_improved(result, "dying helpers")
    assert "judge_error" not in result.reason_codes, result.reasons


def _forged_header(forge: str) -> str:
    """The forged output header candidate (`data/forged_header.py`) forging `forge`."""
    source = (DATA / "forged_header.py").read_text()
    assert 'FORGE = "shape"' in source
    return source.replace('FORGE = "shape"', f"FORGE = {forge!r}")


@pytest.mark.parametrize(
    ("name", "options"),
    [
        ("forged_header:shape", JudgeOptions(budget_s=3.0)),  # timed: an output frame header
        ("forged_header:dtype", JudgeOptions(budget_s=3.0)),  # timed: checked after the run
        ("forged_reply_shape", JudgeOptions(measure=False)),  # correctness: a JSON reply
        ("forged_violations", JudgeOptions(measure=False)),  # a guard report that is a number
    ],
)
def test_a_forged_reply_the_judge_cannot_use_is_a_protocol_violation(
    name: str, options: JudgeOptions, timed_task: Task, judge_source: JudgeFn
) -> None:
    """Shapes such as (0, 2**62) hold no byte yet make NumPy raise, and a number where a list
    belongs made the judge raise: each ended in judge_error, or a traceback out of compare."""
    file, _, forge = name.partition(":")
    source = _forged_header(forge) if forge else (DATA / f"{file}.py").read_text()
    result = judge_source(timed_task, source, options)
    assert result.verdict == "rejected"
    assert "judge_error" not in result.reason_codes, result.reasons
    assert "protocol_violation" in result.reason_codes, result.reasons


def test_an_output_header_without_its_shape_cannot_hold_the_judge(
    tmp_path: Path, judge_source: JudgeFn
) -> None:
    """The hot path reads the reply pipe without blocking: a header whose shape never comes
    (the call then sleeps) ends in the call's timeout, not in a judge waiting forever."""
    task = copy_task(tmp_path, "rmsnorm", SHORT_CALLS)
    t0 = time.monotonic()
    source = _forged_header("no-shape")
    result = judge_source(task, source, JudgeOptions(budget_s=3.0))
    assert result.verdict == "rejected"
    assert "judge_error" not in result.reason_codes, result.reasons
    assert "timeout" in result.reason_codes, result.reasons
    assert time.monotonic() - t0 < 60  # the call's timeout is 2 s


@pytest.mark.parametrize("when", ["load", "timed"])
def test_a_request_pipe_never_drained_cannot_hold_the_judge(
    when: str, tmp_path: Path, judge_source: JudgeFn
) -> None:
    """The judge's writes to a worker wait in poll with the call's deadline: a worker that
    shrinks the request pipe to a page and always leaves a byte of it unread (found by a
    red-team session: the judge then blocked in write for ever, both on a correctness request
    and on a timed call's go frame) ends in a timeout, not a judge waiting for ever."""
    task = copy_task(tmp_path, "rmsnorm", SHORT_CALLS)
    # The page fills after about 146 go frames (28 bytes each): the short decode calls only, and
    # enough of them per slot that a short budget times more than that in the candidate's arm.
    toml = task.root / "task.toml"
    text = toml.read_text()
    for old, new in [
        ("budget_s = 30.0", "budget_s = 30.0\ncalls_per_slot = 48"),
        ('name = "prefill"\nrole = "timed"', 'name = "prefill"\nrole = "check"'),
    ]:
        assert old in text, "the rmsnorm task changed: update this test"
        text = text.replace(old, new)
    toml.write_text(text)
    task = load_task(task.root)
    source = (DATA / "request_pipe_never_drained.py").read_text()
    source = source.replace('WHEN = "load"', f'WHEN = "{when}"')
    t0 = time.monotonic()
    result = judge_source(task, source, JudgeOptions(budget_s=3.0))
    assert result.verdict == "rejected"
    assert "judge_error" not in result.reason_codes, result.reasons
    assert "timeout" in result.reason_codes, result.reasons
    assert time.monotonic() - t0 < 60  # the call's timeout is 2 s
