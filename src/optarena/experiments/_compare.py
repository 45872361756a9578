"""From an experiment's trials to per-condition figures and treatment-vs-baseline verdicts.

Per trial the *effective* speed-up is the accepted candidate's speed-up, else 1.0 (a user who
adopts only accepted candidates keeps the baseline otherwise): failures count instead of
vanishing. Unknown tokens or cost stay unknown: a total over trials with some unknown is
reported with how many were unknown, never as if they were zero.
"""

from __future__ import annotations

import math
from collections import Counter

from optarena.experiments._execute import ExperimentState
from optarena.experiments._stats import (
    bootstrap_ci,
    decide,
    effective_speedup,
    expected_best_of_k,
    median,
    paired_difference,
    wilson,
)
from optarena.ledger import TrialRecord
from optarena.records import (
    ConditionSummary,
    ExperimentComparison,
    Total,
    TreatmentComparison,
    TrialRow,
    Usage,
)


def trial_row(r: TrialRecord) -> TrialRow:
    accepted = r.verdict == "accepted" and r.metrics is not None
    speedup = r.metrics.overall.speedup if accepted and r.metrics is not None else None
    metered = r.metered_usage
    runtime = (r.runtime or {}).get("sha256", "")
    wall = sum(r.phases_s.values()) if r.phases_s else None
    return TrialRow(
        trial_id=r.id,
        task=r.task.id,
        condition=r.labels.get("condition", "?"),
        repetition=int(r.labels.get("repetition", "0")),
        agent_status=r.agent_status,
        verdict=r.verdict,
        speedup=speedup,
        speed_verdict=r.metrics.verdict if accepted and r.metrics is not None else None,
        effective_speedup=effective_speedup(r.verdict == "accepted", speedup),
        metered_tokens=_in_out(metered),
        metered_cost_usd=metered.cost_usd if metered else None,
        reported_tokens=_in_out(r.usage),
        reported_cost_usd=r.usage.cost_usd,
        agent_wall_s=r.agent_wall_s,
        wall_s=wall,
        identity=f"{r.task.sha256[:12]}/{r.judge_sha256[:12]}/{str(runtime)[:12]}",
    )


def _in_out(u: Usage | None) -> int | None:
    """Input + output tokens; None when either is unknown or nothing was measured."""
    if u is None or u.input_tokens is None or u.output_tokens is None:
        return None
    return u.input_tokens + u.output_tokens


def _total(values: list[float | int | None]) -> Total:
    known = [float(v) for v in values if v is not None]
    return Total(value=sum(known) if known else None, unknown=len(values) - len(known))


def _ci(ci: tuple[float, float] | None) -> list[float] | None:
    return None if ci is None else [ci[0], ci[1]]


def summarize_condition(name: str, rows: list[TrialRow], seed: int) -> ConditionSummary:
    n = len(rows)
    accepted = [r for r in rows if r.verdict == "accepted"]
    improved = [r for r in accepted if r.speed_verdict == "improved"]
    speedups = [r.speedup for r in accepted if r.speedup is not None]
    eff = [r.effective_speedup for r in rows]
    cost = _total([r.metered_cost_usd for r in rows])
    log_gain = sum(math.log(e) for e in eff)
    known_cost = cost.value if cost.unknown == 0 else None
    return ConditionSummary(
        name=name,
        trials=n,
        agent_status=dict(Counter(r.agent_status or "none" for r in rows)),
        accepted=len(accepted),
        correctness_rate=len(accepted) / n if n else None,
        correctness_ci=_ci(wilson(len(accepted), n)),
        improved=len(improved),
        improvement_rate=len(improved) / n if n else None,
        improvement_ci=_ci(wilson(len(improved), n)),
        speedup_median=median(speedups) if speedups else None,
        speedup_ci=_ci(bootstrap_ci(speedups, seed=seed)),
        effective_median=median(eff) if eff else None,
        effective_ci=_ci(bootstrap_ci(eff, seed=seed)),
        best_of_k=_best_of_k(rows),
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
    treatment: str, baseline: str, rows: list[TrialRow], min_effect: float, seed: int
) -> TreatmentComparison:
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
    est, ci = paired_difference(log_pairs, seed=seed)
    cest, cci = paired_difference(acc_pairs, seed=seed + 1)
    verdict, why = decide(est, ci, math.log1p(min_effect), len(clean))
    if drift:
        why += f"; {len(drift)} pair(s) excluded for drift"
    return TreatmentComparison(
        treatment=treatment,
        baseline=baseline,
        pairs=len(clean),
        drift_excluded=drift,
        log_speedup_diff=est,
        log_speedup_ci=_ci(ci),
        correctness_diff=cest,
        correctness_ci=_ci(cci),
        verdict=verdict,
        why=why,
    )


def compare_experiment(state: ExperimentState) -> ExperimentComparison:
    plan = state.plan
    seed = plan.plan.experiment.seed
    done = [state.done(s.key) for s in state.schedule]
    rows = [trial_row(r) for r in done if r is not None]
    conditions = [
        summarize_condition(c.name, [r for r in rows if r.condition == c.name], seed)
        for c in plan.plan.conditions
    ]
    comparisons = []
    if plan.plan.compare is not None:
        cmp = plan.plan.compare
        comparisons = [
            compare_treatment(t, cmp.baseline, rows, cmp.min_effect, seed) for t in cmp.treatments
        ]
    return ExperimentComparison(
        experiment=plan.name,
        plan_sha256=plan.sha256,
        scheduled=len(state.schedule),
        complete=len(rows),
        conditions=conditions,
        comparisons=comparisons,
        trials=rows,
    )
