"""Experiments: declared conditions x tasks x repetitions, run resumably into the ledger and
compared with statistics over trials (see `docs/experiments.md`)."""

from optarena.experiments._compare import (
    ConditionSummary,
    ExperimentComparison,
    Total,
    TreatmentComparison,
    TrialRow,
    compare_experiment,
)
from optarena.experiments._execute import (
    ExperimentState,
    experiment_state,
    run_experiment,
    trial_config,
)
from optarena.experiments._plan import ExperimentPlan, LoadedPlan, load_plan
from optarena.experiments._schedule import ScheduledTrial, drift, freeze, lock_path, schedule

__all__ = [
    "ConditionSummary",
    "ExperimentComparison",
    "ExperimentPlan",
    "ExperimentState",
    "LoadedPlan",
    "ScheduledTrial",
    "Total",
    "TreatmentComparison",
    "TrialRow",
    "compare_experiment",
    "drift",
    "experiment_state",
    "freeze",
    "load_plan",
    "lock_path",
    "run_experiment",
    "schedule",
    "trial_config",
]
