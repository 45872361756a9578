"""Trials: one agent run on one task in a fresh workspace, judged and recorded in the ledger."""

from optarena.trials._containment import agent_sandbox_spec
from optarena.trials._delivery import keep_log
from optarena.trials._judging import JudgeFn
from optarena.trials._rejudge import rejudge
from optarena.trials._sources import ExternalTask, PackageTask, Prepared, TrialTask, trial_task
from optarena.trials._trial import (
    TrialConfig,
    TrialHook,
    TrialInterrupted,
    TrialProgress,
    run_trial,
    sigterm_interrupts,
    start_record,
)
from optarena.trials._workspace import WorkspaceLimits, write_starter

__all__ = [
    "ExternalTask",
    "JudgeFn",
    "PackageTask",
    "Prepared",
    "TrialConfig",
    "TrialHook",
    "TrialInterrupted",
    "TrialProgress",
    "TrialTask",
    "WorkspaceLimits",
    "agent_sandbox_spec",
    "keep_log",
    "rejudge",
    "run_trial",
    "sigterm_interrupts",
    "start_record",
    "trial_task",
    "write_starter",
]
