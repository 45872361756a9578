"""External project tasks: a user's own git repository, judged by its own quality gate and
benchmark, fixed (frozen) before any agent runs. See `docs/external-tasks.md`."""

from optarena.tasks.external._environment import Environment, ResolvedEnvironment
from optarena.tasks.external._spec import (
    Benchmark,
    ExternalLimits,
    ExternalMeasurement,
    ExternalSpec,
    FrozenExternal,
    Metric,
    Scale,
    freeze_external,
    freeze_warnings,
    git,
    git_bytes,
    is_external_spec,
    load_frozen,
    readable,
)

__all__ = [
    "Benchmark",
    "Environment",
    "ExternalLimits",
    "ExternalMeasurement",
    "ExternalSpec",
    "FrozenExternal",
    "Metric",
    "ResolvedEnvironment",
    "Scale",
    "freeze_external",
    "freeze_warnings",
    "git",
    "git_bytes",
    "is_external_spec",
    "load_frozen",
    "readable",
]
