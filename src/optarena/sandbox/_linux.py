"""The few Linux system calls the sandbox needs and the standard library lacks (via ctypes).

Everything here is called either in the judge (probing) or in the forked child between fork and
exec, so it allocates little and imports nothing at call time. Each wrapper raises OSError with
the errno and the operation named, so a probe can report *why* a measure is unavailable.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import os
import platform
import sys

CLONE_NEWNS = 0x00020000
CLONE_NEWIPC = 0x08000000
CLONE_NEWUSER = 0x10000000
CLONE_NEWPID = 0x20000000
CLONE_NEWNET = 0x40000000

MS_RDONLY = 1
MS_NOSUID = 2
MS_NODEV = 4
MS_NOEXEC = 8
MS_REMOUNT = 32
MS_NOATIME = 1024
MS_NODIRATIME = 2048
MS_BIND = 4096
MS_REC = 16384
MS_PRIVATE = 1 << 18
MS_RELATIME = 1 << 21
MS_STRICTATIME = 1 << 24
MNT_DETACH = 2

# mount_setattr(2) (Linux >= 5.12): change flags of a whole mount tree in one call.
AT_RECURSIVE = 0x8000
MOUNT_ATTR_RDONLY = 0x1
# Syscall numbers from the table shared by all architectures since Linux 5.1.
SYS_CLOSE_RANGE = 436
SYS_MOUNT_SETATTR = 442
# pivot_root(2) predates the shared table: its number differs per architecture (glibc has no
# wrapper). Elsewhere a private root is reported unavailable, never faked with chroot.
SYS_PIVOT_ROOT = {
    "x86_64": 155,
    "aarch64": 41,
    "arm64": 41,
    "riscv64": 41,
    "ppc64le": 203,
    "ppc64": 203,
    "s390x": 217,
}.get(platform.machine())

PR_SET_PDEATHSIG = 1
PR_SET_DUMPABLE = 4
PR_SET_CHILD_SUBREAPER = 36
PR_SET_NO_NEW_PRIVS = 38

_libc: ctypes.CDLL | None = None
if sys.platform.startswith("linux"):
    _libc = ctypes.CDLL(ctypes.util.find_library("c") or None, use_errno=True)
    _libc.mount.argtypes = [
        ctypes.c_char_p,
        ctypes.c_char_p,
        ctypes.c_char_p,
        ctypes.c_ulong,
        ctypes.c_char_p,
    ]
    _libc.unshare.argtypes = [ctypes.c_int]
    _libc.umount2.argtypes = [ctypes.c_char_p, ctypes.c_int]
    _libc.syscall.restype = ctypes.c_long
    _libc.prctl.argtypes = [
        ctypes.c_int,
        ctypes.c_ulong,
        ctypes.c_ulong,
        ctypes.c_ulong,
        ctypes.c_ulong,
    ]


def available() -> bool:
    """Whether these calls exist at all (Linux with a loadable libc)."""
    return _libc is not None


def _check(result: int, what: str) -> None:
    if result != 0:
        err = ctypes.get_errno()
        raise OSError(err, f"{what}: {os.strerror(err)}")


def unshare(flags: int) -> None:
    if _libc is None:
        raise OSError(38, "unshare: not Linux")
    _check(_libc.unshare(flags), "unshare")


def mount(source: str | None, target: str, fstype: str | None, flags: int, data: str = "") -> None:
    if _libc is None:
        raise OSError(38, "mount: not Linux")
    _check(
        _libc.mount(
            source.encode() if source is not None else None,
            target.encode(),
            fstype.encode() if fstype is not None else None,
            flags,
            data.encode() if data else None,
        ),
        f"mount {target}",
    )


def prctl(option: int, arg: int, arg3: int = 0) -> None:
    if _libc is None:
        raise OSError(38, "prctl: not Linux")
    _check(_libc.prctl(option, arg, arg3, 0, 0), f"prctl({option})")


class _IOVec(ctypes.Structure):
    _fields_ = (("base", ctypes.c_void_p), ("len", ctypes.c_size_t))


if _libc is not None:
    _libc.process_vm_readv.argtypes = [
        ctypes.c_int,
        ctypes.POINTER(_IOVec),
        ctypes.c_ulong,
        ctypes.POINTER(_IOVec),
        ctypes.c_ulong,
        ctypes.c_ulong,
    ]
    _libc.process_vm_readv.restype = ctypes.c_ssize_t


def process_vm_read(pid: int, address: int, into: int, nbytes: int) -> None:
    """Copy `nbytes` at `address` in process `pid` to our memory at `into`; OSError unless all
    of them could be read (a range not mapped there, a process gone, no permission)."""
    if _libc is None:
        raise OSError(38, "process_vm_readv: not Linux")
    local = _IOVec(into, nbytes)
    remote = _IOVec(address, nbytes)
    done = _libc.process_vm_readv(pid, ctypes.byref(local), 1, ctypes.byref(remote), 1, 0)
    if done != nbytes:
        err = ctypes.get_errno() if done < 0 else 14  # a short read: part of it is not mapped
        raise OSError(err, f"process_vm_readv: {os.strerror(err)}")


class _MountAttr(ctypes.Structure):
    _fields_ = (
        ("attr_set", ctypes.c_uint64),
        ("attr_clr", ctypes.c_uint64),
        ("propagation", ctypes.c_uint64),
        ("userns_fd", ctypes.c_uint64),
    )


def mount_setattr(path: str, *, set_flags: int = 0, clear: int = 0, recursive: bool) -> None:
    """Set/clear MOUNT_ATTR_* flags on the mount at `path` (and all below it if recursive).

    Unlike a remount it leaves every other flag alone, so it works on mounts whose nosuid or
    nodev are locked (inherited into a user namespace). ENOSYS before Linux 5.12."""
    if _libc is None:
        raise OSError(38, "mount_setattr: not Linux")
    attr = _MountAttr(set_flags, clear, 0, 0)
    flags = AT_RECURSIVE if recursive else 0
    result = _libc.syscall(
        ctypes.c_long(SYS_MOUNT_SETATTR),
        ctypes.c_int(-100),  # AT_FDCWD
        ctypes.c_char_p(path.encode()),
        ctypes.c_uint(flags),
        ctypes.byref(attr),
        ctypes.c_size_t(ctypes.sizeof(attr)),
    )
    _check(0 if result == 0 else -1, f"mount_setattr {path}")


def close_fds_except(keep: set[int], ceiling: int) -> None:
    """Close every descriptor but `keep`: close_range(2) where the kernel has it (no limit on
    how high a descriptor may be), otherwise one close per number below `ceiling`."""
    edges = sorted(k for k in keep if k >= 0)
    start = 0
    for k in [*edges, None]:
        last = (k - 1) if k is not None else 0xFFFFFFFF
        if last >= start:
            done = False
            if _libc is not None:
                r = _libc.syscall(
                    ctypes.c_long(SYS_CLOSE_RANGE),
                    ctypes.c_uint(start),
                    ctypes.c_uint(last),
                    ctypes.c_uint(0),
                )
                done = r == 0
            if not done:
                os.closerange(start, min(last, ceiling) + 1)
        if k is not None:
            start = k + 1


def umount2(target: str, flags: int) -> None:
    if _libc is None:
        raise OSError(38, "umount2: not Linux")
    _check(_libc.umount2(target.encode(), flags), f"umount {target}")


def pivot_root(new_root: str, put_old: str) -> None:
    """Make `new_root` this mount namespace's root and `put_old` the old one's place."""
    if _libc is None or SYS_PIVOT_ROOT is None:
        raise OSError(38, f"pivot_root: no syscall number known for {platform.machine()}")
    result = _libc.syscall(
        ctypes.c_long(SYS_PIVOT_ROOT),
        ctypes.c_char_p(new_root.encode()),
        ctypes.c_char_p(put_old.encode()),
    )
    _check(0 if result == 0 else -1, "pivot_root")
