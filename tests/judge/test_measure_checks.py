"""Pure parts of the speed phase: the OS cross-check, reply validation, output checks, sizing."""

from __future__ import annotations

import os

import numpy as np
import pytest

from optarena.judge._integrity import (
    BatchObservation,
    check_against_reference,
    cpu_time_ns,
    minor_faults,
)
from optarena.judge._measure import choose_clock, tampering
from optarena.judge._measure_checks import (
    TimedInput,
    call_bytes,
    fingerprint,
    first_failure,
    prefault_mb,
    reply_problem,
    within_tolerance,
)
from optarena.judge._measure_pair import MAX_SLOT_CALLS, round_factor, slot_calls
from optarena.judge._metrics import Integrity
from optarena.tasks import Tolerance

US = 1000


def _batches(
    call_us: int, reported_us: int, overhead_us: int, extra_cpu_us: int = 0, pairs: int = 3
) -> list[list[BatchObservation]]:
    """Per pair four batches of 4 calls: each call takes call_us, the worker claims reported_us."""
    return [
        [
            BatchObservation(
                calls=4,
                reported_wall_ns=4 * reported_us * US,
                reported_cpu_ns=4 * reported_us * US,
                wall_ns=(4 * call_us + overhead_us + i) * US,
                cpu_ns=(4 * call_us + overhead_us + extra_cpu_us + i) * US,
            )
            for i in range(4)
        ]
        for _ in range(pairs)
    ]


def test_honest_arms_agree_with_the_os() -> None:
    ref = _batches(call_us=1000, reported_us=1000, overhead_us=800)
    fast = _batches(call_us=500, reported_us=500, overhead_us=800)  # genuinely 2x faster
    for clock in ("wall", "cpu"):
        assert check_against_reference(fast, ref, clock).passed
        assert check_against_reference(ref, fast, clock).passed


def test_a_clock_that_reports_a_quarter_of_the_time_is_tampering() -> None:
    ref = _batches(call_us=1000, reported_us=1000, overhead_us=800)
    liar = _batches(call_us=1000, reported_us=250, overhead_us=800)
    c = check_against_reference(liar, ref, "wall")
    assert not c.passed and c.excess_ns == pytest.approx(750 * US)
    assert "OS saw" in c.detail


def test_work_outside_the_calling_thread_fails_only_the_cpu_check() -> None:
    ref = _batches(call_us=1000, reported_us=1000, overhead_us=800)
    helper = _batches(call_us=1000, reported_us=1000, overhead_us=800, extra_cpu_us=3000)
    assert check_against_reference(helper, ref, "wall").passed
    cpu = check_against_reference(helper, ref, "cpu")
    assert not cpu.passed
    checks = [
        Integrity(
            arm="b",
            workload="w",
            clock="cpu",
            passed=False,
            detail=cpu.detail,
            excess_ns=cpu.excess_ns,
            allowed_ns=cpu.allowed_ns,
        ),
    ]
    clock, note = choose_clock(checks)
    assert clock == "wall" and "arm b" in note
    assert choose_clock([])[0] == "cpu"
    assert tampering(checks, subjects=("b",)) is None  # CPU alone: fall back, not reject


def test_tampering_needs_both_clocks_to_miss_time() -> None:
    def check(arm: str, clock: str, passed: bool) -> Integrity:
        return Integrity(arm=arm, workload="w", clock=clock, passed=passed, detail=clock,
                         excess_ns=1.0, allowed_ns=0.0)  # fmt: skip

    wall_only = [check("b", "wall", False), check("b", "cpu", True)]
    assert tampering(wall_only, ("b",)) is None  # wall noise on a loaded machine
    both = [check("b", "wall", False), check("b", "cpu", False)]
    found = tampering(both, ("b",))
    assert found is not None and found.arm == "b"
    assert tampering(both, ("a",)) is None  # only subjects are judged (the baseline is not)
    # CPU time missing and wall time short by most of its allowance: also tampering
    short = Integrity(arm="b", workload="w", clock="wall", passed=True, detail="",
                      excess_ns=900.0, allowed_ns=1000.0)  # fmt: skip
    assert tampering([short, check("b", "cpu", False)], ("b",)) is not None
    honest = short.model_copy(update={"excess_ns": 50.0})  # helper threads, wall in full
    assert tampering([honest, check("b", "cpu", False)], ("b",)) is None


def test_no_os_accounting_is_said_not_guessed() -> None:
    ref = _batches(1000, 1000, 800)
    blind = [[BatchObservation(4, 4000 * US, 4000 * US, 4800 * US, None)] * 4] * 3
    c = check_against_reference(blind, ref, "cpu")
    assert c.passed and c.excess_ns is None and "no OS accounting" in c.detail
    few = check_against_reference(_batches(1000, 10, 800, pairs=1), ref[:1], "wall")
    assert few.passed and "too few process pairs" in few.detail


