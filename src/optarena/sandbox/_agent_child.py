"""What the agent's first process does between fork and exec: join its cgroup, enter its
namespaces, bring up a loopback, hide and make read-only, drop to its uid.

Everything here is decided by the parent (`AgentChildPlan`) and runs in the forked child, so it
imports nothing at call time. Unlike a candidate's worker, the agent keeps `/proc` and `/dev`
as they are (it runs arbitrary tools: shells, compilers, node) and is not made a child
subreaper (orphans of its tools go to init, where the cgroup still holds them).
"""

from __future__ import annotations

import contextlib
import os
import socket
from collections.abc import Sequence
from dataclasses import dataclass

from optarena.processes import HeldNamespace
from optarena.sandbox import _linux
from optarena.sandbox._agent_net import loopback_up
from optarena.sandbox._cgroup import attach_self
from optarena.sandbox._child import ChildPlan, die_with_parent
from optarena.sandbox._child import _enter_pid_namespace as enter_pid_namespace
from optarena.sandbox._mounts import Mask, apply_masks, mount_proc
from optarena.sandbox._root import RootPlan, enter_root, leave_old_root, mount_points

_UNTOUCHED = ("/proc", "/dev")  # kernel interfaces: left as they are (devices stay usable)


@dataclass(frozen=True)
class AgentChildPlan:
    """Everything the agent's first process does between fork and exec, decided in the parent."""

    workdir: str
    unshare_flags: int = 0
    userns_ids: tuple[int, int] | None = None
    loopback: bool = False
    masks: tuple[Mask, ...] = ()
    scratch_mb: int = 64
    writable: tuple[str, ...] = ()
    readonly: bool = False
    cgroup_procs: str | None = None
    uid: int | None = None
    nproc: int | None = None
    root: RootPlan | None = None  # a default-deny root, instead of `masks` and `readonly`
    status_fds: tuple[int, int] = (-1, -1)  # init -> holder (PID namespace, see `_child`)
    fd_ceiling: int = 4096
    err_fd: int = -1
    ns_sock: int = -1  # where its new namespaces are sent (`send_namespaces`), before any exec
    parent: int = 0  # optarena's pid: the parent the child dies with (`die_with_parent`)


NAMESPACES_SENT = {_linux.CLONE_NEWUSER: "user", _linux.CLONE_NEWPID: "pid"}


def send_namespaces(sock: int, flags: int) -> None:
    """Send optarena a descriptor of each new namespace of this process that cleanup finds
    processes by (its user namespace, its PID namespace), over the Unix socket `sock`, named
    in the message. Sent before any of the agent's code runs: read from /proc after the exec,
    they could already be namespaces the agent made inside them, with one of its processes
    left in the first."""
    names = [name for flag, name in NAMESPACES_SENT.items() if flags & flag]
    if not names:
        return
    fds = [os.open(f"/proc/self/ns/{name}", os.O_RDONLY | os.O_CLOEXEC) for name in names]
    try:
        with socket.socket(fileno=os.dup(sock)) as s:
            socket.send_fds(s, [",".join(names).encode()], fds)
    finally:
        for fd in fds:
            os.close(fd)


def receive_namespaces(sock: socket.socket) -> dict[str, HeldNamespace]:
    """What `send_namespaces` sent on `sock`, held (by the name it was sent under); empty
    where nothing was sent. Read once, right after the spawn: by then the child has exec'd,
    and every descriptor of this socket's other end is closed (nothing the agent runs can
    send on it)."""
    sock.setblocking(False)
    try:
        msg, fds, _flags, _addr = socket.recv_fds(sock, 256, len(NAMESPACES_SENT))
    except BlockingIOError:
        return {}
    names = msg.decode().split(",")
    if len(names) != len(fds):
        for fd in fds:
            os.close(fd)
        return {}
    return {name: HeldNamespace.of_fd(fd, name) for name, fd in zip(names, fds, strict=True)}


