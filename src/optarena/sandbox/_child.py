"""What the worker's process does between fork and exec: join cgroups, build namespaces, drop
the uid. Decided in the judge (`ChildPlan`), carried out in the forked child (`child_setup`).

A new PID namespace applies to the *children* of the process that creates it, and the first
child becomes the namespace's init, which the kernel shields from signals it has no handler
for (a worker as init would survive SIGXCPU at its CPU limit and never be named `cpu_limit`).
So with a PID namespace the forked child forks twice more:

    holder (judge's namespace) -> init (pid 1, inside) -> worker (pid 2, inside; execs argv)

The holder is the process the judge's `Popen` knows: it waits for init and ends the way the
worker ended (same exit code, or killed by the same signal), so exit codes keep their meaning.
Init reaps and, when the worker ends, exits, and the kernel then kills everything left in the
namespace: no daemon outlives its worker. Both close every inherited descriptor first (the
judge's pipes to other workers, Popen's error pipe, so Popen returns when the worker execs),
mark themselves non-dumpable (their memory is a copy of the judge's: not readable through
/proc or ptrace) and run nothing the candidate can reach. Anything that can fail runs in the
holder before the forks or in the worker after them, where Popen reports it as a failed start.

Each process of that chain dies with its parent (a parent-death signal), so a judge or an
agent's optarena killed with SIGKILL takes its worker with it: the holder with the judge, init
with the holder, and the namespace with init. The signal is sent only when a parent dies
*after* it was armed, and a child does not run while its parent is killed (a Ray worker
ended with its driver, under load): so each arms it first, before anything slow, and then
checks that its parent is still the one that forked it (`die_with_parent`, and init through a
pipe only the holder holds open); one that finds itself adopted ends. Armed late, after its
setup, the signal watched whoever adopted the orphan, and its worker ran on unwatched.
"""

from __future__ import annotations

import contextlib
import os
import resource
import select
import shutil
import signal
import struct
import subprocess
from dataclasses import dataclass, replace

from optarena.processes import children_of, stat_of
from optarena.sandbox import _linux, _seccomp
from optarena.sandbox._cgroup import attach_self
from optarena.sandbox._mounts import Mask, apply_masks, mount_proc, readonly_root
from optarena.sandbox._root import RootPlan, enter_root, leave_old_root


@dataclass(frozen=True)
class ChildPlan:
    """Everything the child does between fork and exec, decided in the parent."""

    workdir: str
    unshare_flags: int = 0
    userns_ids: tuple[int, int] | None = None  # (uid, gid) to map to themselves
    masks: tuple[Mask, ...] = ()
    scratch_mb: int = 64
    cgroup_procs: tuple[str, ...] = ()
    # Of those, the ones joined by the worker alone, after the PID namespace's forks: the
    # helpers would otherwise be counted and frozen with it, and each freeze and thaw wakes
    # them (on another CPU: ~70 us of CPU per timed call charged to the worker's cgroup).
    worker_only_procs: tuple[str, ...] = ()
    uid: int | None = None
    nproc: int | None = None  # RLIMIT_NPROC, set after unshare (a new user namespace's limit
    # is captured from the creator's at creation, so set before it would cap the whole user)
    readonly: tuple[str, ...] | None = None  # read-only root except these paths (None: off)
    root: RootPlan | None = None  # a default-deny root, instead of masks and `readonly`
    err_fd: int = -1
    status_fds: tuple[int, int] = (-1, -1)  # init -> holder: the worker's wait status
    fd_ceiling: int = 4096  # above the judge's highest descriptor (fallback close loop)
    seccomp: bool = False  # install `_seccomp`'s filter last, in the worker
    parent: int = 0  # the pid of the process forking the child (0: not checked)

    @property
    def pid_ns(self) -> bool:
        return bool(self.unshare_flags & _linux.CLONE_NEWPID)


def _write(path: str, text: str) -> None:
    fd = os.open(path, os.O_WRONLY)
    try:
        os.write(fd, text.encode())
    finally:
        os.close(fd)


