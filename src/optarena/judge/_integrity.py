"""Integrity of reported timings: what the worker says against what the operating system saw.

The worker times each call with clocks bound before candidate code was imported, but the
candidate runs in that same process and could still reach the worker's globals. So the judge
never takes a reported time alone: for every timed batch it also records the wall time of the
whole request (its own clock) and the worker's CPU time over all its threads from the kernel
(`/proc/PID/task/*/schedstat`, ns; `/proc/PID/stat` ticks as a fallback). Everything in a batch
that is not a timed call (moving arrays, copies for the mutation check) costs the same in both
arms, because both get identical inputs and return outputs of the same shape. Time hidden from
the worker's clocks, or work shifted out of the timed calls, therefore shows up as *excess
unexplained time* next to the other arm:

- wall: elapsed time the judge saw but the reported call times do not explain;
- cpu: CPU time the kernel charged to the worker (all threads) but the calling thread's clock
  did not see: work in other threads, or a faked CPU clock.

Compared per process pair at the minimum over batches, beyond a quarter of the other arm's
call time plus a tenth of its unexplained time plus 50 us (data moving and scheduling noise),
and in every pair (at least two), a check fails. The CPU check failing while the wall time is
also short (its check failed, or its excess is over half the allowance) means the reported
times are impossibly small: `timing_tampered`. The CPU check failing alone means CPU time does
not represent that arm's cost, and the comparison falls back to wall time (reported in full).
The wall check failing alone is noise on a loaded machine (a pinned worker waits while another
process holds its CPU) and is reported, not acted on. A clock that under-reports by less than
the allowance slips through; the worker's guard watches its globals for the same reason.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

from optarena.judge._stats import median

# Excess unexplained time per call must exceed this fraction of the other arm's per-call time,
# plus a fixed allowance for scheduler and page-fault noise, before it is called tampering. An
# honest arm can differ a little (a non-contiguous output is copied outside the timed call).
TAMPER_FRACTION = 0.25
# ... plus this fraction of the other arm's own unexplained time (its size sets its noise) ...
OVERHEAD_FRACTION = 0.1
TAMPER_FLOOR_NS = 50_000
# ... in every one of at least this many process pairs.
MIN_PAIRS = 2


@dataclass(frozen=True)
class BatchObservation:
    """One timed batch of one arm: the worker's claims and the OS's view of the same request."""

    calls: int
    reported_wall_ns: int  # sum of the worker's per-call elapsed times
    reported_cpu_ns: int  # sum of the worker's per-call thread CPU times
    wall_ns: int  # the judge's clock around the whole request
    cpu_ns: int | None  # the worker's CPU time (all threads) during the request, from the kernel


def cpu_time_ns(pid: int) -> tuple[int | None, str]:
    """Total CPU time of all threads of `pid`, and which accounting it came from."""
    task_dir = Path(f"/proc/{pid}/task")
    try:
        tids = os.listdir(task_dir)
    except OSError:
        return None, "unavailable"
    total, ok = 0, False
    for tid in tids:
        try:
            fields = (task_dir / tid / "schedstat").read_text().split()
        except OSError:
            continue
        total += int(fields[0])
        ok = ok or int(fields[0]) > 0
    if ok:
        return total, "schedstat"
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None, "unavailable"
    parts = stat[stat.rindex(")") + 2 :].split()
    ticks = int(parts[11]) + int(parts[12])  # utime, stime
    return ticks * 1_000_000_000 // os.sysconf("SC_CLK_TCK"), "stat"


def minor_faults(pid: int) -> int | None:
    """Minor page faults of `pid` so far (new memory touched), from /proc/PID/stat."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    return int(stat[stat.rindex(")") + 2 :].split()[7])


@dataclass(frozen=True)
class IntegrityCheck:
    """Excess unexplained time of one arm over the other, per call.

    Unexplained time is compared at its minimum over batches: hidden time shifts every batch,
    while a busy machine (preemption, cache pollution, a late page fault) only ever adds to some.
    """

    clock: str  # "wall" or "cpu"
    passed: bool
    detail: str
    excess_ns: float | None  # None: the OS accounting was unavailable
    allowed_ns: float


def _unexplained(obs: list[BatchObservation], clock: str) -> float | None:
    vals = []
    for o in obs:
        seen = o.wall_ns if clock == "wall" else o.cpu_ns
        if seen is None:
            return None
        vals.append((seen - _claimed(o, clock)) / o.calls)
    return min(vals) if vals else None


def check_against_reference(
    subject: list[list[BatchObservation]], reference: list[list[BatchObservation]], clock: str
) -> IntegrityCheck:
    """Whether `subject` hid time from `clock` that `reference` spent in the open.

    Per process pair (the two arms ran side by side there), the subject's least unexplained
    time per call against the reference's; tampering must show in every pair. A pair of
    processes can differ in how fast they move data (memory placement), but which arm gets the
    slower process is chance, while hidden time is in every process of the hiding arm.
    """
    rows = [(s, r) for s, r in zip(subject, reference, strict=True) if s and r]
    if len(rows) < MIN_PAIRS:
        # With fewer than two pairs measured no verdict can be improved or regressed either.
        detail = f"too few process pairs to cross-check ({len(rows)})"
        return IntegrityCheck(clock, True, detail, None, 0.0)
    claimed = [_claimed(o, clock) / o.calls for _, ref in rows for o in ref]
    ref_call = median(claimed)
    excesses, allowances = [], []
    for sub, ref in rows:
        mine, theirs = _unexplained(sub, clock), _unexplained(ref, clock)
        if mine is None or theirs is None:
            return IntegrityCheck(clock, True, "no OS accounting on this machine", None, 0.0)
        excesses.append(mine - theirs)
        allowances.append(
            TAMPER_FRACTION * ref_call + OVERHEAD_FRACTION * max(theirs, 0.0) + TAMPER_FLOOR_NS
        )
    excess, allowed = median(excesses), median(allowances)
    if all(e > a for e, a in zip(excesses, allowances, strict=True)):
        what = "wall time" if clock == "wall" else "CPU time outside the calling thread's clock"
        detail = (
            f"{excess / 1e3:.0f} us per call of {what} that the OS saw but the worker's clock "
            f"did not, in each of {len(rows)} process pairs (other arm: {ref_call / 1e3:.0f} "
            f"us per call; allowed {allowed / 1e3:.0f} us)"
        )
        return IntegrityCheck(clock, False, detail, excess, allowed)
    return IntegrityCheck(clock, True, "reported times agree with OS accounting", excess, allowed)


def _claimed(o: BatchObservation, clock: str) -> int:
    return o.reported_wall_ns if clock == "wall" else o.reported_cpu_ns
