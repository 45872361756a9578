"""From an experiment's trials to per-condition figures and treatment-vs-baseline verdicts.

Per trial the *effective* speed-up is the accepted candidate's speed-up, else 1.0 (a user who
adopts only accepted candidates keeps the baseline otherwise): failures count instead of
vanishing. Unknown tokens or cost stay unknown: a total over trials with some unknown is
reported with how many were unknown, never as if they were zero.
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Sequence

from optarena.experiments._schedule import ScheduledTrial
from optarena.experiments._state import ExperimentState
from optarena.experiments._stats import (
    CONFIDENCE,
    decide_treatment,
    effective_speedup,
    expected_best_of_k,
    paired_difference,
)
from optarena.judge import stats
from optarena.records import (
    ConditionSummary,
    ExperimentComparison,
    ExternalMetrics,
    LegacyMetrics,
    Metrics,
    Total,
    TreatmentComparison,
    TrialRecord,
    TrialRow,
    Usage,
    evolve,
)

OLDER_PROTOCOL = "older_protocol"  # a trial's speed measured by a protocol no longer used


def _in_out(u: Usage | None) -> int | None:
    """Input + output tokens; None when either is unknown or nothing was measured."""
    if u is None or u.input_tokens is None or u.output_tokens is None:
        return None
    return u.input_tokens + u.output_tokens


def _sum_known(values: list[float | int | None]) -> float | None:
    """The sum, or None when any is unknown: an attempt's unknown figure is never small."""
    return None if any(v is None for v in values) else float(sum(v or 0 for v in values))


def key_row(state: ExperimentState, s: ScheduledTrial) -> TrialRow | None:
    """The key's complete trial, or its failure; None while it is pending."""
    outcome = state.outcome(s.key)
    if outcome == "pending":
        return None
    attempts = state.rows.get(s.key, [])
    r = state.done(s.key) or attempts[0]  # newest first: the last attempt
    return evolve(
        trial_row(r, attempts, outcome),
        task=s.task,
        condition=s.condition,
        repetition=s.repetition,
    )


def trial_row(
    r: TrialRecord, attempts: Sequence[TrialRecord] = (), outcome: str = "complete"
) -> TrialRow:
    """One key as the comparison uses it: `r` its complete trial (or, `outcome` "failed", its
    last attempt), tokens and cost summed over `attempts` (default: `r` alone), since an
    interrupted attempt may have spent too."""
    attempts = list(attempts) or [r]
    complete = outcome == "complete"
    m = r.metrics if complete else None
    older = isinstance(m, LegacyMetrics)  # shown, never compared with today's figures
    measured = m if isinstance(m, Metrics | ExternalMetrics) and r.verdict == "accepted" else None
    speedup = measured.overall.speedup if measured is not None else None
    speed_verdict = OLDER_PROTOCOL if older else (measured.verdict if measured else None)
    metered_tokens = _sum_known([_in_out(a.metered_usage) for a in attempts])
    reported_tokens = _sum_known([_in_out(a.usage) for a in attempts])
    runtime = (r.runtime or {}).get("sha256", "")
    wall = sum(r.phases_s.values()) if r.phases_s else None
    return TrialRow(
        trial_id=r.id,
        task=r.task.id,
        condition=r.labels.get("condition", "?"),
        repetition=int(r.labels.get("repetition", "0")),
        outcome="complete" if complete else "failed",
        attempts=len(attempts),
        agent_status=r.agent_status,
        verdict=r.verdict if complete else None,
        speedup=speedup,
        speed_verdict=speed_verdict,
        effective_speedup=effective_speedup(complete and r.verdict == "accepted", speedup),
        metered_tokens=None if metered_tokens is None else int(metered_tokens),
        metered_cost_usd=_sum_known(
            [a.metered_usage.cost_usd if a.metered_usage else None for a in attempts]
        ),
        reported_tokens=None if reported_tokens is None else int(reported_tokens),
        reported_cost_usd=_sum_known([a.usage.cost_usd for a in attempts]),
        agent_wall_s=r.agent_wall_s,
        wall_s=wall,
        identity=f"{r.task.sha256[:12]}/{r.judge_sha256[:12]}/{str(runtime)[:12]}",
    )


