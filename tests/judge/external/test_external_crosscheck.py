"""The OS's check of an external benchmark's metric, on literal numbers: over whole runs, and
over the difference between the scale's two sizes (with the candidate's tricks at each)."""

from __future__ import annotations

import math
import random

# private: the OS cross-check and a round's log-ratio, tested on literal readings
from optarena.judge.external._bench import LOG_RATIO_CAP, metric_log_ratio
from optarena.judge.external._crosscheck import os_check
from optarena.judge.speed import Estimate, estimate, summarize
from optarena.records import BenchmarkRound, OsCheck, ScaleRuns


def _rounds(metric: float, cpu: list[float] | None, wall: list[float]) -> list[BenchmarkRound]:
    """Rounds with a metric ratio `metric` and the candidate's OS times per round (the
    baseline's are 1.0 s): varied, as measured times are, so an interval exists."""
    return [
        BenchmarkRound(
            order="AB" if i % 2 == 0 else "BA", baseline=1.0, candidate=metric,
            baseline_wall_s=1.0, candidate_wall_s=w, baseline_cpu_s=cpu and 1.0,
            candidate_cpu_s=cpu and cpu[i], log_ratio=math.log(metric),
        )
        for i, w in enumerate(wall)
    ]  # fmt: skip


SAME = [1.02, 0.97, 1.05, 0.96, 1.01, 0.99]  # the OS's time did not move
FASTER = [0.42, 0.47, 0.40, 0.45, 0.43, 0.44]  # it did, less than the metric (start-up)
NOISY = [0.9, 1.6, 0.5, 1.4, 0.6, 1.3]  # a loaded machine's wall time


def _check(rounds: list[BenchmarkRound], metric_is_wall: bool = False) -> OsCheck:
    return os_check(rounds, _metric(rounds), metric_is_wall, 0.05, seed=1)


def _metric(rounds: list[BenchmarkRound]) -> Estimate:
    return estimate([r.log_ratio for r in rounds], 0.95, seed=1, min_n=4)


def test_a_benchmark_that_lies_about_itself_is_reported() -> None:
    """Whole runs: a metric 100x faster while the OS's CPU time does not move is not
    confirmed; CPU time is preferred to wall time, which a loaded machine disturbs; the OS's
    effect only has to exclude no change, not match the metric's size."""
    c = _check(_rounds(0.01, SAME, SAME))
    assert c.outcome == "unresolved" and c.basis == "process" and c.clock == "cpu"
    assert "CPU time of the whole runs does not confirm" in c.why and "metric ratio 0.010" in c.why
    assert c.advice is not None and "scale = { low = 1, high = N }" in c.advice
    assert _check(_rounds(0.01, FASTER, NOISY)).outcome == "confirmed"  # the wall noise is moot
    c = _check(_rounds(0.01, None, NOISY))  # no CPU time: wall, and it does not confirm
    assert c.outcome == "unresolved" and c.clock == "wall"
    assert _check(_rounds(0.01, None, FASTER)).outcome == "confirmed"
    assert _check(_rounds(0.01, SAME, SAME), metric_is_wall=True).outcome == "not_needed"
    # the direction matters: a 'regression' the OS shows as a speed-up is contradicted
    c = _check(_rounds(3.0, FASTER, FASTER))
    assert c.outcome == "contradicted" and "metric ratio 3.000" in c.why and c.advice is None
    assert _check(_rounds(1.01, SAME, SAME)).outcome == "not_needed"  # below min_effect


def test_the_effect_checked_is_the_verdicts_estimate_not_a_median() -> None:
    """Two outlier rounds in six: the median claimed no effect (0.969) while the verdict's
    Hodges-Lehmann estimate read 0.888 `improved` (CI, an A/A cheat on primes), and the OS
    was never asked. The OS is asked where the verdict's estimate is beyond min_effect."""
    rounds = _rounds(0.97, SAME, SAME)
    for i in (1, 4):
        rounds[i] = rounds[i].model_copy(update={"candidate": 0.5, "log_ratio": math.log(0.5)})
    logs = [r.log_ratio for r in rounds]
    assert math.exp(sorted(logs)[3]) > 0.95  # the median: within 5%
    c = _check(rounds)
    assert c.outcome == "unresolved" and c.metric_ratio < 0.95  # asked, and not confirmed
    assert _check(_rounds(0.97, SAME, SAME)).outcome == "not_needed"  # negative control


