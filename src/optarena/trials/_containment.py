"""One builder of the agent sandbox's spec, for every place optarena runs an agent's code.

A trial's agent, a harness follow-up turn resuming its session, and an artifact the agent built
(qualified in a replay, or served to the next attempt) are contained the same way: the ledger
directory (every trial's workspace, logs and the database), every other trial's workspace and
what the task keeps from the agent (its package, an external task's source repository and
holdout) are hidden, the agent's process limit holds, and its home is private. Building that
in one place is what keeps a follow-up turn from forgetting a limit the trial kept (it once
ignored `max_processes` and the task's hidden paths).

Under a default-deny root (`optarena.sandbox`) only named paths exist anyway; the hidden list
still matters where a hidden path lies inside something shown (a task package inside the
installed optarena) and where the machine allows no private root.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace
from pathlib import Path

from optarena.agents import SandboxSpec
from optarena.ledger import Ledger
from optarena.records import AgentLimits
from optarena.sandbox import AgentSandboxPolicy


def agent_sandbox_spec(
    ledger: Ledger,
    *,
    workspace: Path | None,
    home: Path | None,
    limits: AgentLimits | None = None,
    task_hidden: Sequence[Path] = (),
    enabled: bool = True,
) -> SandboxSpec:
    """How to contain an agent (or its artifact) working in `workspace` (None: none of the
    ledger's), with `home` as its private HOME. `enabled=False` is `--no-agent-sandbox`."""
    if not enabled:
        return SandboxSpec(policy=AgentSandboxPolicy.off())
    mine = workspace.resolve() if workspace is not None else None
    others = [w for w in ledger.workspaces() if w.is_dir() and w.resolve() != mine]
    policy = AgentSandboxPolicy()
    if limits is not None and limits.max_processes is not None:
        policy = replace(policy, max_processes=limits.max_processes)
    hidden = (ledger.home, *others, *task_hidden)
    return SandboxSpec(policy=policy, hidden=hidden, home=home)