def under_any(path: str, roots: Sequence[str]) -> bool:
    return any(path == r or path.startswith(r.rstrip("/") + "/") for r in roots)


def readonly_rest(keep_writable: Sequence[str]) -> None:
    """Remount every visible mount read-only except those at or under `keep_writable` and the
    kernel interfaces. A mount that is hidden by a mask (no longer at its path) is skipped."""
    with open("/proc/self/mountinfo") as f:
        points = mount_points(f.read())
    seen: set[str] = set()
    skip = (*keep_writable, *_UNTOUCHED)
    for path, flags in reversed(points):  # the topmost mount at a path is listed last
        if path in seen or under_any(path, skip):
            continue
        seen.add(path)
        remount = _linux.MS_REMOUNT | _linux.MS_BIND | _linux.MS_RDONLY | flags
        try:
            _linux.mount(None, path, None, remount)
        except OSError as e:
            if e.errno not in (2, 22):  # ENOENT, EINVAL: covered by a mask, not reachable
                raise


def agent_child_setup(plan: AgentChildPlan) -> None:
    """Runs in the forked child. Join the cgroup and build the namespaces while privileged,
    make the filesystem read-only but for the writable directories, then drop the uid."""
    try:
        die_with_parent(plan.parent)  # first: optarena may be killed during what follows
        if plan.cgroup_procs:
            attach_self(plan.cgroup_procs)
        if plan.unshare_flags:
            _linux.unshare(plan.unshare_flags)
        if plan.userns_ids is not None:
            uid, gid = plan.userns_ids
            for path, text in (
                ("/proc/self/setgroups", "deny"),
                ("/proc/self/uid_map", f"{uid} {uid} 1"),
                ("/proc/self/gid_map", f"{gid} {gid} 1"),
            ):
                with open(path, "w") as f:
                    f.write(text)
        if plan.loopback:
            loopback_up()
        if plan.unshare_flags & _linux.CLONE_NEWNS and plan.root is not None:
            enter_root(plan.root, plan.scratch_mb)
        elif plan.unshare_flags & _linux.CLONE_NEWNS:
            apply_masks(plan.masks, plan.scratch_mb)
            for path in plan.writable:  # its own mount, so the read-only pass passes it by
                _linux.mount(path, path, None, _linux.MS_BIND | _linux.MS_REC)
            if plan.readonly:
                scratch = [m.path for m in plan.masks if m.scratch]
                readonly_rest([*plan.writable, *scratch])
        if plan.unshare_flags & _linux.CLONE_NEWPID:
            # holder (optarena's namespace) -> init -> the agent, as a candidate's worker has
            enter_pid_namespace(ChildPlan(plan.workdir, status_fds=plan.status_fds,
                                          fd_ceiling=plan.fd_ceiling,
                                          parent=plan.parent))  # fmt: skip
            mount_proc()  # from inside: it lists the namespace's processes only
        if plan.unshare_flags & _linux.CLONE_NEWNS and plan.root is not None:
            leave_old_root(plan.root)
        os.chdir(plan.workdir)  # after the mounts: the old cwd is on the read-only mount
        if plan.ns_sock >= 0:  # in the PID namespace by now (a new one has no pid before)
            send_namespaces(plan.ns_sock, plan.unshare_flags)
        if plan.nproc is not None:
            import resource

            resource.setrlimit(resource.RLIMIT_NPROC, (plan.nproc, plan.nproc))
        if plan.uid is not None:
            os.setgroups([])
            os.setgid(plan.uid)
            os.setuid(plan.uid)
        _linux.prctl(_linux.PR_SET_NO_NEW_PRIVS, 1)
        # Again after setuid, which clears it; its parent is init in a PID namespace.
        pid_ns = bool(plan.unshare_flags & _linux.CLONE_NEWPID)
        die_with_parent(1 if pid_ns else plan.parent)
    except BaseException as e:
        if plan.err_fd >= 0:
            with contextlib.suppress(OSError):
                os.write(plan.err_fd, f"{type(e).__name__}: {e}".encode()[:500])
        raise