def _total(values: list[float | int | None]) -> Total:
    known = [float(v) for v in values if v is not None]
    return Total(value=sum(known) if known else None, unknown=len(values) - len(known))


def _ci(ci: tuple[float, float] | None) -> list[float] | None:
    return None if ci is None else [ci[0], ci[1]]


NOT_MEASURED = "speed was not measured ([judge] measure = false): only correctness compares"


def summarize_condition(
    name: str, rows: list[TrialRow], pending: int, seed: int, measured: bool = True
) -> ConditionSummary:
    """A condition's figures; with `measured` False (a correctness-only plan) every speed
    figure is None, never a confident 1.0."""
    n = len(rows)
    accepted = [r for r in rows if r.verdict == "accepted"]
    improved = [r for r in accepted if r.speed_verdict == "improved"]
    speedups = [r.speedup for r in accepted if r.speedup is not None]
    eff = [r.effective_speedup for r in rows if r.speed_verdict != OLDER_PROTOCOL]
    eff = eff if measured else []
    cost = _total([r.metered_cost_usd for r in rows])
    log_gain = sum(math.log(e) for e in eff)
    known_cost = cost.value if cost.unknown == 0 else None
    return ConditionSummary(
        name=name,
        trials=n,
        failed=sum(r.outcome == "failed" for r in rows),
        pending=pending,
        speed_measured=measured,
        agent_status=dict(Counter(r.agent_status or "none" for r in rows)),
        accepted=len(accepted),
        correctness_rate=len(accepted) / n if n else None,
        correctness_ci=_ci(stats.wilson(len(accepted), n, CONFIDENCE)),
        improved=len(improved),
        improvement_rate=len(improved) / n if n and measured else None,
        improvement_ci=_ci(stats.wilson(len(improved), n, CONFIDENCE)) if measured else None,
        speedup_median=stats.median(speedups) if speedups else None,
        speedup_ci=_ci(stats.median_interval(speedups, CONFIDENCE, seed)),
        effective_median=stats.median(eff) if eff else None,
        effective_ci=_ci(stats.median_interval(eff, CONFIDENCE, seed)),
        best_of_k=_best_of_k(rows) if measured else [],
        metered_tokens=_total([r.metered_tokens for r in rows]),
        metered_cost_usd=cost,
        reported_tokens=_total([r.reported_tokens for r in rows]),
        reported_cost_usd=_total([r.reported_cost_usd for r in rows]),
        agent_wall_s=_total([r.agent_wall_s for r in rows]),
        wall_s=_total([r.wall_s for r in rows]),
        cost_per_accepted=known_cost / len(accepted)
        if known_cost is not None and accepted
        else None,
        cost_per_log_speedup=known_cost / log_gain
        if known_cost is not None and log_gain > 0
        else None,
    )


def _best_of_k(rows: list[TrialRow]) -> list[float]:
    """Per task the exact expected best of k repetitions, then the mean over tasks."""
    by_task: dict[str, list[float]] = {}
    for r in rows:
        by_task.setdefault(r.task, []).append(r.effective_speedup)
    if not by_task:
        return []
    kmax = min(len(v) for v in by_task.values())
    return [
        sum(expected_best_of_k(v, k) for v in by_task.values()) / len(by_task)
        for k in range(1, kmax + 1)
    ]


