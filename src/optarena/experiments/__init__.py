"""Experiments: declared conditions x tasks x repetitions, run resumably into the ledger and
compared with statistics over trials (see `docs/experiments.md`)."""

from optarena.experiments._compare import compare_experiment
from optarena.experiments._execute import run_experiment, trial_config
from optarena.experiments._plan import LoadedPlan, load_plan
from optarena.experiments._ray import RayOptions, import_ray
from optarena.experiments._schedule import (
    ScheduledTrial,
    drift,
    freeze,
    lock_path,
    plan_identity,
    schedule,
)
from optarena.experiments._state import ExperimentState, experiment_state

__all__ = [
    "ExperimentState",
    "LoadedPlan",
    "RayOptions",
    "ScheduledTrial",
    "compare_experiment",
    "drift",
    "experiment_state",
    "freeze",
    "import_ray",
    "load_plan",
    "lock_path",
    "plan_identity",
    "run_experiment",
    "schedule",
    "trial_config",
]
