"""Process isolation for untrusted code: namespaces, a dedicated uid, cgroups, rlimits,
timeouts and process-tree cleanup. `Sandbox` applies what the machine allows and reports it;
`copy_untrusted` reads a tree an agent may still be changing without following a link."""

from optarena.sandbox._agent import AgentSandbox, AgentSandboxError, AgentSandboxPolicy
from optarena.sandbox._agent_sweep import sweep_agent_leftovers
from optarena.sandbox._process import ResourceLimits, kill_tree, spawn
from optarena.sandbox._sandbox import Capabilities, Sandbox, SandboxPolicy, probe
from optarena.sandbox._untrusted import (
    copy_entry,
    copy_untrusted,
    entries_under,
    remove_tree,
)

__all__ = [
    "AgentSandbox",
    "AgentSandboxError",
    "AgentSandboxPolicy",
    "Capabilities",
    "ResourceLimits",
    "Sandbox",
    "SandboxPolicy",
    "copy_entry",
    "copy_untrusted",
    "entries_under",
    "kill_tree",
    "probe",
    "remove_tree",
    "spawn",
    "sweep_agent_leftovers",
]