def compare_treatment(
    treatment: str,
    baseline: str,
    rows: list[TrialRow],
    min_effect: float,
    pending: Sequence[str] = (),
    measured: bool = True,
) -> TreatmentComparison:
    """Paired by task and repetition. While a key of either condition is pending there is no
    verdict: the missing trial may be the one that fails (a sabotaged trial left pending must
    not read as absent). Without measurement there is no speed verdict either."""
    base = {(r.task, r.repetition): r for r in rows if r.condition == baseline}
    treat = {(r.task, r.repetition): r for r in rows if r.condition == treatment}
    keys = sorted(set(base) & set(treat))
    drift = [f"{t}/{rep}" for t, rep in keys if base[(t, rep)].identity != treat[(t, rep)].identity]
    clean = [k for k in keys if f"{k[0]}/{k[1]}" not in drift]
    log_pairs = [
        (math.log(base[k].effective_speedup), math.log(treat[k].effective_speedup)) for k in clean
    ]
    acc_pairs = [
        (float(base[k].verdict == "accepted"), float(treat[k].verdict == "accepted")) for k in clean
    ]
    speed = paired_difference(log_pairs)
    correct = paired_difference(acc_pairs)
    verdict, why = decide_treatment(speed, math.log1p(min_effect))
    if not measured:
        verdict, why = "not_measured", NOT_MEASURED
    waiting = [k for k in pending if k.split("/")[-2] in (treatment, baseline)]
    if waiting:
        verdict = "undecided"
        why = (
            f"incomplete: {len(waiting)} trial(s) of these conditions have no outcome yet "
            f"({', '.join(waiting[:3])}{', ...' if len(waiting) > 3 else ''}); run the "
            "experiment to the end"
        )
    if drift:
        why += f"; {len(drift)} pair(s) excluded for drift"
    return TreatmentComparison(
        treatment=treatment,
        baseline=baseline,
        pairs=len(clean),
        drift_excluded=drift,
        log_speedup_diff=speed.estimate if measured else None,
        log_speedup_ci=_interval(speed) if measured else None,
        correctness_diff=correct.estimate,
        correctness_ci=_interval(correct),
        verdict=verdict,
        why=why,
    )


def _interval(e: stats.Estimate) -> list[float] | None:
    return None if e.lo is None or e.hi is None else [e.lo, e.hi]


def compare_experiment(state: ExperimentState) -> ExperimentComparison:
    plan = state.plan
    seed = plan.plan.experiment.seed
    rows = [row for s in state.schedule if (row := key_row(state, s)) is not None]
    pending = [s.key for s in state.pending]
    measured = plan.plan.judge.measure
    conditions = [
        summarize_condition(
            c.name,
            [r for r in rows if r.condition == c.name],
            sum(s.condition == c.name for s in state.pending),
            seed,
            measured,
        )
        for c in plan.plan.conditions
    ]
    by_task = [
        evolve(
            summarize_condition(
                c.name,
                [r for r in rows if r.condition == c.name and r.task == t],
                sum(s.condition == c.name and s.task == t for s in state.pending),
                seed,
                measured,
            ),
            task=t,
        )
        for t in plan.tasks
        for c in plan.plan.conditions
    ]
    comparisons = []
    if plan.plan.compare is not None:
        cmp = plan.plan.compare
        comparisons = [
            compare_treatment(t, cmp.baseline, rows, cmp.min_effect, pending, measured)
            for t in cmp.treatments
        ]
    return ExperimentComparison(
        experiment=plan.name,
        plan_sha256=plan.sha256,
        scheduled=len(state.schedule),
        complete=sum(r.outcome == "complete" for r in rows),
        failed=sum(r.outcome == "failed" for r in rows),
        pending=pending,
        speed_measured=measured,
        interrupted=_interrupted(state),
        conditions=conditions,
        by_task=by_task,
        comparisons=comparisons,
        trials=rows,
    )


def _interrupted(state: ExperimentState) -> list[str]:
    """'id (key): error' of every interrupted attempt, in schedule order."""
    return [
        f"{r.id} ({s.key}): {(r.error or 'no error recorded')[:300]}"
        for s in state.schedule
        for r in reversed(state.rows.get(s.key, []))
        if r.state == "interrupted"
    ]
