"""The few Linux system calls the sandbox needs and the standard library lacks (via ctypes).

Everything here is called either in the judge (probing) or in the forked child between fork and
exec, so it allocates little and imports nothing at call time. Each wrapper raises OSError with
the errno and the operation named, so a probe can report *why* a measure is unavailable.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import os
import sys

CLONE_NEWNS = 0x00020000
CLONE_NEWUSER = 0x10000000
CLONE_NEWNET = 0x40000000

MS_RDONLY = 1
MS_NOSUID = 2
MS_NODEV = 4
MS_REMOUNT = 32
MS_BIND = 4096
MS_REC = 16384
MS_PRIVATE = 1 << 18

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


def prctl(option: int, arg: int) -> None:
    if _libc is None:
        raise OSError(38, "prctl: not Linux")
    _check(_libc.prctl(option, arg, 0, 0, 0), f"prctl({option})")
