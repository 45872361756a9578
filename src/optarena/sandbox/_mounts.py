"""A private view of the filesystem for the worker, built in its own mount namespace.

After the masks, `readonly_root` makes every mount read-only except the worker's working
directory and its scratch tmpfs, so nothing the candidate writes outlives it anywhere else;
`mount_proc` gives it a /proc that shows only its own PID namespace.

Three jobs, one primitive. A *mask* mounts an empty tmpfs over a directory and binds back, at
their old places, only the paths under it that the worker needs. It is used to

- hide the task package (oracle, generator) from the candidate;
- give the worker private scratch directories (`/tmp`, `/var/tmp`, `/dev/shm`), so nothing it
  writes there reaches the host or outlives the judgement;
- make the interpreter reachable for an unprivileged uid when it lives under a directory that
  uid may not traverse (e.g. a pyenv Python under a 0700 `/root`), without loosening any
  permission on the host: everything else under that directory stays invisible.

`plan_masks` is pure (tested on literal paths); `apply_masks` runs in the forked child.
"""

from __future__ import annotations

import errno
import os
import stat
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from optarena.sandbox import _linux

SCRATCH_DIRS = ("/tmp", "/var/tmp", "/dev/shm")
# A worker's root filesystem is read-only: every directory programs expect to write becomes
# private scratch (`/run/lock` too: world-writable on most distributions, and persistent).
WORKER_SCRATCH = (*SCRATCH_DIRS, "/run/lock")


@dataclass(frozen=True)
class Mask:
    """A fresh tmpfs at `path`; `keep` (absolute paths below it) are bound back in place."""

    path: str
    keep: tuple[str, ...] = ()
    scratch: bool = False  # world-writable (1777) rather than an empty read-only directory


def _under(path: str, root: str) -> bool:
    return path == root or path.startswith(root.rstrip("/") + "/")


def _ancestors(path: str) -> list[str]:
    """'/a/b/c' -> ['/', '/a', '/a/b'] (strict ancestors, outermost first)."""
    parts = path.strip("/").split("/")
    return ["/" + "/".join(parts[:i]) for i in range(len(parts))]


def may_traverse(st: os.stat_result, uid: int, gid: int) -> bool:
    """Whether (uid, gid) without supplementary groups may search a directory with this stat."""
    if uid == 0:
        return True
    if st.st_uid == uid:
        return bool(st.st_mode & stat.S_IXUSR)
    if st.st_gid == gid:
        return bool(st.st_mode & stat.S_IXGRP)
    return bool(st.st_mode & stat.S_IXOTH)


def blockers(needed: Iterable[str], uid: int, gid: int) -> dict[str, list[str]]:
    """For each directory the uid cannot traverse on the way to a needed path: those paths."""
    out: dict[str, list[str]] = {}
    for path in needed:
        for anc in _ancestors(path):
            try:
                st = os.stat(anc)
            except OSError:
                break
            if not may_traverse(st, uid, gid):
                out.setdefault(anc, []).append(path)
                break
    return out


def _outermost(paths: Iterable[str]) -> tuple[str, ...]:
    uniq = sorted(set(paths), key=lambda p: (p.count("/"), p))
    kept: list[str] = []
    for p in uniq:
        if not any(_under(p, k) for k in kept):
            kept.append(p)
    return tuple(kept)


def plan_masks(
    needed: Sequence[str],
    hide: Sequence[str],
    scratch: Sequence[str] = SCRATCH_DIRS,
    blocked: Iterable[str] = (),
) -> list[Mask]:
    """Masks for `hide`, `scratch` and `blocked` directories that keep every `needed` path.

    A directory inside another mask's hidden part needs no mask of its own (it is already
    gone); one inside a kept path is masked after the outer mask, so order is outermost first.
    """
    wanted: dict[str, bool] = {}
    for p in (*hide, *blocked):
        wanted[p] = False
    for p in scratch:
        wanted[p] = True
    masks: list[Mask] = []
    for path in sorted(wanted, key=lambda p: (p.count("/"), p)):
        if any(_under(path, m.path) and not any(_under(path, k) for k in m.keep) for m in masks):
            continue
        keep = _outermost(n for n in needed if _under(n, path) and n != path)
        if any(n == path for n in needed):
            continue  # never hide something the worker needs
        masks.append(Mask(path=path, keep=keep, scratch=wanted[path]))
    return masks


