"""Turning a finished comparison's raw pairs and estimates into the `metrics` format."""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Protocol

from optarena.judge.speed._samples import PairRecord
from optarena.judge.speed._stats import Estimate, decide, median
from optarena.records import (
    Clock,
    Comparison,
    Integrity,
    PairSamples,
    SpeedProtocol,
    Stop,
    StopReason,
    Summary,
    WorkloadMetrics,
    evolve,
)

OVERALL = "__overall__"


class _Plan(Protocol):
    @property
    def min_effect(self) -> float: ...
    @property
    def budget_s(self) -> float: ...


def summarize(e: Estimate, min_effect: float, noise_floor: float | None = None) -> Summary:
    """An Estimate on the log scale as ratios and speed-ups, with its verdict."""
    verdict, why = decide(e, min_effect, noise_floor)

    def ci(sign: float) -> list[float] | None:
        if e.lo is None or e.hi is None:
            return None
        return sorted([math.exp(sign * e.lo), math.exp(sign * e.hi)])

    return Summary(
        ratio=None if e.estimate is None else math.exp(e.estimate),
        ratio_ci=ci(1.0),
        speedup=None if e.estimate is None else math.exp(-e.estimate),
        speedup_ci=ci(-1.0),
        verdict=verdict,
        why=why,
        pairs=e.n,
        outliers=e.outliers,
        notes=list(e.notes),
    )


def checked(
    primary: Summary, other: Summary | None, primary_clock: Clock
) -> tuple[Summary, Summary | None]:
    """The verdict with the other clock's say: `improved` needs both clocks. Each clock has a
    blind spot the other covers: CPU time misses work done outside the worker's CPU (waiting on
    something that works for it), the wall clock counts whatever ran on the shared CPU during
    an arm's calls (an attack had its helper processes exit during the baseline's calls, and
    read improved at 0.4 on the wall clock while CPU time had it 10% slower)."""
    if other is None or primary.verdict != "improved" or other.verdict == "improved":
        return primary, other
    other_clock = "wall" if primary_clock == "cpu" else "cpu"
    why = (
        f"{primary_clock} time says improved ({primary.why}), {other_clock} time does not "
        f"({other.verdict}: {other.why}); an improvement must show on both"
    )
    return evolve(primary, verdict="inconclusive", why=why), other


def summary_pair(
    e: Estimate,
    cross: Estimate | None,
    min_effect: float,
    clock: Clock,
    floor: float | None = None,
    cross_floor: float | None = None,
) -> tuple[Summary, Summary | None]:
    other = None if cross is None else summarize(cross, min_effect, cross_floor)
    return checked(summarize(e, min_effect, floor), other, clock)


@dataclass(frozen=True)
class Report:
    """Everything a Comparison is made of, once measuring has stopped."""

    plan: _Plan
    workloads: Sequence[str]
    pairs: Sequence[PairRecord]
    estimates: Mapping[str, Estimate]
    clock: Clock
    clock_note: str
    cross: Mapping[str, Estimate]  # the same estimates on the other clock (empty: none)

    def comparison(
        self,
        labels: dict[str, str],
        reason: StopReason,
        used_s: float,
        discarded: list[str],
        integrity: list[Integrity],
        protocol: SpeedProtocol,
        stream: int,
    ) -> Comparison:
        overall, cross = summary_pair(
            self.estimates[OVERALL], self.cross.get(OVERALL), self.plan.min_effect, self.clock
        )
        rounds = sum(len(s.orders) for p in self.pairs for s in p.workloads.values())
        samples = sum(
            len(s.wall["a"]) + len(s.wall["b"]) for p in self.pairs for s in p.workloads.values()
        )
        return Comparison(
            arms=labels,
            protocol=protocol,
            overall=overall,
            crosscheck=cross,
            workloads=[self._workload(w) for w in self.workloads],
            stop=Stop(
                reason=reason,
                pairs=len(self.pairs),
                rounds=rounds,
                samples=samples,
                budget_s=self.plan.budget_s,
                used_s=round(used_s, 3),
                discarded=list(discarded),
            ),
            clock=self.clock,
            clock_note=self.clock_note,
            integrity=integrity,
            cpu_accounting=self.pairs[0].cpu_source if self.pairs else "unavailable",
            freeze=self.pairs[0].freeze if self.pairs else "none",
        )

    def _workload(self, w: str) -> WorkloadMetrics:
        rows = []
        for p in self.pairs:
            s = p.workloads[w]
            rows.append(
                PairSamples(
                    pair=p.index,
                    cpu=p.cpu,
                    spawn_order=p.spawn_order,
                    warmup_calls=s.warmup_calls,
                    calls_per_slot=s.calls_per_slot,
                    orders=s.orders,
                    a_ns=s.wall["a"],
                    b_ns=s.wall["b"],
                    a_cpu_ns=s.cpu["a"],
                    b_cpu_ns=s.cpu["b"],
                    n_ns=s.wall["n"],
                    n_cpu_ns=s.cpu["n"],
                    a_call_ns=s.call["a"],
                    b_call_ns=s.call["b"],
                    round_log_ratios=s.round_log_ratios(self.clock),
                    log_ratio=s.log_ratio(self.clock),
                )
            )
        key = "a_cpu_ns" if self.clock == "cpu" else "a_ns"  # the verdict clock's samples
        all_a = [x for r in rows for x in getattr(r, key)]
        all_b = [x for r in rows for x in getattr(r, key.replace("a_", "b_"))]
        all_n = [x for r in rows for x in getattr(r, key.replace("a_", "n_"))]
        summary, cross = summary_pair(
            self.estimates[w], self.cross.get(w), self.plan.min_effect, self.clock
        )
        return WorkloadMetrics(
            name=w,
            summary=summary,
            crosscheck=cross,
            median_a_ns=median(all_a) if all_a else 0.0,
            median_b_ns=median(all_b) if all_b else 0.0,
            median_null_ns=median(all_n) if all_n else None,
            pairs=rows,
        )
