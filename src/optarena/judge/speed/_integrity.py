"""Is CPU time a fair measure of each arm? Its CPU time against its wall time, per call.

Both clocks are the judge's: wall time from the go frame to the answer, and the kernel's CPU
count of the worker's cgroup (every thread, exited threads and children included) over the
call's tile. Neither can be edited from inside the candidate's process, so there is nothing to
cross-check for tampering; what remains is whether CPU time represents the arm's cost. A call's
*waiting* is the part of its wall time the worker was not on a CPU (preempted by another
process, woken late, or waiting for something: a sleep, a lock, I/O), as a *share* of that wall
time. A busy machine preempts both arms alike per unit of time, so their shares agree however
long their calls are (an absolute allowance flagged every honest faster candidate under load:
the slower arm's longer calls waited longer). An arm whose median waiting share exceeds the
other's by more than WAIT_SHARE in a quarter of the process pairs or more (at least two) does
work that CPU time does not show, and the comparison then uses wall time for every verdict.
A quarter, not every pair: an attack that played honest in one pair hid from "every". (Work on
other CPUs, the opposite disagreement, is counted by CPU time, so it needs no such rule.)
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from optarena.judge.speed._stats import median

WAIT_SHARE = 0.1  # of a call's wall time
MIN_PAIRS = 2
FLAGGED_SHARE = 0.25  # of the pairs


@dataclass(frozen=True)
class ArmCalls:
    """One arm's counted calls of one workload in one process pair."""

    wall: list[int]
    cpu: list[int]  # empty: no CPU accounting for this pair


@dataclass(frozen=True)
class IntegrityCheck:
    passed: bool
    detail: str
    excess_ns: float | None  # waiting share beyond the other arm's (median over pairs) x 1e9
    allowed_ns: float  # WAIT_SHARE x 1e9 (records keep the names they always had)


def waiting_share(calls: ArmCalls) -> float | None:
    """Median over calls of the share of its wall time the worker was not on a CPU."""
    if not calls.wall or len(calls.cpu) != len(calls.wall):
        return None
    return median([max(0, w - c) / w for w, c in zip(calls.wall, calls.cpu, strict=True) if w > 0])


def check_waiting(subject: list[ArmCalls], reference: list[ArmCalls]) -> IntegrityCheck:
    """Whether `subject` waited a larger share of its calls than `reference` in enough pairs."""
    rows = [(s, r) for s, r in zip(subject, reference, strict=True) if s.wall and r.wall]
    if any(waiting_share(s) is None or waiting_share(r) is None for s, r in rows):
        return IntegrityCheck(False, "no CPU accounting of the workers on this machine", None, 0)
    if len(rows) < MIN_PAIRS:
        detail = f"too few process pairs to compare waiting times ({len(rows)})"
        return IntegrityCheck(True, detail, None, WAIT_SHARE * 1e9)
    excesses = [float(waiting_share(s) or 0.0) - float(waiting_share(r) or 0.0) for s, r in rows]
    flagged = sum(e > WAIT_SHARE for e in excesses)
    excess = median(excesses)
    if flagged >= max(MIN_PAIRS, math.ceil(FLAGGED_SHARE * len(rows))):
        detail = (
            f"waits {100 * excess:.0f}% of its call time more than the other arm (not on a "
            f"CPU: sleeping, blocked or waiting for other work) in {flagged} of {len(rows)} "
            f"process pairs; allowed {100 * WAIT_SHARE:.0f}%"
        )
        return IntegrityCheck(False, detail, excess * 1e9, WAIT_SHARE * 1e9)
    return IntegrityCheck(True, "CPU time and wall time agree", excess * 1e9, WAIT_SHARE * 1e9)
