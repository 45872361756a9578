"""Whether the OS's own count of an external benchmark's runs confirms what it printed.

The metric is printed by a process that runs the candidate's code, which can edit the clock the
benchmark reads or print a better number after it: on its own it is not evidence. Each run's
CPU time (the sandbox cgroup's count, which nothing in the run can edit) goes the same way as a
real speed-up. So a speed verdict needs the OS's 95% interval over the same rounds to lie
wholly beyond min_effect on the metric's side: the OS on its own must show an effect the task
calls worth a verdict. An interval that merely excludes no change is not enough: a forged
metric claiming 20x on a kernel left as it was read `improved` in about 1 run in 40 (CI), its
OS ratio 0.956 (0.857..0.994) over 4 rounds "confirming" the direction. The magnitude stays the
metric's (the OS's view of the timed part is diluted by whatever else each run does, e.g. the
stencil's 0.14 against the OS's 0.32-0.51), and both are kept in the rounds. CPU time is used
where every run has it (a loaded machine disturbs it far less), else wall.

Over whole runs (`process`), start-up, compiling and checking answers dilute the OS's view: an
honest kernel 8x faster that is 2% of its process moves the OS's count less than its noise. A
spec can then declare a scale (two sizes of the timed part); the judge runs each arm at both
and the OS looks at the difference (`scaled_difference`), where fixed costs cancel. The
candidate's code sees the size and can add time to its low-size run to shrink its own
difference (or move its work into start-up, which a plain difference cancels). So the
candidate's scaled part is taken from the lower of the two low-size runs:

    candidate part = max(c_high - c_low, c_high - b_low)     baseline part = b_high - b_low

Time the candidate adds to its low-size run, or to start-up beyond the baseline's, is then
counted against it: a ratio below 1 needs c_high - b_low < b_high - b_low, i.e. its high-size
run took less OS time than the baseline's. No candidate whose high-size run is not really
faster can read as faster, whatever it does at either size. That the OS cannot tell
(`unresolved`, with what the spec could add) is kept apart from it showing the opposite
(`contradicted`).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Literal

from optarena.judge.speed import Estimate, estimate, median, stats
from optarena.records import BenchmarkRound, Clock, OsCheck, OsOutcome

# A candidate whose scaled part took no OS time at all is bounded at this ratio (its high-size
# run then took no more than the baseline's low-size one: a real speed-up, never an artefact).
_FLOOR = 1e-3
Basis = Literal["process", "scaled_difference"]
_SCALE_ADVICE = (
    "declare [benchmark] scale = { low = 1, high = N } and put {scale} in the command where it "
    "sizes the timed part (e.g. `--repeat {scale}`), so the judge times the difference between "
    "the two sizes, where start-up and other fixed costs cancel"
)
_RAISE_ADVICE = "raise [benchmark] scale.high until the scaled part outweighs the runs' noise"
# Over the scaled part, the least share of the change the metric claims that the OS must see:
# a metric timing a share f of the scaled part's work gives an OS ratio of 1 - f(1 - metric).
# The honest stencil's f is 0.54-0.80 (its OS interval's near end against the metric's ratio).
# A kernel left as it was, its clock forged 20x, read an OS interval of 0.789..0.903 over 4
# rounds of a CI machine loaded by another judge (its true ratio 1.00-1.08): 10% of the 95% the
# metric claimed, and `improved`. A real 20% gain claimed as 20x shows 21%.
MIN_SHARE_SEEN = 0.25


@dataclass(frozen=True)
class _Times:
    """Per round log(candidate / baseline) of the OS's time, or why there is none."""

    clock: Clock
    logs: list[float]
    unresolvable: int = 0  # rounds whose baseline scaled part took no time
    baseline_part_s: float | None = None  # median baseline scaled part


def _clock(rounds: list[BenchmarkRound]) -> Clock:
    values: list[float | None] = []
    for r in rounds:
        values += [r.baseline_cpu_s, r.candidate_cpu_s]
        if r.low is not None:
            values += [r.low.baseline_cpu_s, r.low.candidate_cpu_s]
    return "cpu" if all(v is not None and v > 0 for v in values) else "wall"


