"""Is CPU time a fair measure of each arm? Its CPU time against its wall time, per call.

Both clocks are the judge's: wall time from request to reply, and the kernel's CPU count of the
worker's cgroup (every thread, exited threads and children included) over the call. Neither can
be edited from inside the candidate's process, so there is nothing to cross-check for
tampering; what remains is whether CPU time represents the arm's cost. A call's *waiting time*
is wall minus CPU: the worker was not running (woken late, preempted by another process, or
waiting for something: a sleep, a lock, I/O). Preemption and wake-ups cost both arms alike; an
arm that waits more than the other per call, beyond a fifth of the other arm's CPU time per call
plus 100 us, in every process pair (at least two), does work that CPU time does not show, and
the comparison then uses wall time for every verdict. (Work on other CPUs, the opposite
disagreement, is counted by CPU time, so it needs no such rule.)
"""

from __future__ import annotations

from dataclasses import dataclass

from optarena.judge._stats import median

WAIT_FRACTION = 0.2
WAIT_FLOOR_NS = 100_000
MIN_PAIRS = 2


@dataclass(frozen=True)
class ArmCalls:
    """One arm's counted calls of one workload in one process pair."""

    wall: list[int]
    cpu: list[int]  # empty: no CPU accounting for this pair


@dataclass(frozen=True)
class IntegrityCheck:
    passed: bool
    detail: str
    excess_ns: float | None  # waiting per call beyond the other arm's (median over pairs)
    allowed_ns: float


def waiting_ns(calls: ArmCalls) -> float | None:
    """Median per-call wall time the worker did not spend on a CPU."""
    if not calls.wall or len(calls.cpu) != len(calls.wall):
        return None
    return median([w - c for w, c in zip(calls.wall, calls.cpu, strict=True)])


def check_waiting(subject: list[ArmCalls], reference: list[ArmCalls]) -> IntegrityCheck:
    """Whether `subject` waited per call more than `reference` did, in every process pair."""
    rows = [(s, r) for s, r in zip(subject, reference, strict=True) if s.wall and r.wall]
    if any(waiting_ns(s) is None or waiting_ns(r) is None for s, r in rows):
        return IntegrityCheck(False, "no CPU accounting of the workers on this machine", None, 0)
    if len(rows) < MIN_PAIRS:
        detail = f"too few process pairs to compare waiting times ({len(rows)})"
        return IntegrityCheck(True, detail, None, 0.0)
    excesses, allowances = [], []
    for s, r in rows:
        excesses.append(float(waiting_ns(s) or 0.0) - float(waiting_ns(r) or 0.0))
        allowances.append(WAIT_FRACTION * median(r.cpu) + WAIT_FLOOR_NS)
    excess, allowed = median(excesses), median(allowances)
    if all(e > a for e, a in zip(excesses, allowances, strict=True)):
        detail = (
            f"waits {excess / 1e3:.0f} us per call more than the other arm (not on a CPU: "
            f"sleeping, blocked or waiting for other work), in each of {len(rows)} process "
            f"pairs; allowed {allowed / 1e3:.0f} us"
        )
        return IntegrityCheck(False, detail, excess, allowed)
    return IntegrityCheck(True, "CPU time and wall time agree", excess, allowed)
