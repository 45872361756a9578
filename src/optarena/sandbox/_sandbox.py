"""The sandbox a candidate's worker runs in: what this machine allows, applied and reported.

Measures (each used where the kernel and our privileges allow it, and reported either way):

- **network**: a new network namespace with nothing in it (not even a working loopback);
- **user**: when the judge is root, a dedicated unprivileged uid per worker, so the candidate
  cannot signal, ptrace or write into the judge, its files or its results;
- **mounts**: a private mount namespace hiding the task package and giving private scratch
  directories (see `_mounts`);
- **cgroup**: a pids cgroup with `pids.max` = the task's process limit, which also lists every
  process the candidate started, however detached, for cleanup;
- always: rlimits, a new session, no-new-privileges, parent-death signal, and the worker as
  child subreaper so orphaned grandchildren stay in its tree.

Without root the network and mount namespaces come from an unprivileged user namespace, if
the kernel permits one; the uid cannot change, so the worker could still reach the judge's
files and processes: the report then says `user: same` and the guarantees document says what
that means.
"""

from __future__ import annotations

import contextlib
import os
import resource
import shutil
import signal
import site
import subprocess
import sys
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from functools import cache
from pathlib import Path
from typing import IO, Any

from optarena.sandbox import _linux
from optarena.sandbox._cgroup import (
    FEATURES,
    Layout,
    WorkerCgroups,
    attach_self,
    find_hierarchies,
    plan_layout,
    sweep_stale,
)
from optarena.sandbox._mounts import Mask, apply_masks, blockers, plan_masks
from optarena.sandbox._process import MiB, ResourceLimits, kill_tree, spawn
from optarena.sandbox._tree import (
    continue_all,
    descendants,
    is_zombie,
    namespace_of,
    pids_in_namespace,
    stop_all,
    stop_then_kill,
)
from optarena.sandbox._uids import UidLease, lease_uid


@dataclass(frozen=True)
class SandboxPolicy:
    """Which measures to use where available. `none()` exists to measure what isolation costs."""

    network: bool = True
    user: bool = True
    mounts: bool = True
    cgroup: bool = True
    guard: bool = True  # the worker's audit hook and tamper checks (applied by the judge worker)
    cpu_accounting: bool = True  # the kernel's CPU count of the worker's cgroup (`cpu_ns`)
    freezer: bool = True  # freeze with the cgroup freezer (False: SIGSTOP every member)
    memory: bool = True  # a memory cgroup limit (tmpfs pages included) = the address-space limit

    @classmethod
    def none(cls) -> SandboxPolicy:
        return cls(
            network=False,
            user=False,
            mounts=False,
            cgroup=False,
            guard=False,
            cpu_accounting=False,
            freezer=False,
            memory=False,
        )


@dataclass(frozen=True)
class ChildPlan:
    """Everything the child does between fork and exec, decided in the parent."""

    workdir: str
    unshare_flags: int = 0
    userns_ids: tuple[int, int] | None = None  # (uid, gid) to map to themselves
    masks: tuple[Mask, ...] = ()
    scratch_mb: int = 64
    cgroup_procs: tuple[str, ...] = ()
    uid: int | None = None
    nproc: int | None = None  # RLIMIT_NPROC, set after unshare (a new user namespace's limit
    # is captured from the creator's at creation, so set before it would cap the whole user)
    err_fd: int = -1


def _write(path: str, text: str) -> None:
    fd = os.open(path, os.O_WRONLY)
    try:
        os.write(fd, text.encode())
    finally:
        os.close(fd)


def _child_setup(plan: ChildPlan) -> None:
    """Runs in the forked child. Order matters: join the cgroup and build namespaces while
    privileged, then drop the uid, then set what a uid change would clear (pdeathsig)."""
    try:
        attach_self(plan.cgroup_procs)
        if plan.unshare_flags:
            _linux.unshare(plan.unshare_flags)
        if plan.userns_ids is not None:
            uid, gid = plan.userns_ids
            _write("/proc/self/setgroups", "deny")
            _write("/proc/self/uid_map", f"{uid} {uid} 1")
            _write("/proc/self/gid_map", f"{gid} {gid} 1")
        if plan.unshare_flags & _linux.CLONE_NEWNS:
            apply_masks(plan.masks, plan.scratch_mb)
        os.chdir(plan.workdir)
        if plan.nproc is not None:
            resource.setrlimit(resource.RLIMIT_NPROC, (plan.nproc, plan.nproc))
        if plan.uid is not None:
            os.setgroups([])
            os.setgid(plan.uid)
            os.setuid(plan.uid)
        _linux.prctl(_linux.PR_SET_NO_NEW_PRIVS, 1)
        _linux.prctl(_linux.PR_SET_CHILD_SUBREAPER, 1)
        _linux.prctl(_linux.PR_SET_PDEATHSIG, signal.SIGKILL)
    except BaseException as e:
        if plan.err_fd >= 0:
            with contextlib.suppress(OSError):
                os.write(plan.err_fd, f"{type(e).__name__}: {e}".encode()[:500])
        raise