def test_an_effect_the_interval_decides_is_asked_though_its_estimate_is_within_min_effect() -> None:
    """The verdict is the interval's: metric ratios around 0.96 whose interval excludes 1 and
    reaches below 0.95 read `improved` with an estimate inside min_effect (5%). Such an
    improvement must go to the OS too; asked only beyond min_effect, it went out unchecked."""
    ratios = [0.93, 0.975, 0.94, 0.98, 0.955, 0.965]
    rounds = [
        r.model_copy(update={"candidate": x, "log_ratio": math.log(x)})
        for r, x in zip(_rounds(0.96, SAME, SAME), ratios, strict=True)
    ]
    m = _metric(rounds)
    assert m.estimate is not None and m.lo is not None and m.hi is not None
    assert abs(m.estimate) < math.log1p(0.05) and m.hi < 0 < -m.lo - math.log1p(0.05)
    c = _check(rounds)
    assert c.outcome == "unresolved" and "does not confirm" in c.why  # asked; the OS is flat
    # negative control: an interval inside +-min_effect is no difference, and not asked
    flat = [0.985, 0.995, 0.99, 1.0, 0.99, 0.995]
    rounds = [
        r.model_copy(update={"candidate": x, "log_ratio": math.log(x)})
        for r, x in zip(_rounds(0.99, SAME, SAME), flat, strict=True)
    ]
    assert _check(rounds).outcome == "not_needed"


def test_identical_os_times_give_no_interval_and_no_confirmation() -> None:
    c = _check(_rounds(0.01, [1.0] * 6, [1.0] * 6))
    assert c.outcome == "unresolved" and c.ratio_ci is None


def _scaled(
    metric: float, base: tuple[float, float], cand: tuple[float, float], rounds: int = 8
) -> list[BenchmarkRound]:
    """Rounds at two sizes: CPU seconds (low, high) of each arm, each run off by up to 20 ms
    on its own (fixed-seed noise: a shared machine's, and a compiler's run to run)."""
    rng = random.Random(7)
    out = []
    for i in range(rounds):
        bl, bh, cl, ch = (t + rng.uniform(-0.02, 0.02) for t in (*base, *cand))
        low = ScaleRuns(
            baseline=1.0, candidate=metric, baseline_wall_s=bl, candidate_wall_s=cl,
            baseline_cpu_s=bl, candidate_cpu_s=cl,
        )  # fmt: skip
        out.append(
            BenchmarkRound(
                order="AB" if i % 2 == 0 else "BA", baseline=1.0, candidate=metric,
                baseline_wall_s=bh, candidate_wall_s=ch, baseline_cpu_s=bh, candidate_cpu_s=ch,
                log_ratio=math.log(metric), low=low,
            )
        )  # fmt: skip
    return out


def _whole_runs_at_low_size(rounds: list[BenchmarkRound]) -> list[BenchmarkRound]:
    """The same rounds as if no scale were declared: each arm's low-size run alone."""
    out = []
    for r in rounds:
        assert r.low is not None
        cpu = {"baseline_cpu_s": r.low.baseline_cpu_s, "candidate_cpu_s": r.low.candidate_cpu_s}
        out.append(r.model_copy(update={**cpu, "low": None}))
    return out


def test_an_improvement_confined_to_the_scaled_part_is_confirmed_by_the_difference() -> None:
    """The stencil's shape: 1.0 s of building and start-up, 0.01 s per call of the kernel at
    the low size (1 call) and 0.48 s at the high size (48 calls); the candidate's kernel is 8x
    faster. Whole runs at one size cannot see 1% of a run through the jitter; the difference
    between sizes sees the kernel alone, and gives about the metric's ratio."""
    base, cand = (1.010, 1.480), (1.001, 1.060)
    c = _check(_scaled(0.125, base, cand))
    assert c.outcome == "confirmed" and c.basis == "scaled_difference" and c.clock == "cpu"
    assert c.ratio is not None and 0.1 < c.ratio < 0.15
    assert c.ratio_ci is not None and c.ratio_ci[1] < 1
    # whole runs at the low size (no scale): the same improvement is beyond the OS's resolution
    alone = _check(_whole_runs_at_low_size(_scaled(0.125, base, cand)))
    assert alone.outcome == "unresolved" and alone.basis == "process"


