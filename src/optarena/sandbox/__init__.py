"""Process isolation for untrusted code: namespaces, a dedicated uid, cgroups, rlimits,
timeouts and process-tree cleanup. `Sandbox` applies what the machine allows and reports it;
`open_untrusted`, `walk_untrusted`, `copy_untrusted` and `survey` read what an agent may have
made (and may still be changing) without following a link."""

from optarena.sandbox._agent import AgentSandbox, AgentSandboxError, AgentSandboxPolicy
from optarena.sandbox._agent_sweep import sweep_agent_leftovers
from optarena.sandbox._linux import process_vm_read
from optarena.sandbox._process import ResourceLimits, kill_tree, spawn
from optarena.sandbox._sandbox import Capabilities, Sandbox, SandboxPolicy, probe
from optarena.sandbox._untrusted import (
    Entry,
    Survey,
    SurveyFinding,
    UntrustedFileError,
    Walk,
    copy_entry,
    copy_untrusted,
    entries_under,
    is_utf8,
    name_line,
    open_untrusted,
    printable,
    read_untrusted,
    refusal,
    remove_tree,
    survey,
    temporary_tree,
    walk_untrusted,
)

__all__ = [
    "AgentSandbox",
    "AgentSandboxError",
    "AgentSandboxPolicy",
    "Capabilities",
    "Entry",
    "ResourceLimits",
    "Sandbox",
    "SandboxPolicy",
    "Survey",
    "SurveyFinding",
    "UntrustedFileError",
    "Walk",
    "copy_entry",
    "copy_untrusted",
    "entries_under",
    "is_utf8",
    "kill_tree",
    "name_line",
    "open_untrusted",
    "printable",
    "probe",
    "process_vm_read",
    "read_untrusted",
    "refusal",
    "remove_tree",
    "spawn",
    "survey",
    "sweep_agent_leftovers",
    "temporary_tree",
    "walk_untrusted",
]
