"""Pure parts of the speed phase: CPU against wall time, output checks, sizing."""

from __future__ import annotations

import numpy as np
import pytest

# private: the speed protocol's pure checks and rules, tested on literal calls
from optarena.judge.speed._checks import (
    TimedInput,
    call_bytes,
    fingerprint,
    first_failure,
    prefault_mb,
    within_tolerance,
)
from optarena.judge.speed._integrity import ArmCalls, check_waiting, waiting_share
from optarena.judge.speed._measure import choose_clock
from optarena.judge.speed._report import checked
from optarena.judge.speed._samples import MAX_SLOT_CALLS, round_factor, slot_calls
from optarena.records import Integrity, Summary
from optarena.tasks import Tolerance

US = 1000


def _arm(cpu_us: float, wait_us: float, pairs: int = 3, n: int = 8) -> list[ArmCalls]:
    """Per pair n calls that used cpu_us on a CPU and waited wait_us besides."""
    return [
        ArmCalls(
            wall=[int((cpu_us + wait_us + i) * US) for i in range(n)],
            cpu=[int((cpu_us + i) * US) for i in range(n)],
        )
        for _ in range(pairs)
    ]


def test_honest_arms_wait_alike() -> None:
    ref = _arm(cpu_us=1000, wait_us=40)
    fast = _arm(cpu_us=500, wait_us=20)  # genuinely 2x faster
    assert check_waiting(fast, ref).passed and check_waiting(ref, fast).passed
    assert waiting_share(ref[0]) == pytest.approx(40 / 1043.5, rel=1e-3)


def test_under_load_the_slower_arm_waits_longer_but_not_a_larger_share() -> None:
    """A busy machine preempts per unit of time: a baseline 4x slower than an honest
    candidate waits 4x longer per call. The absolute allowance read that as hidden work and
    timed the comparison on the wall clock (a pthreads gemm read clock=wall at 0.24)."""
    slow = _arm(cpu_us=2000, wait_us=400)
    fast = _arm(cpu_us=500, wait_us=100)
    assert check_waiting(slow, fast).passed and check_waiting(fast, slow).passed


def test_an_arm_that_sleeps_is_timed_on_the_wall_clock() -> None:
    ref = _arm(cpu_us=1000, wait_us=40)
    sleeper = _arm(cpu_us=100, wait_us=2000)  # sleeps per call: little CPU, a long wait
    c = check_waiting(sleeper, ref)
    assert not c.passed and c.excess_ns == pytest.approx(0.91e9, rel=0.01)  # 95% less 4%
    checks = [
        Integrity(arm="b", workload="w", clock="cpu", passed=c.passed, detail=c.detail,
                  excess_ns=c.excess_ns, allowed_ns=c.allowed_ns),
    ]  # fmt: skip
    clock, note = choose_clock(checks)
    assert clock == "wall" and "arm b" in note and "waits" in note
    assert choose_clock([])[0] == "cpu"


def test_waiting_in_only_one_pair_is_noise() -> None:
    ref = _arm(cpu_us=1000, wait_us=40)
    sub = _arm(cpu_us=1000, wait_us=40)
    sub[1] = _arm(cpu_us=1000, wait_us=5000, pairs=1)[0]  # a busy moment in one pair
    assert check_waiting(sub, ref).passed


def test_one_honest_pair_does_not_hide_the_others() -> None:
    """The softirq attack played honest in its first pair (counted through a file): a rule
    that needed the difference in every pair never fired."""
    ref = _arm(cpu_us=1000, wait_us=40, pairs=6)
    sub = _arm(cpu_us=300, wait_us=900, pairs=6)
    sub[0] = ref[0]
    c = check_waiting(sub, ref)
    assert not c.passed and "5 of 6" in c.detail