def die_with_parent(parent: int) -> None:
    """Arm the parent-death signal (SIGKILL), then end now if the parent is no longer
    `parent`: one that died before the signal was armed sends none, and this process would
    run on as an orphan. Call it first in a forked child, and again after a uid change
    (which clears the signal). `parent` 0: armed without the check."""
    _linux.prctl(_linux.PR_SET_PDEATHSIG, signal.SIGKILL)
    if parent and os.getppid() != parent:
        os.kill(os.getpid(), signal.SIGKILL)


def _die_with_holder(holder_alive: int) -> None:
    """`die_with_parent` for init, whose parent is outside its namespace (its getppid() is
    0): the holder is alive while the pipe `holder_alive`, whose write end only the holder
    holds, has not reached its end."""
    _linux.prctl(_linux.PR_SET_PDEATHSIG, signal.SIGKILL)
    ended = select.poll()  # not select(): a descriptor may be above FD_SETSIZE
    ended.register(holder_alive, select.POLLIN)
    if ended.poll(0):  # nothing is ever written: any event is the end (POLLHUP)
        os._exit(0)  # init: the kernel then ends the namespace (a signal to itself would not)
    os.close(holder_alive)


def _end_like(status: int) -> None:
    """End this process the way a process with wait status `status` ended."""
    if os.WIFSIGNALED(status):
        sig = os.WTERMSIG(status)
        with contextlib.suppress(OSError, ValueError):  # SIGKILL and SIGSTOP cannot be set
            signal.signal(sig, signal.SIG_DFL)
        with contextlib.suppress(OSError, ValueError):
            signal.pthread_sigmask(signal.SIG_UNBLOCK, [sig])
        with contextlib.suppress(OSError):
            os.kill(os.getpid(), sig)
        os._exit(128 + sig)
    os._exit(os.WEXITSTATUS(status) if os.WIFEXITED(status) else 1)


def _quiet(keep: set[int], ceiling: int) -> None:
    """A helper's first steps: close what it inherited, hide its memory, ignore signals the
    candidate could send (it is invisible to it or protected as init anyway)."""
    _linux.close_fds_except(keep, ceiling)
    with contextlib.suppress(OSError):
        _linux.prctl(_linux.PR_SET_DUMPABLE, 0)
    # At the memory limit the kernel kills a process of the cgroup: the worker, not the two
    # helpers (whose deaths would end it all the same, but as an anonymous SIGKILL).
    with contextlib.suppress(OSError), open("/proc/self/oom_score_adj", "w") as f:
        f.write("-1000")
    for sig in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP, signal.SIGPIPE, signal.SIGUSR1):
        with contextlib.suppress(OSError, ValueError):
            signal.signal(sig, signal.SIG_DFL)


def _hold(init_pid: int, status_r: int) -> None:
    """The holder: wait for init, then end like the worker did. Never returns."""
    status = 1 << 8
    try:  # its parent-death signal was armed before the fork (`_enter_pid_namespace`)
        _, own = os.waitpid(init_pid, 0)
        status = own
        data = os.read(status_r, 4)
        if len(data) == 4:
            status = struct.unpack("i", data)[0]
    except BaseException:  # never return into Popen's child code: it would exec argv here
        pass
    finally:
        _end_like(status)


def _init(worker_pid: int, status_w: int) -> None:
    """Init of the namespace: reap until the worker ends, report its status. Never returns."""
    status = 1 << 8
    try:  # its parent-death signal was armed first thing after the fork (`_die_with_holder`)
        while True:
            pid, st = os.wait()
            if pid == worker_pid:
                status = st
                break
    except BaseException:
        pass
    finally:
        with contextlib.suppress(OSError):
            os.write(status_w, struct.pack("i", status))
        os._exit(0)  # the kernel now kills whatever is left in the namespace


def _enter_pid_namespace(plan: ChildPlan) -> None:
    """Fork holder -> init -> worker (see the module docstring); returns in the worker only."""
    status_r, status_w = plan.status_fds
    # Again before the fork: the namespaces made since (a user namespace) are credential
    # changes, and whatever clears the signal must not leave the holder unwatched.
    die_with_parent(plan.parent)
    holder_alive, holder_end = os.pipe()  # the write end stays open in the holder alone
    init = os.fork()
    if init != 0:
        try:
            _quiet({status_r, holder_end}, plan.fd_ceiling)
        finally:
            _hold(init, status_r)
    os.close(holder_end)
    _die_with_holder(holder_alive)  # first: the holder may be killed at any moment from now
    try:
        worker = os.fork()
    except BaseException:
        os._exit(1 << 7)
    if worker != 0:
        try:
            _quiet({status_w}, plan.fd_ceiling)
        finally:
            _init(worker, status_w)
    os.close(status_r)
    os.close(status_w)