def _process_times(rounds: list[BenchmarkRound]) -> _Times:
    clock = _clock(rounds)
    if clock == "cpu":
        return _Times(
            clock, [math.log((r.candidate_cpu_s or 1) / (r.baseline_cpu_s or 1)) for r in rounds]
        )
    return _Times(clock, [math.log(r.candidate_wall_s / r.baseline_wall_s) for r in rounds])


def _scaled_times(rounds: list[BenchmarkRound]) -> _Times:
    """The scaled part of each arm per round (see the module docstring for the max)."""
    clock = _clock(rounds)
    logs: list[float] = []
    parts: list[float] = []
    bad = 0
    for r in rounds:
        low = r.low
        assert low is not None
        if clock == "cpu":
            bh, bl = r.baseline_cpu_s or 0.0, low.baseline_cpu_s or 0.0
            ch, cl = r.candidate_cpu_s or 0.0, low.candidate_cpu_s or 0.0
        else:
            bh, bl, ch, cl = (
                r.baseline_wall_s, low.baseline_wall_s, r.candidate_wall_s, low.candidate_wall_s
            )  # fmt: skip
        base = bh - bl
        parts.append(base)
        if base <= 0:
            bad += 1
            continue
        cand = max(ch - cl, ch - bl)
        logs.append(math.log(max(cand / base, _FLOOR)))
    return _Times(clock, logs, bad, median(parts))


def _span(e: Estimate) -> str:
    if e.lo is None or e.hi is None:
        return "no interval"
    return f"interval {math.exp(e.lo):.3f}..{math.exp(e.hi):.3f}"


def os_check(
    rounds: list[BenchmarkRound], metric: Estimate, metric_is_wall: bool, min_effect: float,
    seed: int,
) -> OsCheck:  # fmt: skip
    """What the OS says about the metric's effect (lower-is-better scale). Every effect the
    metric's verdict could call `improved` or `regressed` needs it, and every estimate beyond
    min_effect; a wall-time metric is the judge's own clock. The effect is the verdict's own
    estimate over the rounds (`metric`, the one the verdict is decided on): with a plain
    median here, two outliers in six rounds had the median claim no effect (0.969) while the
    verdict's estimate read 0.888 `improved`, and an improvement went out that the OS never
    checked. The verdict is decided by the interval, so an estimate within min_effect whose
    interval excludes 0 and reaches beyond it is asked too."""
    scaled = bool(rounds) and all(r.low is not None for r in rounds)
    basis: Basis = "scaled_difference" if scaled else "process"
    mlog = metric.estimate if metric.estimate is not None else 0.0
    mratio = math.exp(mlog)
    decisive = stats.decide(metric, min_effect)[0] in ("improved", "regressed")
    claims = decisive or abs(mlog) > math.log1p(min_effect)
    if metric_is_wall or not claims or len(rounds) < 2:
        why = (
            "the metric is the judge's own wall clock of the runs" if metric_is_wall
            else f"the metric claims no effect beyond {min_effect:.0%} (ratio {mratio:.3f})"
        )  # fmt: skip
        return OsCheck(
            outcome="not_needed", basis=basis, clock=None, ratio=None, ratio_ci=None,
            metric_ratio=mratio, why=why,
        )  # fmt: skip
    t = _scaled_times(rounds) if scaled else _process_times(rounds)
    what = "time of the scaled part" if scaled else "time of the whole runs"
    head = f"the OS's {t.clock.upper() if t.clock == 'cpu' else t.clock} {what}"
    if t.unresolvable:
        return OsCheck(
            outcome="unresolved", basis=basis, clock=t.clock, ratio=None, ratio_ci=None,
            metric_ratio=mratio,
            why=f"{head} does not confirm the benchmark's own metric: metric ratio {mratio:.3f}, "
            f"but in {t.unresolvable} of {len(rounds)} rounds the baseline's high-size run took "
            "no more OS time than its low-size run: the scaled part is within the OS's noise",
            advice=_RAISE_ADVICE,
        )  # fmt: skip
    e = estimate(t.logs, 0.95, seed, min_n=2)
    est = None if e.estimate is None else math.exp(e.estimate)
    ci = None if e.lo is None or e.hi is None else [math.exp(e.lo), math.exp(e.hi)]
    said = f"metric ratio {mratio:.3f}, {t.clock} ratio {'-' if est is None else f'{est:.3f}'}"
    said += f" ({_span(e)}, {len(rounds)} rounds)"
    outcome, why, advice = _outcome(mlog, ci, head, said, t, scaled, min_effect)
    return OsCheck(
        outcome=outcome, basis=basis, clock=t.clock, ratio=est, ratio_ci=ci, metric_ratio=mratio,
        why=why, advice=advice,
    )  # fmt: skip