def test_no_cpu_accounting_means_wall_time() -> None:
    ref = _arm(1000, 40)
    blind = [ArmCalls(wall=[1000 * US] * 8, cpu=[]) for _ in range(3)]
    c = check_waiting(blind, ref)
    assert not c.passed and c.excess_ns is None and "no CPU accounting" in c.detail
    few = check_waiting(_arm(100, 5000, pairs=1), ref[:1])
    assert few.passed and "too few process pairs" in few.detail


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
    assert first_failure(good, _inp(ref), np.float32, tol, earlier) is None
    stale = first_failure(good, _inp(ref), np.float32, tol, earlier)
    assert stale is not None and stale.code == "stale_output"
    wrong = first_failure(good * 2, _inp(ref), np.float32, tol, None)
    assert wrong is not None and wrong.code == "out_of_tolerance"
    nan = good.copy()
    nan[0, 0] = np.nan
    bad = first_failure(nan, _inp(ref), np.float32, tol, None)
    assert bad is not None and bad.code == "non_finite"
    f64 = first_failure(good.astype(np.float64), _inp(ref), np.float32, tol, None)
    assert f64 is not None and f64.code == "wrong_dtype"


def test_fingerprint_identifies_replays_only() -> None:
    a = np.arange(1_000_000, dtype=np.float32)
    assert fingerprint(a) == fingerprint(a.copy())
    assert fingerprint(a) != fingerprint(a + 1)
    assert fingerprint(a) != fingerprint(a.reshape(1000, 1000))


def test_slot_sizing_and_prefault() -> None:
    assert slot_calls(per_call_ns=100_000, per_call_bytes=1 << 20, least=3) == 20
    assert slot_calls(per_call_ns=5_000_000, per_call_bytes=1 << 20, least=3) == 3
    assert slot_calls(per_call_ns=1_000, per_call_bytes=1 << 10, least=3) == MAX_SLOT_CALLS
    assert slot_calls(per_call_ns=1_000, per_call_bytes=32 << 20, least=3) == 3  # memory cap
    assert [round_factor(ns) for ns in (100_000, 1_000_000, 5_000_000)] == [2, 1, 1]
    ref = np.zeros((256, 1024))
    inputs = [_inp(ref)] * 4
    assert call_bytes(inputs) == 3 * ref.size * 4
    with pytest.raises(RuntimeError):
        TimedInput([], {}, []).expected()  # no oracle answer before both arms have run
    assert prefault_mb(100 << 20, memory_mb=4096) == 166
    assert prefault_mb(10 << 30, memory_mb=4096) == 1024


def _summary(verdict: str, ratio: float) -> Summary:
    return Summary(
        ratio=ratio, ratio_ci=[ratio * 0.97, ratio * 1.03], speedup=1 / ratio,
        speedup_ci=None, verdict=verdict, why="literal", pairs=6, outliers=0, notes=[],
    )  # fmt: skip


def test_an_improvement_must_show_on_both_clocks() -> None:
    """CPU time misses work done outside the worker's CPU, the wall clock counts whatever ran
    on the shared CPU during an arm's calls: only their agreement reads improved."""
    cpu_yes, wall_no = _summary("improved", 0.8), _summary("inconclusive", 1.02)
    final, other = checked(cpu_yes, wall_no, "cpu")
    assert final.verdict == "inconclusive" and "wall time does not" in final.why
    assert other is wall_no and final.ratio == cpu_yes.ratio
    # the attack's shape: the wall clock (forced) says improved, CPU time says slower
    final, _ = checked(_summary("improved", 0.42), _summary("regressed", 1.1), "wall")
    assert final.verdict == "inconclusive" and "cpu time does not" in final.why
    both = checked(cpu_yes, _summary("improved", 0.82), "cpu")[0]
    assert both.verdict == "improved"
    # other verdicts stand on the primary clock; no other clock, no check
    assert checked(_summary("regressed", 1.2), wall_no, "cpu")[0].verdict == "regressed"
    assert checked(cpu_yes, None, "wall")[0].verdict == "improved"
