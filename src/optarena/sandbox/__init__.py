"""Process isolation for untrusted code: namespaces, a dedicated uid, cgroups, rlimits,
timeouts and process-tree cleanup. `Sandbox` applies what the machine allows and reports it."""

from optarena.sandbox._process import ResourceLimits, kill_tree, spawn
from optarena.sandbox._sandbox import Capabilities, Sandbox, SandboxPolicy, probe

__all__ = [
    "Capabilities",
    "ResourceLimits",
    "Sandbox",
    "SandboxPolicy",
    "kill_tree",
    "probe",
    "spawn",
]
