"""Dedicated unprivileged uids for workers when the judge runs as root.

Each live worker gets a uid of its own from a reserved range, leased with an advisory lock, so
concurrent judgements never share one: the uid owns nothing on the machine except the worker's
private directory, cannot signal or ptrace the judge or another worker, and "every process of
this uid" is exactly "everything this candidate started". Releasing a lease first kills any
process still running under the uid, so the next lessee starts clean.

The lock file also says whether the last lessee's leftovers (files, IPC objects) were swept:
it reads `dirty` from the moment of leasing until `mark_clean`, so a lessee that finds it dirty
(a judge killed mid-judgement, or a user of the lease that does not sweep) sweeps first.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import random
import tempfile
from dataclasses import dataclass
from pathlib import Path

from optarena.processes import pids_of_uid, stop_then_kill

UID_BASE = 1_500_000  # far above distribution ranges (system < 1000, users < 60000, nobody)
UID_SLOTS = 4096


def _lock_dir() -> Path:
    """A root-owned 0700 directory for the lease locks (a worker must not be able to hold one)."""
    for base in (Path("/run"), Path(tempfile.gettempdir())):
        d = base / "optarena-sandbox-uids"
        with contextlib.suppress(FileExistsError, PermissionError, FileNotFoundError):
            d.mkdir(mode=0o700)
        try:
            st = d.lstat()
        except OSError:
            continue
        private = st.st_uid == os.getuid() and st.st_mode & 0o077 == 0
        if d.is_dir() and not d.is_symlink() and private:
            return d
    raise OSError("no private directory for uid leases")


@dataclass
class UidLease:
    """A uid (and the equal gid) held until `release()`."""

    uid: int
    _fd: int
    was_dirty: bool = False  # the previous lessee may have left files or IPC objects

    @property
    def gid(self) -> int:
        return self.uid

    def processes(self) -> set[int]:
        return pids_of_uid(self.uid)

    def kill_all(self) -> int:
        return stop_then_kill(self.processes)

    def mark_clean(self) -> None:
        """Record that nothing of this uid is left (call after sweeping its leftovers)."""
        if self._fd >= 0:
            os.pwrite(self._fd, b"C", 0)

    def release(self) -> None:
        if self._fd < 0:
            return
        self.kill_all()
        with contextlib.suppress(OSError):
            os.close(self._fd)  # closing the descriptor drops the lock
        self._fd = -1


def lease_uid(rng: random.Random | None = None) -> UidLease:
    """Lock a free slot of the reserved range; kill leftovers of a crashed earlier lessee."""
    d = _lock_dir()
    # A random starting slot, then every slot in turn: as unpredictable as a shuffle for the
    # first choice, without drawing 4096 random numbers (that took 13 ms per lease).
    start = (rng or random.SystemRandom()).randrange(UID_SLOTS)
    for slot in ((start + i) % UID_SLOTS for i in range(UID_SLOTS)):
        uid = UID_BASE + slot
        fd = os.open(d / f"{uid}.lock", os.O_CREAT | os.O_RDWR | os.O_CLOEXEC, 0o600)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError:
            os.close(fd)
            continue
        was_dirty = os.pread(fd, 1, 0) == b"D"
        os.pwrite(fd, b"D", 0)
        lease = UidLease(uid, fd, was_dirty)
        if lease.processes():  # a judge died without cleaning up: its worker is still here
            lease.kill_all()
        return lease
    raise OSError(f"all {UID_SLOTS} sandbox uids are in use")
