"""What this machine lets the sandbox use, found by trying each measure once in a throwaway
child (so the reason a measure is missing is the kernel's own error, not a guess)."""

from __future__ import annotations

import os
import site
import sys
from dataclasses import dataclass, field
from functools import cache
from pathlib import Path

from optarena.sandbox import _linux
from optarena.sandbox._cgroup import (
    FEATURES,
    Layout,
    WorkerCgroups,
    candidates,
    find_hierarchies,
    plan_layout,
    sweep_stale,
)
from optarena.sandbox._child import ChildPlan, try_child
from optarena.sandbox._mounts import Mask, private_root


@dataclass(frozen=True)
class Capabilities:
    """What this machine lets us use; each value is None (usable) or the reason it is not."""

    root: bool
    netns: str | None
    mountns: str | None
    cgroup: str | None  # the pids feature (process limit and complete membership)
    cgroup_base: Path | None = field(default=None, compare=False)  # where pids cgroups go
    cgroups: Layout = field(default_factory=Layout, compare=False)  # every cgroup feature
    pidns: str | None = "not probed"  # a PID namespace with its own /proc
    ipcns: str | None = "not probed"
    readonly_root: str | None = "not probed"  # every mount read-only but chosen ones
    private_root: str | None = "not probed"  # a default-deny root (`_root`, pivot_root)


def _works(layout: Layout) -> str | None:
    """None if cgroups of this layout can be made and joined by a child, else why not."""
    try:
        # A cpuset takes no task before it has a CPU (and, in v1, memory nodes).
        cpus = tuple(sorted(os.sched_getaffinity(0)))[:1]
        trial = WorkerCgroups(layout, max_pids=8, memory_bytes=256 << 20, cpus=cpus)
    except OSError as e:
        return f"cannot create a cgroup: {e}"
    try:
        failed = try_child(ChildPlan("/", cgroup_procs=trial.procs_files))
    finally:
        trial.remove()
    return None if failed is None else f"cannot join a cgroup: {failed}"


def _probe_cgroups() -> Layout:
    """Which cgroup features work here: for each, the best hierarchy whose cgroup can be made
    and joined by a throwaway child (a v2 tree without cgroup.freeze falls back to v1)."""
    found, notes = find_hierarchies()
    sweep_stale(h.base for h in found)
    planned = plan_layout(found, FEATURES, "; ".join(notes))
    chosen, why_not = {}, dict(planned.why_not)
    for feature in planned.chosen:
        reasons = []
        for h in candidates(found, feature):
            why = _works(Layout({feature: h}))
            if why is None:
                chosen[feature] = h
                break
            reasons.append(f"v{h.version}: {why}")
        else:
            why_not[feature] = "; ".join(reasons)
    return Layout(chosen, why_not)


@cache
def probe() -> Capabilities:
    """Try each measure once per process, in a throwaway child."""
    root = os.geteuid() == 0
    if not _linux.available():
        why = "not Linux"
        return Capabilities(
            root, why, why, why, pidns=why, ipcns=why, readonly_root=why, private_root=why
        )
    ids = None if root else (os.getuid(), os.getgid())
    user = 0 if root else _linux.CLONE_NEWUSER
    # "/" rather than the caller's cwd: a cwd under /tmp (a CI checkout) vanishes behind the
    # probe's /tmp mask, which would make mount namespaces look unavailable when they are not.
    cwd = "/"
    ns = _linux.CLONE_NEWNS
    netns = try_child(ChildPlan(cwd, user | _linux.CLONE_NEWNET, ids))
    tmp = (Mask("/tmp", (), True),)
    mountns = try_child(ChildPlan(cwd, user | ns, ids, masks=tmp))
    pidns = try_child(ChildPlan(cwd, user | ns | _linux.CLONE_NEWPID, ids))
    ipcns = try_child(ChildPlan(cwd, user | _linux.CLONE_NEWIPC, ids))
    readonly = try_child(ChildPlan(cwd, user | ns, ids, masks=tmp, readonly=("/tmp",)))
    # As sandboxes use it: with a fresh /proc in a PID namespace where there is one (inside a
    # user namespace that mount has conditions of its own).
    pid = _linux.CLONE_NEWPID if pidns is None else 0
    path_env = os.environ.get("PATH", "")
    empty = private_root([], [], ["/tmp"], fresh_proc=bool(pid), path_env=path_env)
    new_root = try_child(ChildPlan(cwd, user | ns | pid, ids, root=empty))
    layout = _probe_cgroups()
    pids = layout.chosen.get("pids")
    cgroup = layout.why_not.get("pids") if pids is None else None
    return Capabilities(
        root,
        netns,
        mountns,
        cgroup,
        pids.base if pids else None,
        layout,
        pidns=pidns,
        ipcns=ipcns,
        readonly_root=readonly,
        private_root=new_root,
    )


def interpreter_paths() -> list[str]:
    """What a worker interpreter reads: prefixes, the real executable's directory, packages."""
    paths = {sys.prefix, sys.base_prefix, sys.exec_prefix, sys.base_exec_prefix}
    paths.add(os.path.dirname(os.path.realpath(sys.executable)))
    paths.update(site.getsitepackages())
    return sorted(os.path.realpath(p) for p in paths if os.path.exists(p))