def test_a_slow_process_in_one_pair_is_not_tampering() -> None:
    ref = _batches(call_us=1000, reported_us=1000, overhead_us=3000)
    sub = _batches(call_us=1000, reported_us=1000, overhead_us=3000)
    sub[1] = _batches(call_us=1000, reported_us=1000, overhead_us=9000, pairs=1)[0]
    assert check_against_reference(sub, ref, "wall").passed


def test_os_accounting_of_this_process() -> None:
    ns, source = cpu_time_ns(os.getpid())
    assert source in ("schedstat", "stat") and ns is not None and ns > 0
    assert (minor_faults(os.getpid()) or 0) > 0
    assert cpu_time_ns(2**22 + 12345) == (None, "unavailable")


def _reply(n: int, **over: object) -> dict:
    base = {
        "elapsed_ns": [1000] * n,
        "cpu_ns": [900] * n,
        "outputs": [None] * n,
        "inputs_modified": [False] * n,
        "aliases": [False] * n,
    }
    return {**base, **over}


def test_reply_validation() -> None:
    assert reply_problem(_reply(2), 2) is None
    assert reply_problem(_reply(2), 3).code == "protocol_violation"  # type: ignore[union-attr]
    bad_type = _reply(2, elapsed_ns=[1.5, 2])
    assert reply_problem(bad_type, 2).code == "protocol_violation"  # type: ignore[union-attr]
    zero = reply_problem(_reply(2, elapsed_ns=[0, 1000]), 2)
    assert zero is not None and zero.code == "timing_tampered"
    cpu_beyond_wall = reply_problem(_reply(1, elapsed_ns=[1_000_000], cpu_ns=[5_000_000]), 1)
    assert cpu_beyond_wall is not None and cpu_beyond_wall.code == "timing_tampered"


def _inp(ref: np.ndarray) -> TimedInput:
    x = ref.astype(np.float32)
    return TimedInput([x], {}, [x], ref)


def test_output_checks_fast_path_and_details() -> None:
    tol = Tolerance(atol=1e-5, rtol=1e-4)
    rng = np.random.default_rng(0)
    ref = rng.standard_normal((8, 16))
    good = ref.astype(np.float32)
    assert within_tolerance(good, _inp(ref), tol)
    assert not within_tolerance(good * 1.01, _inp(ref), tol)
    earlier: set[bytes] = set()
    reply = _reply(1, outputs=[good])
    assert first_failure(reply, 0, _inp(ref), np.float32, tol, earlier) is None
    stale = first_failure(reply, 0, _inp(ref), np.float32, tol, earlier)
    assert stale is not None and stale.code == "stale_output"
    wrong = first_failure(_reply(1, outputs=[good * 2]), 0, _inp(ref), np.float32, tol, None)
    assert wrong is not None and wrong.code == "out_of_tolerance"
    nan = good.copy()
    nan[0, 0] = np.nan
    bad = first_failure(_reply(1, outputs=[nan]), 0, _inp(ref), np.float32, tol, None)
    assert bad is not None and bad.code == "non_finite"
    mutated = _reply(1, outputs=[good.copy()], inputs_modified=[True])
    found = first_failure(mutated, 0, _inp(ref), np.float32, tol, None)
    assert found is not None and found.code == "input_mutated"
    obj = first_failure(
        _reply(1, outputs=[{"__obj__": "list"}]), 0, _inp(ref), np.float32, tol, None
    )
    assert obj is not None and obj.code == "wrong_type"


def test_fingerprint_identifies_replays_only() -> None:
    a = np.arange(1_000_000, dtype=np.float32)
    assert fingerprint(a) == fingerprint(a.copy())
    assert fingerprint(a) != fingerprint(a + 1)
    assert fingerprint(a) != fingerprint(a.reshape(1000, 1000))


def test_slot_sizing_and_prefault() -> None:
    assert slot_calls(per_call_ns=100_000, per_call_bytes=1 << 20, least=3) == 10
    assert slot_calls(per_call_ns=5_000_000, per_call_bytes=1 << 20, least=3) == 3
    assert slot_calls(per_call_ns=1_000, per_call_bytes=1 << 10, least=3) == MAX_SLOT_CALLS
    assert slot_calls(per_call_ns=1_000, per_call_bytes=32 << 20, least=3) == 3  # memory cap
    assert [round_factor(ns) for ns in (100_000, 1_000_000, 5_000_000)] == [2, 1, 1]
    ref = np.zeros((256, 1024))
    inputs = [_inp(ref)] * 4
    assert call_bytes(inputs) == 4 * ref.size * 4
    with pytest.raises(RuntimeError):
        TimedInput([], {}, []).expected()  # no oracle answer before both arms have run
    assert prefault_mb(100 << 20, memory_mb=4096) == 166
    assert prefault_mb(10 << 30, memory_mb=4096) == 1024