def test_time_added_to_the_low_size_run_never_reads_faster() -> None:
    """The candidate's code sees the size (its argv, how many calls it got) and burns CPU at
    the low size only, so its own difference shrinks to nothing: a plain difference would read
    100x faster. Its high-size run is no faster than the baseline's, and that is what counts:
    its scaled part is measured from the baseline's low-size run."""
    base = (1.010, 1.480)
    cheat = (1.470, 1.480)  # no faster at the high size; 0.46 s burnt at the low size
    c = _check(_scaled(0.01, base, cheat))  # and a forged metric
    assert c.outcome != "confirmed", c.why
    assert c.ratio is not None and c.ratio > 0.95


def test_work_moved_into_start_up_is_counted_against_the_candidate() -> None:
    """A kernel really 8x faster per call that does 0.6 s of work at start-up (which a plain
    difference cancels): at the high size the whole run is slower, so it is not an
    improvement of the benchmark, and the OS says the opposite of the metric."""
    base = (1.010, 1.480)
    startup = (1.601, 1.660)  # 8x faster per call, 0.6 s more at start-up
    c = _check(_scaled(0.125, base, startup))
    assert c.outcome == "contradicted", c.why
    assert c.ratio is not None and c.ratio > 1


def test_a_scaled_part_within_the_noise_is_unresolved_with_advice() -> None:
    """A high size barely above the low one: the baseline's difference is no larger than the
    runs' jitter in some rounds, so the OS cannot resolve anything; the advice says what the
    spec could change, and the outcome is not a contradiction."""
    c = _check(_scaled(0.125, (1.010, 1.015), (1.001, 1.002)))
    assert c.outcome == "unresolved" and c.ratio is None
    assert "within the OS's noise" in c.why
    assert c.advice is not None and "scale.high" in c.advice


def test_no_change_over_the_scaled_part_is_unresolved_not_a_verdict() -> None:
    """A metric claiming 8x while the scaled part's OS time did not move: the OS cannot say
    the effect is there; it may be a forged metric or an effect below the runs' noise."""
    c = _check(_scaled(0.125, (1.010, 1.480), (1.010, 1.480)))
    assert c.outcome == "unresolved" and c.ratio_ci is not None
    assert c.ratio_ci[0] < 1 < c.ratio_ci[1] and "includes no change" in c.why
    assert c.advice is not None and c.advice.startswith("if the effect is real")


def test_a_faster_candidate_is_confirmed_even_if_its_scaled_part_took_no_time() -> None:
    """Its high-size run took less than the baseline's low-size run: a real speed-up, floored
    rather than a log of zero."""
    c = _check(_scaled(0.01, (1.010, 1.480), (0.900, 0.860)))
    assert c.outcome == "confirmed" and c.ratio is not None and c.ratio <= 0.01
    assert c.ratio_ci is None  # every round at the floor: no interval, the sign of each round


def _scaled_logs(metric: float, os_ratios: list[float]) -> list[BenchmarkRound]:
    """Scaled rounds whose candidate's scaled part is `os_ratios[i]` of the baseline's 0.47 s
    (exact: no added noise), so the OS's interval is the one these ratios give."""
    out = []
    for i, x in enumerate(os_ratios):
        low = ScaleRuns(
            baseline=1.0, candidate=metric, baseline_wall_s=1.01, candidate_wall_s=1.01,
            baseline_cpu_s=1.01, candidate_cpu_s=1.01,
        )  # fmt: skip
        ch = 1.01 + 0.47 * x
        out.append(
            BenchmarkRound(
                order="AB" if i % 2 == 0 else "BA", baseline=1.0, candidate=metric,
                baseline_wall_s=1.48, candidate_wall_s=ch, baseline_cpu_s=1.48,
                candidate_cpu_s=ch, log_ratio=math.log(metric), low=low,
            )
        )  # fmt: skip
    return out


