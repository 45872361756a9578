"""What one pair of a speed comparison records, and how big its slots are.

A pair's raw samples per workload (`WorkloadSamples`: every call's tile on the judge's clocks,
per arm and the null arm, in the order taken) and its log-ratio per round (the null arm's calls
subtracted), the record of a whole pair (`PairRecord`), its plan (`PairPlan`), and the sizing
rules of its slots and rounds. Kept apart from the protocol that fills them (`_pair`) so that
the statistics and the report read samples without the machinery of workers and sandboxes.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

from optarena.judge.speed._stats import round_log_ratio

ARMS = ("a", "b")
NULL = "n"  # the null arm: the protocol's cost per call, subtracted from both arms
SLOT_TARGET_NS = 2_000_000  # short calls get more calls per slot, up to about this much work
MAX_SLOT_CALLS = 32
CHEAP_CALL_NS = 500_000  # shorter calls get twice the rounds per pair
# Slots of shorter calls open with a replay (`PairSession._run_slot` in `_pair`): a slot's
# cold start cost 100-200 us on the development VM, a large share of a short call and little
# of a long one, where the replay would cost more budget than the dilution it takes away.
REPLAY_BELOW_NS = 1_000_000
SLOT_MEMORY_BYTES = 64 << 20  # ... as long as one slot's inputs and outputs fit in this


@dataclass(frozen=True)
class PairPlan:
    """What one pair does; the orchestrator fixes it for the whole comparison."""

    warmup_calls: int
    calls_per_slot: int  # at least; short calls get more (SLOT_TARGET_NS)
    rounds: int
    seed: int  # the comparison's seed: inputs and round orders derive from it
    stream: int  # separates comparisons under one seed (the main one, the A/A control)
    deadline: float | None = None  # time.monotonic() by which the judgement must end


@dataclass
class WorkloadSamples:
    """Raw samples of one workload in one pair, in the order they were taken.

    `wall` is the judge's clock over the call's tile (from the previous call's answer to its
    own, the judge's work between them included); `call` its clock from go frame to answer;
    `cpu` the kernel's CPU time of the worker's cgroup over the tile (empty when the machine
    has no such accounting). Key `n` is the null arm.
    """

    calls_per_slot: int = 0
    rounds: int = 0
    wall: dict[str, list[int]] = field(default_factory=lambda: {"a": [], "b": [], "n": []})
    cpu: dict[str, list[int]] = field(default_factory=lambda: {"a": [], "b": [], "n": []})
    call: dict[str, list[int]] = field(default_factory=lambda: {"a": [], "b": [], "n": []})
    orders: list[str] = field(default_factory=list)
    warmup_calls: int = 0
    replay: bool = False  # each slot opened with an uncounted replay (REPLAY_BELOW_NS)

    def round_log_ratios(self, clock: str) -> list[float]:
        """Per round: `round_log_ratio` over the round's 2 x calls_per_slot calls per arm, the
        null arm's calls of the same round subtracted (none: a record without a null arm)."""
        data = self.cpu if clock == "cpu" else self.wall
        n = 2 * self.calls_per_slot
        null = data.get(NULL) or []
        return [
            round_log_ratio(data["a"][i : i + n], data["b"][i : i + n], null[i : i + n])
            for i in range(0, len(data["a"]), n)
        ]

    def unreadable(self) -> tuple[str, str] | None:
        """The arm whose clock cannot give this workload's rounds a ratio, and why; or None.

        A single call's tile of zero is no such reason: the cgroup's CPU count gave one beside
        a CPU-burning neighbour (time accounted late, to the next call: the tiles still add up
        to the run's exact total, and a round's ratio is of means over every call). Dropping
        the pair for it would let whatever can cause a late count choose which pairs count.
        A clock that went backwards, or a round of an arm with no time at all, is no
        measurement."""
        n = 2 * self.calls_per_slot
        for name, clock in (("CPU", self.cpu), ("wall", self.wall)):
            for arm in ARMS:
                xs = clock.get(arm) or []
                if any(x < 0 for x in xs):
                    return arm, f"the {name} clock went backwards over a call of arm {arm}"
                if n and any(sum(xs[i : i + n]) <= 0 for i in range(0, len(xs), n)):
                    return arm, f"the {name} clock gave a round of arm {arm}'s calls no time"
        return None

    def log_ratio(self, clock: str) -> float:
        """The pair's statistic: the mean over its rounds, as many ABBA as BAAB, so the
        advantage of running two slots back to back cancels."""
        rounds = self.round_log_ratios(clock)
        return sum(rounds) / len(rounds)


@dataclass
class PairRecord:
    index: int
    cpu: int | None
    spawn_order: str
    workloads: dict[str, WorkloadSamples]
    cpu_source: str
    freeze: str
    seconds: float


def slot_calls(per_call_ns: float, per_call_bytes: int, least: int) -> int:
    """Calls per slot: enough for about SLOT_TARGET_NS of work, within the slot memory cap."""
    by_time = math.ceil(SLOT_TARGET_NS / max(per_call_ns, 1.0))
    return max(least, min(by_time, slot_call_cap(per_call_bytes, least)))


def round_factor(per_call_ns: float) -> int:
    """More rounds per pair for cheap calls: their noise comes in whole slots (a busy moment
    slows a slot, not a call), so more, short slots average it down at little cost."""
    return 2 if per_call_ns < CHEAP_CALL_NS else 1


def slot_call_cap(per_call_bytes: int, least: int) -> int:
    return max(least, min(MAX_SLOT_CALLS, SLOT_MEMORY_BYTES // max(per_call_bytes, 1)))