def _true_binary() -> str:
    return shutil.which("true") or "/bin/true"


def _try_child(plan: ChildPlan) -> str | None:
    """Run `true` with this plan; None if it worked, else why not."""
    r, w = os.pipe()
    try:
        subprocess.run(
            [_true_binary()],
            preexec_fn=lambda: _child_setup(replace(plan, err_fd=w)),
            check=True,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
            timeout=10,
        )
        return None
    except (OSError, subprocess.SubprocessError) as e:
        os.close(w)
        w = -1
        detail = os.read(r, 500).decode(errors="replace")
        return detail or str(e)
    finally:
        os.close(r)
        if w >= 0:
            os.close(w)


@dataclass(frozen=True)
class Capabilities:
    """What this machine lets us use; each value is None (usable) or the reason it is not."""

    root: bool
    netns: str | None
    mountns: str | None
    cgroup: str | None  # the pids feature (process limit and complete membership)
    cgroup_base: Path | None = field(default=None, compare=False)  # where pids cgroups go
    cgroups: Layout = field(default_factory=Layout, compare=False)  # every cgroup feature


def _probe_cgroups() -> Layout:
    """Which cgroup features work here: each is created, and joined by a throwaway child."""
    found, notes = find_hierarchies()
    sweep_stale(h.base for h in found)
    layout = plan_layout(found, FEATURES, "; ".join(notes))
    chosen, why_not = dict(layout.chosen), dict(layout.why_not)
    for feature in list(chosen):
        try:
            trial = WorkerCgroups(layout.only([feature]), max_pids=8, memory_bytes=256 << 20)
        except OSError as e:
            why_not[feature] = f"cannot create a cgroup: {e}"
            del chosen[feature]
            continue
        try:
            failed = _try_child(ChildPlan("/", cgroup_procs=trial.procs_files))
        finally:
            trial.remove()
        if failed is not None:
            why_not[feature] = f"cannot join a cgroup: {failed}"
            del chosen[feature]
    return Layout(chosen, why_not)


@cache
def probe() -> Capabilities:
    """Try each measure once per process, in a throwaway child."""
    root = os.geteuid() == 0
    if not _linux.available():
        why = "not Linux"
        return Capabilities(root, why, why, why)
    ids = None if root else (os.getuid(), os.getgid())
    user_flag = 0 if root else _linux.CLONE_NEWUSER
    # "/" rather than the caller's cwd: a cwd under /tmp (a CI checkout) vanishes behind the
    # probe's /tmp mask, which would make mount namespaces look unavailable when they are not.
    cwd = "/"
    netns = _try_child(ChildPlan(cwd, user_flag | _linux.CLONE_NEWNET, ids))
    mnt_plan = ChildPlan(cwd, user_flag | _linux.CLONE_NEWNS, ids, masks=(Mask("/tmp", (), True),))
    mountns = _try_child(mnt_plan)
    layout = _probe_cgroups()
    pids = layout.chosen.get("pids")
    cgroup = layout.why_not.get("pids") if pids is None else None
    return Capabilities(root, netns, mountns, cgroup, pids.base if pids else None, layout)


def interpreter_paths() -> list[str]:
    """What a worker interpreter reads: prefixes, the real executable's directory, packages."""
    paths = {sys.prefix, sys.base_prefix, sys.exec_prefix, sys.base_exec_prefix}
    paths.add(os.path.dirname(os.path.realpath(sys.executable)))
    paths.update(site.getsitepackages())
    return sorted(os.path.realpath(p) for p in paths if os.path.exists(p))


