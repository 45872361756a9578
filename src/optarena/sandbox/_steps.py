"""The isolation steps a sandbox takes, and what its report says of them: one builder that both
`Sandbox` (a candidate's worker) and `AgentSandbox` (an agent's tree) use.

Each measure is applied where the policy wants it and the machine allows it, and reported
either way: `measures` holds each one's state in words (`off`, `unavailable`, or what was
applied), `notes` why one that was wanted is missing. A sandbox asks `wanted` before a step,
`attempt`s what can fail with an OSError (a uid lease, a cgroup), and `record`s what it
applied. How its processes are found (`members`) and what its report says of processes and
cleanup (`processes`, `cleanup`) are the same rules for both.
"""

from __future__ import annotations

import subprocess
import time
from collections.abc import Callable
from typing import Protocol, TypeVar

from optarena.processes import (
    HeldNamespace,
    descendants,
    describe,
    is_zombie,
    stop_then_kill,
    wait_dead,
)

T = TypeVar("T")


class _Members(Protocol):
    """What lists a sandbox's processes completely: its cgroup, or its leased uid."""

    def procs(self) -> set[int]: ...


class _UidMembers(Protocol):
    def processes(self) -> set[int]: ...


class IsolationSteps:
    """The measures of one sandbox as it applies them, for its report."""

    def __init__(self) -> None:
        self.measures: dict[str, str] = {}
        self.notes: list[str] = []

    def record(self, name: str, state: str, why: str | None = None) -> None:
        """Measure `name` is `state`; `why`, when given, is noted as `name: why`."""
        self.measures[name] = state
        if why is not None:
            self.notes.append(f"{name}: {why}")

    def wanted(self, name: str, wanted: bool, why_not: str | None = None) -> bool:
        """Whether to take step `name`: not when the policy does not want it (`off`) or the
        machine cannot (`unavailable`, and `why_not` noted)."""
        if not wanted:
            self.record(name, "off")
            return False
        if why_not is not None:
            self.record(name, "unavailable", why_not)
            return False
        return True

    def attempt(
        self, name: str, make: Callable[[], T], *, state: str = "unavailable", why: str = "{}"
    ) -> T | None:
        """`make()`, or None when it raises OSError: then measure `name` is `state`, and the
        note says why (`why`, formatted with the error)."""
        try:
            return make()
        except OSError as e:
            self.record(name, state, why.format(e))
            return None

    def processes(self, nproc: int | None) -> str:
        """The report's `processes`: the cgroup's `pids.max` and the nproc rlimit, as set."""
        cgroup = self.measures.get("cgroup", "")
        limits = [cgroup] if cgroup.startswith("pids") else []
        if nproc:
            limits.append(f"rlimit nproc={nproc}")
        return ", ".join(limits) or "not enforced"

    def cleanup(self) -> str:
        """The report's `cleanup`: what lists every process to end (a cgroup, a dedicated
        uid), else the process tree by parent links."""
        if self.measures.get("cgroup", "off") not in ("off", "unavailable"):
            return "cgroup"
        return "uid" if self.measures.get("user", "").startswith("uid") else "process tree"


def members(
    proc: subprocess.Popen[bytes] | None,
    cgroup: _Members | None,
    lease: _UidMembers | None,
    namespace: HeldNamespace | None,
    *,
    live: bool = False,
) -> set[int]:
    """Every process of a sandbox, its first one included: its cgroup's or its uid's where it
    has one, else the tree below `proc` by parent links and whatever is in its `namespace`
    (orphans reparented away are still there); `live` drops the zombies of the latter."""
    if proc is None:
        return set()
    if cgroup is not None:
        return cgroup.procs()
    if lease is not None:
        return lease.processes()
    found = {proc.pid, *descendants([proc.pid])}
    if namespace is not None:
        found |= namespace.pids()
    return {p for p in found if not is_zombie(p)} if live else found


def alive_members(
    cgroup: _Members | None, lease: _UidMembers | None, namespaces: list[HeldNamespace]
) -> set[int]:
    """Every live process that any of a sandbox's lists still names: its cgroup, its uid, its
    namespaces (each complete on its own; together, what one kill path missed another finds)."""
    found: set[int] = set()
    if cgroup is not None:
        found |= cgroup.procs()
    if lease is not None:
        found |= lease.processes()
    for ns in namespaces:
        found |= ns.pids()
    return {p for p in found if not is_zombie(p)}


def kill_until_gone(collect: Callable[[], set[int]], timeout_s: float = 5.0) -> list[str]:
    """Stop and kill what `collect` finds until it finds nothing or `timeout_s` passes (with
    at most 2 s more for the last kill's deaths); the survivors, described (`describe`):
    empty when everything ended."""
    deadline = time.monotonic() + timeout_s
    while (left := collect()) and (rest := deadline - time.monotonic()) > 0:
        stop_then_kill(collect, timeout_s=min(2.0, rest))
        wait_dead(left, min(0.2, rest))
    return sorted(describe(pid) for pid in collect())