def end_pid_namespace(holder: subprocess.Popen[bytes]) -> None:
    """SIGKILL the init of the PID namespace whose holder is `holder`: the kernel then ends
    every process in it and in the namespaces made inside it, which no list of pids can be
    raced past (a traced process need not stop; a pid signalled late may be a stranger's).
    The init is the holder's one child, signalled through a pidfd opened before checking
    that; the holder, an unreaped child of ours, keeps its pid meanwhile."""
    if holder.poll() is not None:
        return  # ended, and init with it
    for init in children_of(holder.pid):
        try:
            fd = os.pidfd_open(init)
        except OSError:
            continue
        try:
            info = stat_of(init)
            if info is not None and info.ppid == holder.pid:
                signal.pidfd_send_signal(fd, signal.SIGKILL)
        except OSError:
            pass  # ended meanwhile
        finally:
            os.close(fd)


def child_setup(plan: ChildPlan) -> None:
    """Runs in the forked child. Order matters: join the cgroups and build namespaces while
    privileged, then drop the uid, then set what a uid change would clear (pdeathsig)."""
    try:
        die_with_parent(plan.parent)  # first: the judge may be killed during what follows
        late = set(plan.worker_only_procs) if plan.pid_ns else set()
        attach_self([p for p in plan.cgroup_procs if p not in late])
        # Opened now, written from the worker: the root may be read-only by then.
        late_fds = [os.open(p, os.O_WRONLY | os.O_CLOEXEC) for p in plan.cgroup_procs if p in late]
        if plan.unshare_flags:
            _linux.unshare(plan.unshare_flags)
        if plan.userns_ids is not None:
            uid, gid = plan.userns_ids
            _write("/proc/self/setgroups", "deny")
            _write("/proc/self/uid_map", f"{uid} {uid} 1")
            _write("/proc/self/gid_map", f"{gid} {gid} 1")
        mount_ns = bool(plan.unshare_flags & _linux.CLONE_NEWNS)
        if mount_ns and plan.root is not None:
            enter_root(plan.root, plan.scratch_mb)
        elif mount_ns:
            apply_masks(plan.masks, plan.scratch_mb)
            if plan.readonly is not None:
                readonly_root(plan.readonly)
        if plan.pid_ns:
            _enter_pid_namespace(plan)
            for fd in late_fds:  # the pid as this (the worker's) namespace numbers it
                os.write(fd, str(os.getpid()).encode())
                os.close(fd)
            if mount_ns:
                mount_proc(readonly=True)  # from inside: shows its mounter's namespace
        if mount_ns and plan.root is not None:
            leave_old_root(plan.root)
        os.chdir(plan.workdir)
        if plan.nproc is not None:
            resource.setrlimit(resource.RLIMIT_NPROC, (plan.nproc, plan.nproc))
        if plan.uid is not None:
            os.setgroups([])
            os.setgid(plan.uid)
            os.setuid(plan.uid)
        _linux.prctl(_linux.PR_SET_NO_NEW_PRIVS, 1)
        _linux.prctl(_linux.PR_SET_CHILD_SUBREAPER, 1)
        die_with_parent(1 if plan.pid_ns else plan.parent)  # again: the uid change cleared it
        if plan.seccomp:
            _seccomp.install()
    except BaseException as e:
        if plan.err_fd >= 0:
            with contextlib.suppress(OSError):
                os.write(plan.err_fd, f"{type(e).__name__}: {e}".encode()[:500])
        raise


def _true_binary() -> str:
    return shutil.which("true") or "/bin/true"


def try_child(plan: ChildPlan) -> str | None:
    """Run `true` with this plan; None if it worked, else why not."""
    r, w = os.pipe()
    sr, sw = os.pipe()
    plan = replace(plan, err_fd=w, status_fds=(sr, sw), parent=os.getpid())
    try:
        subprocess.run(
            [_true_binary()],
            preexec_fn=lambda: child_setup(plan),
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
        for fd in (r, w, sr, sw):
            if fd >= 0:
                os.close(fd)
