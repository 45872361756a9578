"""The sandbox a candidate's worker runs in: what this machine allows, applied and reported.

Measures (each used where the kernel and our privileges allow it, and reported either way):

- **network**: a new network namespace with nothing in it (not even a working loopback);
- **user**: when the judge is root, a dedicated unprivileged uid per worker, so the candidate
  cannot signal, ptrace or write into the judge, its files or its results;
- **mounts**: a private mount namespace hiding the task package (and the host's cgroup tree)
  and giving private, size-limited scratch directories (see `_mounts`);
- **filesystem**: inside it, every mount read-only except the working directory and scratch,
  so nothing the candidate writes outlives it anywhere else;
- **pid**: a PID namespace with its own read-only /proc: the worker sees and can signal only
  its own processes, never the other arm, the judge or anything else on the machine, writes
  none's memory through /proc/PID/mem, and everything in it dies with the worker (`_child`);
- **ipc**: an IPC namespace: SysV shared memory, semaphores, message queues and POSIX message
  queues are private and vanish with the worker;
- **cgroup**: per-worker cgroups (see `_cgroup`): `pids.max` = the task's process limit and a
  complete list of every process the candidate started, however detached; the kernel's CPU
  count of the whole tree (`cpu_ns`); a freezer (`freeze`/`thaw`); a memory limit that counts
  tmpfs pages, which the address-space rlimit does not;
- **leftovers**: when the lease of the dedicated uid ends, whatever it still owns (files in
  world-writable directories, SysV objects, POSIX queues) is removed (see `_leftovers`);
- always: rlimits, a new session, no-new-privileges, parent-death signal, and the worker as
  child subreaper so orphaned grandchildren stay in its tree.

Without root the namespaces come from an unprivileged user namespace, if the kernel permits
one; the uid cannot change, so the worker could still reach the judge's files: the report then
says `user: same` and the guarantees document says what that means.
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import IO, Any

from optarena.files import lchown_tree
from optarena.processes import (
    HeldNamespace,
    children_of,
    continue_all,
    is_zombie,
    kill_tree,
    signal_all,
    stop_all,
    stop_then_kill,
    wait_dead,
)
from optarena.sandbox import _linux, _seccomp
from optarena.sandbox._cgroup import FEATURES, WorkerCgroups
from optarena.sandbox._child import ChildPlan, child_setup, end_pid_namespace
from optarena.sandbox._leftovers import (
    WRITABLE_ROOTS,
    remove_files_of,
    remove_mqueues_of,
    remove_sysv_of,
)
from optarena.sandbox._mounts import WORKER_SCRATCH, Mask, blockers, plan_masks, private_root
from optarena.sandbox._probe import Capabilities, interpreter_paths, probe
from optarena.sandbox._process import MiB, ResourceLimits, spawn
from optarena.sandbox._root import RootPlan
from optarena.sandbox._steps import IsolationSteps, members
from optarena.sandbox._uids import UidLease, lease_uid

__all__ = ["Capabilities", "Sandbox", "SandboxPolicy", "interpreter_paths", "probe"]

# Host paths a worker has no business seeing: the cgroup tree shows every other sandbox's
# CPU use and membership, /dev/mqueue the judge's own message queues.
_HOST_ONLY = ("/sys/fs/cgroup", "/dev/mqueue")


@dataclass(frozen=True)
class SandboxPolicy:
    """Which measures to use where available. `none()` exists to measure what isolation costs
    and, in tests, to show that each attack works once its measure is off."""

    network: bool = True
    user: bool = True
    mounts: bool = True
    cgroup: bool = True
    guard: bool = True  # the worker's audit hook and tamper checks (applied by the judge worker)
    cpu_accounting: bool = True  # the kernel's CPU count of the worker's cgroup (`cpu_ns`)
    freezer: bool = True  # freeze with the cgroup freezer (False: SIGSTOP every member)
    memory: bool = True  # a memory cgroup limit (tmpfs pages included) = the address-space limit
    pid: bool = True  # a PID namespace with its own /proc
    ipc: bool = True  # an IPC namespace (SysV objects and POSIX queues private to the worker)
    readonly_root: bool = True  # every mount read-only but the workdir and scratch
    scratch: bool = True  # private tmpfs for /tmp, /var/tmp, /dev/shm, /run/lock (False: the
    # host's own, read-only too unless readonly_root is off)
    sweep: bool = True  # remove what the uid owns when its lease ends
    seccomp: bool = True  # refuse system calls a numeric kernel never needs (see `_seccomp`)
    cpuset: bool = True  # pin a worker given `cpus` with a cpuset it cannot leave

    @classmethod
    def none(cls) -> SandboxPolicy:
        return cls(**{name: False for name in cls.__dataclass_fields__})


def _chown_tree(root: Path, uid: int, owner: int | None = None) -> None:
    """`owner`: take back only what that uid owns (a candidate's hard link to another's file
    keeps its owner)."""
    lchown_tree(root, uid, uid, owner=owner)
    os.chmod(root, 0o700)


class SandboxStartError(OSError):
    """The isolated start of a worker failed although the probe said it was possible. An
    OSError, so the judge records it as `judge_error` on the trial and goes on."""


def _fd_ceiling() -> int:
    """Above the highest descriptor open now (for the helpers' close loop without close_range)."""
    try:
        return max(int(n) for n in os.listdir("/proc/self/fd")) + 256
    except (OSError, ValueError):
        return 65536


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
        cpus: Sequence[int] | None = None,
    ) -> None:
        """`cpus`: the CPUs the worker may run on (a timed worker: its pair's one CPU)."""
        self.workdir = Path(workdir).resolve()
        self.cpus = tuple(cpus) if cpus is not None else None
        self.limits = limits
        self.policy = policy or SandboxPolicy()
        self.hide = [os.path.realpath(p) for p in hide]
        self.needed = [os.path.realpath(p) for p in needed]
        self.scratch_mb = scratch_mb
        self.proc: subprocess.Popen[bytes] | None = None
        self.lease: UidLease | None = None
        self.cgroup: WorkerCgroups | None = None
        self.steps = IsolationSteps()
        self.userns = False
        self.namespace: HeldNamespace | None = None  # one all its processes share, held
        self._helpers: set[int] = set()  # holder and init of the PID namespace (ours, not its)
        self._worker: int | None = None
        self._contained = False  # nothing it writes can outlive it (see `_sweep`)
        self._stopped: set[int] = set()  # what the SIGSTOP fallback stopped, to continue
        self._frozen = False
        self._sources: tuple[str | None, str | None] = (None, None)  # cpu, freezer (kept
        # after close, for the report)

    @property
    def measures(self) -> dict[str, str]:
        """Each measure's state in words (the report's values)."""
        return self.steps.measures

    @property
    def notes(self) -> list[str]:
        """Why a measure that was wanted is missing, and what the cleanup removed."""
        return self.steps.notes

    # -- starting ---------------------------------------------------------------------------

    def _lease_uid(self, caps: Capabilities, use_mounts: bool, needed: list[str]) -> None:
        if not self.steps.wanted("user", self.policy.user):
            return
        if not caps.root:
            self.steps.record("user", "same", "the judge is not root, so the worker keeps its uid")
            return
        if not use_mounts:
            probe_uid = 1_500_000
            if blockers(needed, probe_uid, probe_uid):
                self.steps.record(
                    "user",
                    "same",
                    "an unprivileged uid cannot reach the interpreter without a mount namespace",
                )
                return
        self.lease = self.steps.attempt("user", lease_uid, state="same", why="no uid lease ({})")
        if self.lease is None:
            return
        if self.lease.was_dirty and self.policy.sweep:
            self._sweep(everything=True)  # a judge died before its sweep: do it first
        _chown_tree(self.workdir, self.lease.uid)
        self.measures["user"] = f"uid {self.lease.uid}"

    def _cgroup_features(self) -> list[str]:
        """The cgroup features this worker wants, by policy."""
        wanted = {
            "pids": True,
            "cpu": self.policy.cpu_accounting,
            "freezer": self.policy.freezer,
            "memory": self.policy.memory and self.limits.address_space_mb is not None,
            "cpuset": self.policy.cpuset and self.cpus is not None,
        }
        return [f for f in FEATURES if wanted[f]]

    def _make_cgroup(self, caps: Capabilities, helpers: int) -> None:
        """Create this worker's cgroups; `helpers`: our own processes inside (pid namespace)."""
        if not self.steps.wanted("cgroup", self.policy.cgroup):
            return
        layout = caps.cgroups.only(self._cgroup_features())
        for feature, why in layout.why_not.items():
            self.notes.append(f"cgroup {feature}: {why}")
        if not layout.chosen:
            self.steps.record("cgroup", "unavailable")
            return
        mem = self.limits.address_space_mb
        self.cgroup = self.steps.attempt(
            "cgroup",
            lambda: WorkerCgroups(
                layout,
                max_pids=(self.limits.processes or 64) + helpers,
                memory_bytes=mem * MiB if mem is not None else None,
                cpus=self.cpus,
            ),
        )
        if self.cgroup is None:
            return
        if "pids" in layout.chosen:
            self.measures["cgroup"] = f"pids.max={self.limits.processes or 64}"
        else:
            self.measures["cgroup"] = "no pids controller"
        if "memory" in layout.chosen:
            self.measures["memory"] = f"cgroup limit {mem} MiB (tmpfs included)"
        if "cpuset" in layout.chosen and self.cpus is not None:
            self.measures["cpuset"] = "cpus " + ",".join(str(c) for c in self.cpus)
        self._sources = (self.cgroup.cpu_source(), self.cgroup.freeze_source())

    def _private_root(self, needed: list[str], fresh_proc: bool) -> RootPlan:
        """Default-deny (`_root`): only the system, the toolchain, `needed`, the workdir and
        scratch exist; no ledger, other trial, source repository or host socket to read."""
        scratch = [d for d in WORKER_SCRATCH if os.path.isdir(d) and not os.path.islink(d)]
        workdir = str(self.workdir)
        read = [n for n in needed if n != workdir]
        path_env = os.environ.get("PATH", "")
        uid = self.lease.uid if self.lease else None
        root = private_root(read, [workdir], scratch, self.hide, fresh_proc=fresh_proc,
                            path_env=path_env, uid=uid)  # fmt: skip
        hidden = f" (hidden: {', '.join(self.hide)})" if self.hide else ""
        self.measures["mounts"] = f"private root{hidden}"
        return root

    def _mount_plan(
        self, needed: list[str], readonly: bool
    ) -> tuple[tuple[Mask, ...], tuple[str, ...] | None]:
        """The masks (hidden paths, scratch tmpfs) and, if wanted, the writable paths."""
        uid = self.lease.uid if self.lease else None
        blocked = list(blockers(needed, uid, uid)) if uid is not None else []
        scratch = [d for d in WORKER_SCRATCH if os.path.isdir(d) and not os.path.islink(d)]
        if not self.policy.scratch:
            scratch = []
        hide = [*self.hide, *(p for p in _HOST_ONLY if os.path.isdir(p))]
        masks = tuple(plan_masks(needed, hide, scratch, blocked))
        shown = [m.path for m in masks if not m.scratch and m.path not in _HOST_ONLY]
        self.measures["mounts"] = "private" + (f" (hidden: {', '.join(shown)})" if shown else "")
        if not readonly:
            return masks, None
        writable = (str(self.workdir), *(m.path for m in masks if m.scratch))
        tmpfs = ", ".join(m.path for m in masks if m.scratch)
        self.measures["filesystem"] = "read-only except the workdir" + (
            f" and {self.scratch_mb} MiB scratch tmpfs at {tmpfs}" if tmpfs else ""
        )
        return masks, writable

    def _plan(self) -> tuple[ChildPlan, ResourceLimits]:
        caps = probe()
        use_net = self.steps.wanted("network", self.policy.network, caps.netns)
        use_mnt = self.steps.wanted("mounts", self.policy.mounts, caps.mountns)
        use_pid = self.steps.wanted("pid", self.policy.pid, caps.pidns)
        use_ipc = self.steps.wanted("ipc", self.policy.ipc, caps.ipcns)
        use_ro = use_mnt and self.steps.wanted(
            "filesystem", self.policy.readonly_root, caps.readonly_root
        )
        if not use_mnt:
            self.measures["filesystem"] = "shared (no mount namespace)"
        needed = [*interpreter_paths(), *self.needed, str(self.workdir)]
        self._lease_uid(caps, use_mnt, needed)
        flags = (
            (_linux.CLONE_NEWNET if use_net else 0)
            | (_linux.CLONE_NEWNS if use_mnt else 0)
            | (_linux.CLONE_NEWPID if use_pid else 0)
            | (_linux.CLONE_NEWIPC if use_ipc else 0)
        )
        ids = None
        if flags and not caps.root:
            flags |= _linux.CLONE_NEWUSER
            ids = (os.getuid(), os.getgid())
        self.userns = bool(flags & _linux.CLONE_NEWUSER)
        # Holder and init are in the cgroup; in a user namespace they also count for nproc.
        helpers = 2 if use_pid else 0
        self._make_cgroup(caps, helpers)
        masks: tuple[Mask, ...] = ()
        writable: tuple[str, ...] | None = None
        if use_mnt:
            masks, writable = self._mount_plan(needed, use_ro)
        root = None
        if use_ro and self.policy.scratch and caps.private_root is None:
            root = self._private_root(needed, fresh_proc=use_pid)
        for name, on in (("network", use_net), ("pid", use_pid), ("ipc", use_ipc)):
            if on:
                self.measures[name] = "namespace" if name != "network" else "netns"
        self._contained = use_ro and use_ipc  # then the uid cannot have left anything
        use_seccomp = self.steps.wanted("seccomp", self.policy.seccomp, _seccomp.why_unavailable())
        if use_seccomp:
            self.measures["seccomp"] = "filter (namespaces, timers, keyrings, splice, ... refused)"
        # RLIMIT_NPROC counts the tasks of a real uid: exact for a leased uid, and inside a user
        # namespace it counts that namespace's tasks only (Linux >= 5.14); otherwise it would
        # count every process of the judge's user, so it is not set.
        nproc = None
        if self.limits.processes is not None and (self.lease or self.userns):
            nproc = self.limits.processes + (helpers if self.userns else 0)
        plan = ChildPlan(
            workdir=str(self.workdir),
            unshare_flags=flags,
            userns_ids=ids,
            masks=masks,
            root=root,
            scratch_mb=self.scratch_mb,
            cgroup_procs=self.cgroup.procs_files if self.cgroup else (),
            worker_only_procs=self.cgroup.measured_procs_files if self.cgroup and not ids else (),
            uid=self.lease.uid if self.lease else None,
            nproc=nproc,
            readonly=writable,
            fd_ceiling=_fd_ceiling(),
            seccomp=use_seccomp,
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
        """Start the worker inside the sandbox; `SandboxStartError` if that fails."""
        plan, limits = self._plan()
        r, w = os.pipe()
        sr, sw = os.pipe()
        plan = replace(plan, err_fd=w, status_fds=(sr, sw), parent=os.getpid())
        try:
            self.proc = spawn(
                argv,
                cwd=self.workdir,
                env=env,
                limits=limits,
                pass_fds=pass_fds,
                stdout=stdout,
                stderr=stderr,
                setup=lambda: child_setup(plan),
            )
        except (OSError, subprocess.SubprocessError) as e:
            os.close(w)
            w = -1
            detail = os.read(r, 500).decode(errors="replace") or str(e)
            self._release()
            # Never run the candidate with less than the probe promised: whatever made the
            # start fail (a host change under the plan, a path the agent shaped) would
            # otherwise buy it a worker with no private root, uid or namespaces.
            raise SandboxStartError(
                f"the worker's sandbox did not start ({detail}); the candidate was not run"
            ) from e
        finally:
            for fd in (r, w, sr, sw):
                if fd >= 0:
                    os.close(fd)
        self._find_worker(plan.pid_ns)
        return self.proc

    def _find_worker(self, pid_ns: bool) -> None:
        """Which process runs argv (PID namespace: the holder's grandchild), and the namespace
        that ties every process of this sandbox together for cleanup without a cgroup."""
        assert self.proc is not None
        holder = self.proc.pid
        if pid_ns:
            inits = children_of(holder)
            workers = children_of(next(iter(inits))) if len(inits) == 1 else set()
            self._helpers = {holder, *inits}
            self._worker = next(iter(workers)) if len(workers) == 1 else None
        kind = (
            "pid"
            if pid_ns
            else "user"
            if self.userns
            else "net"
            if self.measures.get("network") == "netns"
            else None
        )
        probe_pid = self._worker or holder
        if kind == "pid" and probe_pid == holder:
            kind = "pid_for_children"  # the holder itself is in ours; its children are not
        if kind is not None:
            with contextlib.suppress(OSError):  # gone at once: the tree by parent links
                self.namespace = HeldNamespace(probe_pid, kind)
            if self.namespace is not None and self.namespace.is_mine():
                self.namespace.close()
                self.namespace = None

    # -- between calls ----------------------------------------------------------------------

    @property
    def worker_pid(self) -> int | None:
        """The pid (in the judge's namespace) of the process running `argv`."""
        if self._worker is not None:
            return self._worker
        return self.proc.pid if self.proc is not None else None

    def members(self) -> set[int]:
        """Every live process of this sandbox, the worker (and our helpers) included."""
        return members(self.proc, self.cgroup, self.lease, self.namespace)

    def strays(self) -> set[int]:
        """Processes the candidate started that are still running (zombies do not count)."""
        ours = {*self._helpers, self.worker_pid}
        return {p for p in self.members() if p not in ours and not is_zombie(p)}

    def kill_strays(self) -> int:
        """SIGKILL every stray, frozen or not; returns how many."""
        if self._frozen and self._sources[1] == "freezer":
            # A task frozen by the v1 freezer acts on SIGKILL only once thawed (v2-frozen and
            # SIGSTOPped ones die at once). Leaving the freezer, a task handles a pending
            # SIGKILL before running any code of its own, but it must get a CPU to leave it:
            # re-freezing at once can catch it still inside (on a busy machine), so the
            # freeze waits for the deaths. The worker runs for that moment.
            strays = self.strays()
            signal_all(strays, signal.SIGKILL)
            self.thaw()
            wait_dead(strays)
            self.freeze()
            return len(strays) + stop_then_kill(lambda: self.strays() - strays)
        if self._frozen and self._sources[1] == "cgroup2" and self.cgroup is not None:
            # A task of a v2-frozen cgroup cannot run (so cannot fork) and dies at once on
            # SIGKILL; waiting for its SIGSTOP to show (it stays `S` while frozen) cost each
            # call of a candidate that left a process 0.5 s. A stray outside it is waited for.
            return stop_then_kill(self.strays, held=self.cgroup.frozen_procs)
        return stop_then_kill(self.strays)

    # -- accounting and freezing (the judge's clocks live outside the worker) ----------------

    def cpu_ns(self) -> int | None:
        """Kernel CPU time (ns) of everything in the worker's cgroup so far: all threads,
        exited threads and children included (cgroup v1 cpuacct.usage, or cgroup v2 cpu.stat
        usage_usec*1000). None when no such cgroup could be made.

        Per-thread clocks miss threads that have exited and every child process; a cgroup's
        count cannot be edited or evaded from inside it."""
        return self.cgroup.cpu_ns() if self.cgroup is not None else None

    def cpu_counter(self) -> tuple[int, bool] | None:
        """What `cpu_ns` reads, as a file descriptor and whether it counts in ns (cgroup v1)."""
        return self.cgroup.cpu_counter() if self.cgroup is not None else None

    @property
    def cpu_source(self) -> str:
        """`cpuacct`, `cgroup2`, or `unavailable (<why>)`."""
        if self._sources[0] is not None:
            return self._sources[0]
        if not self.policy.cgroup or not self.policy.cpu_accounting:
            return "unavailable (off by policy)"
        if self.proc is None:
            return "unavailable (not started)"
        why = probe().cgroups.why_not.get("cpu") or self.measures.get("cgroup", "no cgroup")
        return f"unavailable ({why})"

    @property
    def freeze_method(self) -> str:
        """`freezer` (v1), `cgroup2` (cgroup.freeze), or `sigstop` (every member, one by one)."""
        return self._sources[1] or "sigstop"

    def freeze(self) -> None:
        """Stop every process of the worker's tree and return only once all are stopped.

        The cgroup freezer stops the tree in one write and catches a process forked meanwhile;
        the fallback SIGSTOPs every member, looks again until no new process appears (a stopped
        process cannot fork) and waits until each thread is stopped. Idempotent. Raises OSError
        when the tree cannot be stopped (then nothing is left half-frozen)."""
        if self._frozen or self.proc is None:
            return
        if self.cgroup is not None and self._sources[1] is not None:
            self.cgroup.freeze()
        else:
            self._stopped = stop_all(self.members)
        self._frozen = True

    def thaw(self) -> None:
        """Let the tree run again (the reverse of `freeze`; idempotent)."""
        if not self._frozen:
            return
        self._frozen = False
        if self.cgroup is not None and self._sources[1] is not None:
            self.cgroup.thaw()
        else:
            continue_all(self._stopped | self.members())
            self._stopped = set()

    # -- ending -----------------------------------------------------------------------------

    def _sweep(self, everything: bool) -> None:
        """Remove what the leased uid owns outside the workdir. `everything`: also where the
        worker could not have written (a read-only root and an IPC namespace make files and
        IPC objects impossible; a previous lessee may have had neither)."""
        assert self.lease is not None
        uid = self.lease.uid
        sysv = remove_sysv_of(uid)  # cheap, and a last line even inside an IPC namespace
        files: list[str] = []
        queues: list[str] = []
        if everything or not self._contained:
            files = remove_files_of(uid, WRITABLE_ROOTS, skip=[self.workdir])
            queues = remove_mqueues_of(uid)
        found = [f"{len(files)} files"] if files else []
        found += [f"{len(sysv)} SysV IPC objects"] if sysv else []
        found += [f"{len(queues)} message queues"] if queues else []
        if found:
            self.notes.append(f"leftovers of uid {uid} removed: {', '.join(found)}")
        self.measures["leftovers"] = (
            "swept" if not self._contained else "none possible (read-only root, IPC namespace)"
        )

    def _release(self) -> None:
        if self.cgroup is not None:
            self.cgroup.remove()
            self.cgroup = None
        if self.namespace is not None:  # after the last look at members (`close`)
            self.namespace.close()
        if self.lease is not None:
            self.lease.kill_all()
            if self.policy.sweep:
                self._sweep(everything=False)
                with contextlib.suppress(OSError):
                    # the workdir is the judge's again
                    _chown_tree(self.workdir, os.getuid(), owner=self.lease.uid)
                self.lease.mark_clean()
            else:
                self.measures["leftovers"] = "not swept (off by policy)"
            self.lease.release()
            self.lease = None

    def close(self) -> None:
        """End the worker and everything it started; release the cgroup and the uid (and
        remove what the uid left), so the next worker finds nothing of this one."""
        if self.proc is not None:
            with contextlib.suppress(OSError):
                self.thaw()  # a task frozen by the v1 freezer does not act on SIGKILL
            if self._helpers:  # a PID namespace: its init's death ends all of it at once
                end_pid_namespace(self.proc)
            if self.cgroup is None and self.lease is None:
                stop_then_kill(self.members)
            kill_tree(self.proc)
        self._release()

    def report(self) -> dict[str, Any]:
        """Which measures were active for this worker, in words (part of the verdict)."""
        m = dict(self.measures)
        uid_or_userns = m.get("user", "").startswith("uid") or self.userns
        nproc = self.limits.processes if uid_or_userns else None
        memory = [f"rlimit address space {self.limits.address_space_mb} MiB"]
        if "memory" in m:
            memory.append(m["memory"])
        leftovers = m.get("leftovers")
        if leftovers is None:
            leftovers = "uid swept at close" if self.lease is not None else "no dedicated uid"
        return {
            "network": m.get("network", "unavailable"),
            "user": m.get("user", "same"),
            "mounts": m.get("mounts", "unavailable"),
            "filesystem": m.get("filesystem", "unavailable"),
            "pid": m.get("pid", "unavailable"),
            "ipc": m.get("ipc", "unavailable"),
            "processes": self.steps.processes(nproc),
            "cleanup": self.steps.cleanup(),
            "leftovers": leftovers,
            "guard": "audit hook" if self.policy.guard else "off",
            "cpu_accounting": self.cpu_source,
            "freeze": self.freeze_method,
            "seccomp": m.get("seccomp", "unavailable"),
            "cpuset": m.get("cpuset", "not pinned by a cgroup"),
            "memory": ", ".join(memory) if self.limits.address_space_mb else "not limited",
            "notes": list(self.notes),
        }
