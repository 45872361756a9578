"""Trials: one agent run on one task in a fresh workspace, judged and recorded in the ledger."""

from optarena.trials._containment import agent_sandbox_spec
from optarena.trials._delivery import keep_log
from optarena.trials._judging import OUT_OF_SCOPE, JudgeFn, combine, judge_delivery
from optarena.trials._rejudge import rejudge
from optarena.trials._sources import ExternalTask, PackageTask, Prepared, TrialTask, trial_task
from optarena.trials._trial import (
    TrialConfig,
    TrialHook,
    TrialInterrupted,
    TrialProgress,
    new_trial_id,
    run_trial,
    sigterm_interrupts,
    start_record,
)
from optarena.trials._workspace import (
    Delivery,
    DeliveryRefused,
    WorkspaceLimits,
    capture,
    check_workspace,
    init_repos,
    write_starter,
)

__all__ = [
    "OUT_OF_SCOPE",
    "Delivery",
    "DeliveryRefused",
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
    "capture",
    "check_workspace",
    "combine",
    "init_repos",
    "judge_delivery",
    "keep_log",
    "new_trial_id",
    "rejudge",
    "run_trial",
    "sigterm_interrupts",
    "start_record",
    "trial_task",
    "write_starter",
]