def _share_seen(mlog: float, ci: list[float]) -> float:
    """How much of the metric's claimed change the OS's interval shows at least, linearly
    (see MIN_SHARE_SEEN): for an improvement the time saved, for a regression the time added."""
    mratio = math.exp(mlog)
    if mratio == 1:  # no claim (never asked: see os_check); nothing to share
        return 1.0
    if mlog < 0:
        return (1 - ci[1]) / (1 - mratio)
    return (ci[0] - 1) / (mratio - 1)


def _outcome(
    mlog: float, ci: list[float] | None, head: str, said: str, t: _Times, scaled: bool,
    min_effect: float,
) -> tuple[OsOutcome, str, str | None]:  # fmt: skip
    """(outcome, why, advice) from the OS's interval against the metric's side: confirmed only
    where the whole interval lies beyond min_effect that way (see the module docstring)."""
    edge = 1 / (1 + min_effect) if mlog < 0 else 1 + min_effect
    if ci is not None and (ci[1] < edge if mlog < 0 else ci[0] > edge):
        seen = _share_seen(mlog, ci)
        if not scaled or seen >= MIN_SHARE_SEEN:
            why = f"{head} confirms the metric's direction, beyond {min_effect:.0%}: {said}"
            return "confirmed", why, None
        why = (
            f"{head} does not confirm the size of the benchmark's own metric: {said}; the "
            f"scaled part's OS time shows at most {seen:.0%} of the change the metric claims, "
            f"less than the {MIN_SHARE_SEEN:.0%} a metric timing that part shows"
        )
        return "unresolved", why, "if the effect is real: " + _RAISE_ADVICE
    if mlog < 0 and len(t.logs) >= 4 and all(x == math.log(_FLOOR) for x in t.logs):
        # no interval (every round the same), but in each the candidate's high-size run took
        # less OS time than the baseline's low-size one: the sign of every round agrees
        why = f"{head} confirms the metric's direction: in every round the candidate's "
        why += f"high-size run took less than the baseline's low-size run ({said})"
        return "confirmed", why, None
    if ci is not None and (ci[0] > 1 if mlog < 0 else ci[1] < 1):
        why = f"{head} does not confirm the benchmark's own metric, it shows the opposite: {said}"
        return "contradicted", why, None
    why = f"{head} does not confirm the benchmark's own metric, nor contradict it: {said}"
    if ci is not None and (ci[1] < 1 if mlog < 0 else ci[0] > 1):
        near = "faster" if mlog < 0 else "slower"
        why += (
            f"; its interval shows the candidate {near}, but not by {min_effect:.0%} for certain "
            f"(it reaches within {min_effect:.0%} of no change)"
        )
    else:
        why += "; its interval includes no change"
    if scaled:
        part = t.baseline_part_s or 0.0
        why += (
            f": the effect the metric claims is not there, or it is within the runs' noise (the "
            f"baseline's scaled part took {part:.3f} s)"
        )
        return "unresolved", why, "if the effect is real: " + _RAISE_ADVICE
    why += (
        ": the effect the metric claims is not there, or what the metric times is a small part "
        "of each run (start-up, compiling or checking answers outweigh it)"
    )
    return "unresolved", why, _SCALE_ADVICE