def _chown_tree(root: Path, uid: int) -> None:
    for dirpath, dirnames, filenames in os.walk(root):
        for name in (*dirnames, *filenames):
            os.lchown(os.path.join(dirpath, name), uid, uid)
    os.chown(root, uid, uid)
    os.chmod(root, 0o700)


class Sandbox:
    """One worker's isolation: prepared and applied by `spawn`, queried between calls, ended
    by `close`. Never raises for what the machine lacks: it degrades and says so in `report`."""

    def __init__(
        self,
        workdir: Path,
        limits: ResourceLimits,
        policy: SandboxPolicy | None = None,
        *,
        hide: Sequence[Path] = (),
        needed: Sequence[Path] = (),
        scratch_mb: int = 64,
    ) -> None:
        self.workdir = Path(workdir).resolve()
        self.limits = limits
        self.policy = policy or SandboxPolicy()
        self.hide = [os.path.realpath(p) for p in hide]
        self.needed = [os.path.realpath(p) for p in needed]
        self.scratch_mb = scratch_mb
        self.proc: subprocess.Popen[bytes] | None = None
        self.lease: UidLease | None = None
        self.cgroup: WorkerCgroups | None = None
        self._stopped: set[int] = set()  # what the SIGSTOP fallback stopped, to continue
        self._frozen = False
        self.notes: list[str] = []
        self.measures: dict[str, str] = {}
        self.userns = False
        self.namespace: tuple[str, str] | None = None  # (kind, id) shared by all its processes

    # -- starting ---------------------------------------------------------------------------

    def _lease_uid(self, caps: Capabilities, use_mounts: bool, needed: list[str]) -> None:
        if not self.policy.user:
            self.measures["user"] = "off"
            return
        if not caps.root:
            self.measures["user"] = "same"
            self.notes.append("user: the judge is not root, so the worker keeps its uid")
            return
        if not use_mounts:
            probe_uid = 1_500_000
            if blockers(needed, probe_uid, probe_uid):
                self.measures["user"] = "same"
                self.notes.append(
                    "user: an unprivileged uid cannot reach the interpreter "
                    "without a mount namespace"
                )
                return
        try:
            self.lease = lease_uid()
        except OSError as e:
            self.measures["user"] = "same"
            self.notes.append(f"user: no uid lease ({e})")
            return
        _chown_tree(self.workdir, self.lease.uid)
        self.measures["user"] = f"uid {self.lease.uid}"

    def _cgroup_features(self) -> list[str]:
        """The cgroup features this worker wants, by policy."""
        wanted = {
            "pids": True,
            "cpu": self.policy.cpu_accounting,
            "freezer": self.policy.freezer,
            "memory": self.policy.memory and self.limits.address_space_mb is not None,
        }
        return [f for f in FEATURES if wanted[f]]

    def _make_cgroup(self, caps: Capabilities, helpers: int) -> None:
        """Create this worker's cgroups; `helpers`: our own processes inside (pid namespace)."""
        if not self.policy.cgroup:
            self.measures["cgroup"] = "off"
            return
        layout = caps.cgroups.only(self._cgroup_features())
        for feature, why in layout.why_not.items():
            self.notes.append(f"cgroup {feature}: {why}")
        if not layout.chosen:
            self.measures["cgroup"] = "unavailable"
            return
        mem = self.limits.address_space_mb
        try:
            self.cgroup = WorkerCgroups(
                layout,
                max_pids=(self.limits.processes or 64) + helpers,
                memory_bytes=mem * MiB if mem is not None else None,
            )
        except OSError as e:
            self.measures["cgroup"] = "unavailable"
            self.notes.append(f"cgroup: {e}")
            return
        if "pids" in layout.chosen:
            self.measures["cgroup"] = f"pids.max={self.limits.processes or 64}"
        else:
            self.measures["cgroup"] = "no pids controller"
        if "memory" in layout.chosen:
            self.measures["memory"] = f"cgroup limit {mem} MiB"

    def _ns_measure(self, name: str, wanted: bool, why_not: str | None) -> bool:
        if not wanted:
            self.measures[name] = "off"
            return False
        if why_not is not None:
            self.measures[name] = "unavailable"
            self.notes.append(f"{name}: {why_not}")
            return False
        return True

    def _plan(self) -> tuple[ChildPlan, ResourceLimits]:
        caps = probe()
        use_net = self._ns_measure("network", self.policy.network, caps.netns)
        use_mnt = self._ns_measure("mounts", self.policy.mounts, caps.mountns)
        needed = [*interpreter_paths(), *self.needed, str(self.workdir)]
        self._lease_uid(caps, use_mnt, needed)
        self._make_cgroup(caps, helpers=0)
        flags = (_linux.CLONE_NEWNET if use_net else 0) | (_linux.CLONE_NEWNS if use_mnt else 0)
        ids = None
        if flags and not caps.root:
            flags |= _linux.CLONE_NEWUSER
            ids = (os.getuid(), os.getgid())
        masks: tuple[Mask, ...] = ()
        if use_mnt:
            uid = self.lease.uid if self.lease else None
            blocked = list(blockers(needed, uid, uid)) if uid is not None else []
            scratch = [d for d in ("/tmp", "/var/tmp", "/dev/shm") if os.path.isdir(d)]
            masks = tuple(plan_masks(needed, self.hide, scratch, blocked))
            hidden = [m.path for m in masks if not m.scratch]
            self.measures["mounts"] = "private" + (
                f" (hidden: {', '.join(hidden)})" if hidden else ""
            )
        if use_net:
            self.measures["network"] = "netns"
        # RLIMIT_NPROC counts the tasks of a real uid: exact for a leased uid, and inside a user
        # namespace it counts that namespace's tasks only (Linux >= 5.14); otherwise it would
        # count every process of the judge's user, so it is not set.
        self.userns = bool(flags & _linux.CLONE_NEWUSER)
        plan = ChildPlan(
            workdir=str(self.workdir),
            unshare_flags=flags,
            userns_ids=ids,
            masks=masks,
            scratch_mb=self.scratch_mb,
            cgroup_procs=self.cgroup.procs_files if self.cgroup else (),
            uid=self.lease.uid if self.lease else None,
            nproc=self.limits.processes if self.lease or self.userns else None,
        )
        return plan, replace(self.limits, processes=None)

    def spawn(
        self,
        argv: Sequence[str],
        *,
        env: Mapping[str, str],
        pass_fds: Sequence[int] = (),
        stdout: IO[Any] | int | None = None,
        stderr: IO[Any] | int | None = None,
    ) -> subprocess.Popen[bytes]:
        """Start the worker inside the sandbox (or, if the isolated start fails, without it)."""
        plan, limits = self._plan()
        r, w = os.pipe()
        setup: Callable[[], None] = lambda: _child_setup(replace(plan, err_fd=w))  # noqa: E731
        try:
            self.proc = spawn(
                argv,
                cwd=self.workdir,
                env=env,
                limits=limits,
                pass_fds=pass_fds,
                stdout=stdout,
                stderr=stderr,
                setup=setup,
            )
        except (OSError, subprocess.SubprocessError) as e:
            os.close(w)
            w = -1
            detail = os.read(r, 500).decode(errors="replace") or str(e)
            self._release()
            self.notes.append(f"isolated start failed ({detail}); ran with rlimits only")
            self.measures = {k: "unavailable" for k in ("network", "user", "mounts", "cgroup")}
            self.userns = False
            self.proc = spawn(
                argv,
                cwd=self.workdir,
                env=env,
                limits=replace(limits, processes=None),
                pass_fds=pass_fds,
                stdout=stdout,
                stderr=stderr,
            )
        finally:
            os.close(r)
            if w >= 0:
                os.close(w)
        kind = "user" if self.userns else "net" if self.measures.get("network") == "netns" else None
        if kind is not None:
            ns = namespace_of(self.proc.pid, kind)
            self.namespace = (kind, ns) if ns and ns != namespace_of(os.getpid(), kind) else None
        return self.proc

    # -- between calls ----------------------------------------------------------------------

    @property
    def worker_pid(self) -> int | None:
        """The pid (in the judge's namespace) of the process running `argv`."""
        return self.proc.pid if self.proc is not None else None

    def members(self) -> set[int]:
        """Every live process of this sandbox, the worker included."""
        if self.proc is None:
            return set()
        if self.cgroup is not None:
            return self.cgroup.procs()
        if self.lease is not None:
            return self.lease.processes()
        found = {self.proc.pid} | descendants([self.proc.pid])
        if self.namespace is not None:  # orphans reparented away are still in the namespace
            found |= pids_in_namespace(*self.namespace)
        return found

    def strays(self) -> set[int]:
        """Processes the candidate started that are still running (zombies do not count)."""
        worker = self.proc.pid if self.proc else -1
        return {p for p in self.members() if p != worker and not is_zombie(p)}

    def kill_strays(self) -> int:
        return stop_then_kill(self.strays)

    # -- accounting and freezing (the judge's clocks live outside the worker) ----------------

    def cpu_ns(self) -> int | None:
        """Kernel CPU time (ns) of everything in the worker's cgroup so far: all threads,
        exited threads and children included (cgroup v1 cpuacct.usage, or cgroup v2 cpu.stat
        usage_usec*1000). None when no such cgroup could be made.

        Per-thread clocks miss threads that have exited and every child process; a cgroup's
        count cannot be edited or evaded from inside it."""
        return self.cgroup.cpu_ns() if self.cgroup is not None else None

    @property
    def cpu_source(self) -> str:
        """`cpuacct`, `cgroup2`, or `unavailable (<why>)`."""
        source = self.cgroup.cpu_source() if self.cgroup is not None else None
        if source is not None:
            return source
        if not self.policy.cgroup or not self.policy.cpu_accounting:
            return "unavailable (off by policy)"
        if self.proc is None:
            return "unavailable (not started)"
        why = probe().cgroups.why_not.get("cpu") or self.measures.get("cgroup", "no cgroup")
        return f"unavailable ({why})"

    @property
    def freeze_method(self) -> str:
        """`freezer` (v1), `cgroup2` (cgroup.freeze), or `sigstop` (every member, one by one)."""
        method = self.cgroup.freeze_source() if self.cgroup is not None else None
        return method or "sigstop"

    def freeze(self) -> None:
        """Stop every process of the worker's tree and return only once all are stopped.

        The cgroup freezer stops the tree in one write and catches a process forked meanwhile;
        the fallback SIGSTOPs every member, looks again until no new process appears (a stopped
        process cannot fork) and waits until each thread is stopped. Idempotent. Raises OSError
        when the tree cannot be stopped (then nothing is left half-frozen)."""
        if self._frozen or self.proc is None:
            return
        if self.cgroup is not None and self.cgroup.freeze_source() is not None:
            self.cgroup.freeze()
        else:
            self._stopped = stop_all(self.members)
        self._frozen = True

    def thaw(self) -> None:
        """Let the tree run again (the reverse of `freeze`; idempotent)."""
        if not self._frozen:
            return
        self._frozen = False
        if self.cgroup is not None and self.cgroup.freeze_source() is not None:
            self.cgroup.thaw()
        else:
            continue_all(self._stopped | self.members())
            self._stopped = set()

    # -- ending -----------------------------------------------------------------------------

    def _release(self) -> None:
        if self.cgroup is not None:
            self.cgroup.remove()
            self.cgroup = None
        if self.lease is not None:
            self.lease.release()
            self.lease = None

    def close(self) -> None:
        """End the worker and everything it started; release the cgroup and the uid."""
        if self.proc is not None:
            with contextlib.suppress(OSError):
                self.thaw()  # a task frozen by the v1 freezer does not act on SIGKILL
            if self.cgroup is None and self.lease is None:
                stop_then_kill(self.members)
            kill_tree(self.proc)
        self._release()

    def report(self) -> dict[str, Any]:
        """Which measures were active for this worker, in words (part of the verdict)."""
        m = dict(self.measures)
        cleanup = (
            "cgroup"
            if m.get("cgroup", "off") not in ("off", "unavailable")
            else ("uid" if m.get("user", "").startswith("uid") else "process tree")
        )
        processes = [m["cgroup"]] if m.get("cgroup", "").startswith("pids") else []
        memory = [f"rlimit address space {self.limits.address_space_mb} MiB"]
        if "memory" in m:
            memory.append(m["memory"])
        if (m.get("user", "").startswith("uid") or self.userns) and self.limits.processes:
            processes.append(f"rlimit nproc={self.limits.processes}")
        return {
            "network": m.get("network", "unavailable"),
            "user": m.get("user", "same"),
            "mounts": m.get("mounts", "unavailable"),
            "processes": ", ".join(processes) or "not enforced",
            "cleanup": cleanup,
            "guard": "audit hook" if self.policy.guard else "off",
            "cpu_accounting": self.cpu_source,
            "freeze": self.freeze_method,
            "memory": ", ".join(memory) if self.limits.address_space_mb else "not limited",
            "notes": list(self.notes),
        }
