"""Process isolation for untrusted code: namespaces, a dedicated uid, cgroups, rlimits,
seccomp, timeouts and the cleanup of everything a sandboxed tree started. `Sandbox` (a
candidate's worker) and `AgentSandbox` (an agent's tree) apply what the machine allows and
report it. Reading /proc and ending process trees is `optarena.processes`; reading what an
agent made without following a link is `optarena.files`."""

from optarena.sandbox._agent import AgentSandbox, AgentSandboxError, AgentSandboxPolicy
from optarena.sandbox._agent_sweep import sweep_agent_leftovers
from optarena.sandbox._linux import process_vm_read
from optarena.sandbox._process import ResourceLimits, spawn
from optarena.sandbox._sandbox import (
    Capabilities,
    Sandbox,
    SandboxPolicy,
    SandboxStartError,
    probe,
)

__all__ = [
    "AgentSandbox",
    "AgentSandboxError",
    "AgentSandboxPolicy",
    "Capabilities",
    "ResourceLimits",
    "Sandbox",
    "SandboxPolicy",
    "SandboxStartError",
    "probe",
    "process_vm_read",
    "spawn",
    "sweep_agent_leftovers",
]
