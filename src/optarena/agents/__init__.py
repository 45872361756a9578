"""Agent runners: the interface, the registry, and the `command` and `replay` runners.

Real agents (`claude`, `codex`) live in their own modules and are imported only when asked for.
"""

from optarena.agents._base import (
    AgentLimits,
    AgentOutcome,
    AgentRunner,
    AgentStatus,
    RunContext,
    SandboxSpec,
    Usage,
)
from optarena.agents._process import ProcessResult, run_logged
from optarena.agents._registry import (
    RUNNERS,
    create_runner,
    known_runners,
    runner_class,
    runner_ref,
)

__all__ = [
    "RUNNERS",
    "AgentLimits",
    "AgentOutcome",
    "AgentRunner",
    "AgentStatus",
    "ProcessResult",
    "RunContext",
    "SandboxSpec",
    "Usage",
    "create_runner",
    "known_runners",
    "run_logged",
    "runner_class",
    "runner_ref",
]
