"""Removing what a worker's uid left behind when its lease ends: files, IPC objects, queues.

With all measures on nothing is left: the root filesystem is read-only, scratch is a private
tmpfs and IPC objects live in the worker's own IPC namespace, all of which vanish with it. This
sweep is the second line, and the only one where a measure is off or unavailable: a leased uid
owns nothing on the machine but what its candidate made, so everything it owns is removed.

- **files**: below the directories any user may write (`/tmp`, `/var/tmp`, `/dev/shm`,
  `/run/lock`, ...), descending only into directories the uid could have reached, and using
  descriptors (`fwalk`, `dir_fd`) so that a path swapped for a symlink by another process
  cannot redirect a deletion. The worker's own directory is skipped (the judge reads it);
- **SysV IPC**: every shared-memory segment, semaphore set and message queue it created or
  owns (`/proc/sysvipc/*`, removed with IPC_RMID);
- **POSIX message queues**: those it owns in the judge's IPC namespace, listed through an
  mqueue filesystem (mounted in a throwaway mount namespace where none is mounted).
"""

from __future__ import annotations

import contextlib
import ctypes
import ctypes.util
import os
import stat
import subprocess
import sys
import tempfile
from collections.abc import Callable, Iterable, Sequence
from pathlib import Path

from optarena.files import Entry, walk_untrusted
from optarena.sandbox import _linux

WRITABLE_ROOTS = ("/tmp", "/var/tmp", "/dev/shm", "/run/lock", "/run/shm", "/dev/mqueue")
IPC_RMID = 0


def _reachable(st: os.stat_result, uid: int) -> bool:
    """Whether `uid` (whose gid equals it, no supplementary groups) could search this dir."""
    if st.st_uid == uid:
        return True
    if st.st_gid == uid:
        return bool(st.st_mode & stat.S_IXGRP)
    return bool(st.st_mode & stat.S_IXOTH)


def remove_files_of(uid: int, roots: Iterable[str], skip: Sequence[Path] = ()) -> list[str]:
    """Delete every file and directory `uid` owns below `roots`; returns what was removed.
    Walked through descriptors (`walk_untrusted`: a swapped symlink cannot redirect it, and a
    tree nested thousands deep cannot exhaust the stack, as `os.fwalk` did), entering only
    directories the uid could search, to `MAX_DEPTH` levels."""
    skipped = set()
    for p in skip:
        with contextlib.suppress(OSError):
            st = os.stat(p)
            skipped.add((st.st_dev, st.st_ino))

    def enter(e: Entry) -> bool:
        mine = (e.st.st_dev, e.st.st_ino) in skipped
        return not mine and e.st.st_uid != uid and _reachable(e.st, uid)

    removed: list[str] = []
    for root in roots:
        if not os.path.isdir(root) or os.path.islink(root):
            continue
        for e in walk_untrusted(Path(root), enter=enter):
            if e.st.st_uid != uid or (e.st.st_dev, e.st.st_ino) in skipped:
                continue
            with contextlib.suppress(OSError):
                e.remove()
                removed.append(os.path.join(root, e.rel))
    return removed


# /proc/sysvipc columns: (file, id column, owner uid column, creator uid column)
_SYSV = (("shm", 1, 7, 9), ("sem", 1, 4, 6), ("msg", 1, 7, 9))


def sysv_objects_of(uid: int) -> list[tuple[str, int]]:
    """(kind, id) of every SysV IPC object `uid` owns or created in our IPC namespace."""
    out: list[tuple[str, int]] = []
    for kind, id_col, uid_col, cuid_col in _SYSV:
        try:
            lines = Path(f"/proc/sysvipc/{kind}").read_text().splitlines()[1:]
        except OSError:
            continue
        for line in lines:
            cols = line.split()
            with contextlib.suppress(ValueError, IndexError):
                if uid in (int(cols[uid_col]), int(cols[cuid_col])):
                    out.append((kind, int(cols[id_col])))
    return out


def remove_sysv_of(uid: int) -> list[tuple[str, int]]:
    """IPC_RMID every SysV object of `uid` (a segment still attached goes when detached)."""
    found = sysv_objects_of(uid)
    if not found:
        return []
    libc = ctypes.CDLL(ctypes.util.find_library("c") or None, use_errno=True)
    for kind, ident in found:
        if kind == "shm":
            libc.shmctl(ident, IPC_RMID, None)
        elif kind == "sem":
            libc.semctl(ident, 0, IPC_RMID)
        else:
            libc.msgctl(ident, IPC_RMID, None)
    return found


def _mqueue_mounts() -> list[str]:
    out = []
    with contextlib.suppress(OSError), open("/proc/self/mountinfo") as f:
        for line in f:
            left, _, right = line.partition(" - ")
            if right.split()[:1] == ["mqueue"]:
                out.append(left.split()[4])
    return out


_MQ_SWEEP = """
import os, sys
uid, where = int(sys.argv[1]), sys.argv[2]
for name in os.listdir(where):
    if os.stat(os.path.join(where, name)).st_uid == uid:
        os.unlink(os.path.join(where, name))
        print(name)
"""


def _private_mqueue_mount(where: str) -> Callable[[], None]:
    """In a throwaway child: a mount namespace of its own with the mqueue fs over `where`, an
    empty directory of its own (over /tmp it would hide an interpreter installed there)."""

    def setup() -> None:
        _linux.unshare(_linux.CLONE_NEWNS)
        _linux.mount(None, "/", None, _linux.MS_REC | _linux.MS_PRIVATE)
        _linux.mount("mqueue", where, "mqueue", _linux.MS_NOSUID | _linux.MS_NODEV)

    return setup


def remove_mqueues_of(uid: int) -> list[str]:
    """Unlink every POSIX message queue `uid` owns in our IPC namespace."""
    mounts = _mqueue_mounts()
    if mounts:
        removed = []
        for where in mounts:
            for name in os.listdir(where):
                with contextlib.suppress(OSError):
                    if os.stat(os.path.join(where, name)).st_uid == uid:
                        os.unlink(os.path.join(where, name))
                        removed.append(name)
        return removed
    if os.geteuid() != 0:
        return []  # an mqueue fs cannot be mounted for our IPC namespace without root
    where = tempfile.mkdtemp(prefix="optarena-mq-")
    try:
        out = subprocess.run(
            [sys.executable, "-I", "-c", _MQ_SWEEP, str(uid), where],
            preexec_fn=_private_mqueue_mount(where),
            capture_output=True,
            text=True,
            timeout=20,
            check=False,
        )
    finally:
        with contextlib.suppress(OSError):
            os.rmdir(where)
    return out.stdout.split()
