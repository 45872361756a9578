"""Agent runners: the interface, the registry, metering, and the `command` and `replay` runners.

Real agents (`claude`, `codex`) live in their own modules and are imported only when asked for.
What tools a runner's agent takes is declared on its class (`takes_mcp` and `mcp_args`,
`skills_dir`); `RelayHost` is how a server it is offered is reached from its sandbox.
"""

from optarena.agents._base import AgentRunner, McpServer, RunContext, SandboxSpec
from optarena.agents._cli_agent import npm_cache
from optarena.agents._metering import run_metered
from optarena.agents._process import ProcessResult, run_logged
from optarena.agents._registry import (
    create_runner,
    known_runners,
    mcp_runners,
    runner_class,
    runner_ref,
    skill_dirs,
)
from optarena.agents._relay_host import RelayHost

__all__ = [
    "AgentRunner",
    "McpServer",
    "ProcessResult",
    "RelayHost",
    "RunContext",
    "SandboxSpec",
    "create_runner",
    "known_runners",
    "mcp_runners",
    "npm_cache",
    "run_logged",
    "run_metered",
    "runner_class",
    "runner_ref",
    "skill_dirs",
]