def _placeholder(path: str, is_dir: bool) -> None:
    if is_dir:
        os.makedirs(path, exist_ok=True)
    else:
        os.makedirs(os.path.dirname(path), exist_ok=True)
        with open(path, "ab"):
            pass


def apply_masks(masks: Sequence[Mask], scratch_mb: int) -> None:
    """In the child, inside a fresh mount namespace: make mounts private, then mask."""
    _linux.mount(None, "/", None, _linux.MS_REC | _linux.MS_PRIVATE)
    for m in masks:
        if not os.path.isdir(m.path):
            continue
        held = [(k, os.open(k, os.O_PATH), os.path.isdir(k)) for k in m.keep if os.path.exists(k)]
        size = f"{scratch_mb}m" if m.scratch else "1m"
        mode = "1777" if m.scratch else "755"
        flags = _linux.MS_NOSUID | _linux.MS_NODEV
        _linux.mount("tmpfs", m.path, "tmpfs", flags, f"mode={mode},size={size}")
        for path, fd, is_dir in held:
            _placeholder(path, is_dir)
            _linux.mount(f"/proc/self/fd/{fd}", path, None, _linux.MS_BIND | _linux.MS_REC)
            os.close(fd)
        if not m.scratch:
            _linux.mount(None, m.path, None, _linux.MS_REMOUNT | _linux.MS_RDONLY | flags)


_MOUNT_FLAGS = {
    "nosuid": _linux.MS_NOSUID,
    "nodev": _linux.MS_NODEV,
    "noexec": _linux.MS_NOEXEC,
    "noatime": _linux.MS_NOATIME,
    "nodiratime": _linux.MS_NODIRATIME,
    "relatime": _linux.MS_RELATIME,
}


def _unescape(field: str) -> str:
    """mountinfo writes space, tab, newline and backslash in paths as octal escapes."""
    for code, char in (("\\040", " "), ("\\011", "\t"), ("\\012", "\n"), ("\\134", "\\")):
        field = field.replace(code, char)
    return field


def _mounts_with_flags() -> list[tuple[str, int]]:
    """(mount point, per-mount MS_* flags) of every mount in this namespace, outermost first."""
    out: list[tuple[str, int]] = []
    with open("/proc/self/mountinfo") as f:
        for line in f:
            fields = line.split()
            flags = 0
            for opt in fields[5].split(","):
                flags |= _MOUNT_FLAGS.get(opt, 0)
            out.append((_unescape(fields[4]), flags))
    return out


def _remount_each(readonly: bool, only: Sequence[str] | None = None) -> None:
    """The fallback before mount_setattr(2): remount mount by mount, keeping each one's other
    flags (a remount that dropped a locked nosuid would fail in a user namespace)."""
    for path, flags in _mounts_with_flags():
        if only is not None and path not in only:
            continue
        ro = _linux.MS_RDONLY if readonly else 0
        _linux.mount(None, path, None, _linux.MS_BIND | _linux.MS_REMOUNT | flags | ro)


def readonly_root(writable: Sequence[str]) -> None:
    """In the child, after the masks: every mount read-only except the `writable` directories
    (the working directory, bound onto itself so it is a mount of its own, and the scratch
    tmpfs mounts). Covers mounts below the root too (/dev, /sys, /run ...), not only '/'."""
    for path in writable:
        if not _is_mount_point(path):
            _linux.mount(path, path, None, _linux.MS_BIND | _linux.MS_REC)
    try:
        _linux.mount_setattr("/", set_flags=_linux.MOUNT_ATTR_RDONLY, recursive=True)
        for path in writable:
            _linux.mount_setattr(path, clear=_linux.MOUNT_ATTR_RDONLY, recursive=False)
    except OSError as e:
        if e.errno not in (errno.ENOSYS, errno.EINVAL):
            raise
        _remount_each(readonly=True)
        _remount_each(readonly=False, only=writable)


def _is_mount_point(path: str) -> bool:
    return any(p == path for p, _ in _mounts_with_flags())


def mount_proc() -> None:
    """In the worker, inside its PID namespace: a fresh procfs over /proc, listing only the
    namespace's processes (the judge, the other arm and every other process disappear).

    `hidepid=2` also hides processes of other uids: the namespace's init, a root-owned copy of
    the judge's process, whose command line would otherwise be readable."""
    flags = _linux.MS_NOSUID | _linux.MS_NODEV | _linux.MS_NOEXEC
    _linux.mount("proc", "/proc", "proc", flags, "hidepid=2")
