"""Task packages: the spec model, the loader and the built-in library."""

from optarena.tasks._loader import (
    BUILTIN_DIR,
    Task,
    builtin_task_ids,
    in_scope,
    load_task,
    resolve_task,
)
from optarena.tasks._model import (
    REASON_CODES,
    TASK_SCHEMA_VERSION,
    CBinding,
    Control,
    EntryPoint,
    MeasurementDefaults,
    Requirements,
    TaskSpec,
    Tolerance,
    WorkerLimits,
    Workload,
)
from optarena.tasks._requirements import cuda_available, unmet_requirements

__all__ = [
    "BUILTIN_DIR",
    "REASON_CODES",
    "TASK_SCHEMA_VERSION",
    "CBinding",
    "Control",
    "EntryPoint",
    "MeasurementDefaults",
    "Requirements",
    "Task",
    "TaskSpec",
    "Tolerance",
    "WorkerLimits",
    "Workload",
    "builtin_task_ids",
    "cuda_available",
    "in_scope",
    "load_task",
    "resolve_task",
    "unmet_requirements",
]
