"""Finding and killing what agents of a dead optarena left running (after a `kill -9`).

The agent's first process dies with optarena (parent-death signal); what it detached does not.
Each agent's cgroup is named after its owner (pid and start time, so a reused pid does not pass
for the owner), and as root each agent runs under a leased uid whose lock dies with its holder:
a cgroup whose owner is gone, or a sandbox uid with processes and a free lock, is a leftover.
`Ledger.reconcile` (every `optarena` command) calls `sweep_agent_leftovers`.
"""

from __future__ import annotations

import fcntl
import os
import secrets
from pathlib import Path

from optarena.sandbox._cgroup import PidsCgroup, find_pids_root
from optarena.sandbox._tree import all_pids, real_uid
from optarena.sandbox._uids import UID_BASE, UID_SLOTS, UidLease, _lock_dir

CGROUP_PREFIX = "optarena-agent-"


def _start_ticks(pid: int) -> int | None:
    try:
        raw = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    return int(raw[raw.rindex(")") + 2 :].split()[19])


class AgentCgroup(PidsCgroup):
    """A pids cgroup named after its owner, `optarena-agent-<pid>-<start ticks>-<hex>`, so that a
    sweep can tell a live owner from a dead one whose pid was reused."""

    def __init__(self, base: Path, max_pids: int) -> None:
        pid = os.getpid()
        name = f"{CGROUP_PREFIX}{pid}-{_start_ticks(pid)}-{secrets.token_hex(4)}"
        self.path = base / name
        self.path.mkdir()
        try:
            (self.path / "pids.max").write_text(str(max_pids))
        except OSError:
            self.path.rmdir()
            raise


def _owner_alive(pid: int, ticks: int | None) -> bool:
    return _start_ticks(pid) == ticks if ticks is not None else Path(f"/proc/{pid}").exists()


def sweep_agent_leftovers() -> int:
    """Kill what agents of dead optarena processes left running: the members of their
    cgroups (whose name says the owner), and, as root, every process of a sandbox uid whose
    lease nobody holds. Returns how many processes were killed. Cheap: one /proc scan."""
    killed = 0
    base, _why = find_pids_root()
    if base is not None:
        for path in base.glob(f"{CGROUP_PREFIX}*"):
            parts = path.name[len(CGROUP_PREFIX) :].split("-")
            if len(parts) < 3 or not parts[0].isdigit():
                continue
            ticks = int(parts[1]) if parts[1].isdigit() else None
            if _owner_alive(int(parts[0]), ticks):
                continue
            stale = PidsCgroup.__new__(PidsCgroup)
            stale.path = path
            killed += stale.kill_all()
            stale.remove()
    if os.geteuid() == 0:
        killed += _sweep_uids()
    return killed


def _sweep_uids() -> int:
    owners = set()
    for pid in all_pids():
        uid = real_uid(pid)
        if uid is not None and UID_BASE <= uid < UID_BASE + UID_SLOTS:
            owners.add(uid)
    if not owners:
        return 0
    try:
        locks = _lock_dir()
    except OSError:
        return 0
    killed = 0
    for uid in sorted(owners):
        fd = os.open(locks / f"{uid}.lock", os.O_CREAT | os.O_RDWR | os.O_CLOEXEC, 0o600)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError:
            os.close(fd)  # a live sandbox holds it
            continue
        lease = UidLease(uid, fd)
        killed += lease.kill_all()
        lease.release()
    return killed
