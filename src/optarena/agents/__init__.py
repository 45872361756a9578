"""Agent runners: the interface, the registry, metering, and the `command` and `replay` runners.

Real agents (`claude`, `codex`) live in their own modules and are imported only when asked for.
`RelayHost` is how an MCP server offered to an agent is reached from its sandbox.
"""

from optarena.agents._base import AgentRunner, RunContext, SandboxSpec
from optarena.agents._cli_agent import npm_cache
from optarena.agents._metering import proxy_limits, run_metered, with_metering
from optarena.agents._process import ProcessResult, run_logged
from optarena.agents._registry import (
    RUNNERS,
    create_runner,
    known_runners,
    runner_class,
    runner_ref,
)
from optarena.agents._relay_host import RelayHost
from optarena.records import AgentLimits, AgentOutcome, AgentStatus, Usage

__all__ = [
    "RUNNERS",
    "AgentLimits",
    "AgentOutcome",
    "AgentRunner",
    "AgentStatus",
    "ProcessResult",
    "RelayHost",
    "RunContext",
    "SandboxSpec",
    "Usage",
    "create_runner",
    "known_runners",
    "npm_cache",
    "proxy_limits",
    "run_logged",
    "run_metered",
    "runner_class",
    "runner_ref",
    "with_metering",
]