def test_an_os_interval_that_barely_excludes_no_change_does_not_confirm_a_large_claim() -> None:
    """CI, 807aabd: a kernel left as it was, with a clock_gettime linked in that runs 20x slow,
    so the metric claims 0.050. Over 4 rounds the OS's scaled part read 0.956 (0.857..0.994):
    it excluded no change on the metric's side by 0.6%, and a check by direction alone
    'confirmed' a 20x claim (`improved`, about 1 run in 40). The OS must itself show an effect
    beyond min_effect: an interval reaching within 5% of no change confirms nothing."""
    rounds = _scaled_logs(0.05, [0.857, 0.994, 0.93, 0.975])
    c = _check(rounds)
    assert c.ratio_ci is not None and c.ratio_ci[1] < 1  # excludes no change, as in CI
    assert c.ratio_ci[1] > 1 / 1.05  # ... but reaches within min_effect of it
    assert c.outcome == "unresolved", c.why
    assert "not by 5% for certain" in c.why and "metric ratio 0.050" in c.why
    assert c.advice is not None and "scale.high" in c.advice
    # the same claim of a slowdown: confirmed only beyond +5%, not by 1.006..1.16
    slower = _check(_scaled_logs(20.0, [1.16, 1.006, 1.07, 1.03]))
    assert slower.outcome == "unresolved" and "slower, but not by 5%" in slower.why
    # negative controls: an OS interval wholly beyond 5% confirms a metric of its size
    assert _check(_scaled_logs(0.80, [0.86, 0.93, 0.90, 0.92])).outcome == "confirmed"
    assert _check(_scaled_logs(1.25, [1.16, 1.08, 1.10, 1.12])).outcome == "confirmed"


def test_the_scaled_part_must_show_a_share_of_the_change_the_metric_claims() -> None:
    """CI, 78a0c9e's parent, loaded by another judge: a kernel left as it was, its clock
    forged 20x (metric 0.046), read the OS's scaled part at 0.789..0.903 over 4 rounds (its
    true ratio, quiet, 1.00-1.08 in 8 of 8): beyond 5%, so `improved`. Over the scaled part a
    metric that times it shows a share f of its change (1 - OS = f(1 - metric)): the honest
    stencil's 0.54-0.80. Less than a quarter of the claim is not confirmed; whole runs
    (`process`), where start-up dilutes without bound, are not held to it."""
    c = _check(_scaled_logs(0.046, [0.79, 0.83, 0.86, 0.90]))
    assert c.ratio_ci is not None and c.ratio_ci[1] < 1 / 1.05  # beyond min_effect ...
    assert c.outcome == "unresolved", c.why  # ... but 10% of the claimed change
    assert "does not confirm the size" in c.why and "at most 1" in c.why
    # a real 20% gain claimed as 20x: the same
    assert _check(_scaled_logs(0.05, [0.78, 0.80, 0.82, 0.81])).outcome == "unresolved"
    # the honest stencil's numbers (metric 0.14, OS 0.32-0.51) are confirmed
    assert _check(_scaled_logs(0.14, [0.32, 0.40, 0.51, 0.37])).outcome == "confirmed"
    # a slowdown claimed 20x whose scaled part shows +10%: not confirmed either
    assert _check(_scaled_logs(20.0, [1.16, 1.08, 1.10, 1.12])).outcome == "unresolved"
    # whole runs: the sieve's 0.01 against an OS 0.42-0.47 is confirmed as before
    assert _check(_rounds(0.01, FASTER, FASTER)).outcome == "confirmed"


def test_a_metric_of_any_positive_finite_size_gives_a_bounded_log_ratio() -> None:
    """Red team, 2026-12-06: a candidate printed 5e-324 against a baseline's 3.0; the quotient
    underflowed to 0.0 and math.log killed the judge (no judgement recorded). A log past about
    709 would overflow math.exp in the summary just the same. Each round's log is taken as a
    difference of logs and capped at a ratio of 1e20 either way."""
    cap = LOG_RATIO_CAP
    assert metric_log_ratio(3.0, 5e-324, "lower") == -cap
    assert metric_log_ratio(1e-3, 1.7e308, "lower") == cap
    assert metric_log_ratio(3.0, 5e-324, "higher") == cap
    assert metric_log_ratio(2.0, 1.0, "lower") == math.log(0.5)  # an honest one is untouched
    assert metric_log_ratio(2.0, 1.0, "higher") == math.log(2.0)
    logs = [-cap] * 6
    s = summarize(estimate(logs, 0.95, seed=1, min_n=4), 0.05)  # the summary does not overflow
    assert s.ratio is not None and 0 < s.ratio <= 1e-19
    rounds = [r.model_copy(update={"log_ratio": -cap}) for r in _rounds(0.5, SAME, SAME)]
    assert os_check(rounds, _metric(rounds), False, 0.05, seed=1).outcome == "unresolved"
