"""Whether the OS's own count of an external benchmark's runs confirms what it printed.

The metric is printed by a process that runs the candidate's code, which can edit the clock the
benchmark reads or print a better number after it: on its own it is not evidence. Each run's
CPU time (the sandbox cgroup's count, which nothing in the run can edit) goes the same way as a
real speed-up, diluted by start-up the metric leaves out. So a speed verdict needs the OS's
interval over the same rounds to exclude no change in the metric's direction; the magnitude
stays the metric's (start-up dilutes the OS's), and both are kept in the rounds. CPU time is
used where every run has it (a loaded machine disturbs it far less than wall time), else wall.
"""

from __future__ import annotations

import math

from optarena.judge._stats import estimate, median
from optarena.records import BenchmarkRound


def os_log_ratios(rounds: list[BenchmarkRound]) -> tuple[str, list[float]]:
    """("CPU" or "wall", per round log(candidate / baseline) of the OS's time of the runs)."""
    cpu = all(
        r.baseline_cpu_s is not None and r.candidate_cpu_s is not None
        and r.baseline_cpu_s > 0 and r.candidate_cpu_s > 0
        for r in rounds
    )  # fmt: skip
    if cpu:
        return "CPU", [math.log((r.candidate_cpu_s or 1) / (r.baseline_cpu_s or 1)) for r in rounds]
    return "wall", [math.log(r.candidate_wall_s / r.baseline_wall_s) for r in rounds]


def crosscheck(
    rounds: list[BenchmarkRound], logs: list[float], metric_is_wall: bool, min_effect: float,
    seed: int,
) -> list[str]:  # fmt: skip
    """A note when the metric's effect (median of `logs`, lower-is-better scale) is beyond
    min_effect and the OS's 95% interval does not exclude 0 on that side; [] otherwise, and
    for a wall-time metric (that is already the judge's own clock)."""
    if metric_is_wall or len(rounds) < 2:
        return []
    mlog = median(logs)
    if abs(mlog) <= math.log1p(min_effect):
        return []
    clock, os_logs = os_log_ratios(rounds)
    e = estimate(os_logs, 0.95, seed, min_n=2)
    if e.lo is not None and e.hi is not None and (e.hi < 0 if mlog < 0 else e.lo > 0):
        return []
    span = "no interval" if e.lo is None or e.hi is None else (
        f"interval {math.exp(e.lo):.3f}..{math.exp(e.hi):.3f}"
    )  # fmt: skip
    est = "-" if e.estimate is None else f"{math.exp(e.estimate):.3f}"
    return [
        f"the OS's {clock} time of the runs does not confirm the benchmark's own metric: metric "
        f"ratio {math.exp(mlog):.3f}, {clock} ratio {est} ({span}, {len(rounds)} rounds)"
    ]
