"""Finding and removing what agents of a dead optarena left behind (after a `kill -9`).

The agent's first process dies with optarena (parent-death signal); what it detached does not,
nor do the Unix sockets of its network bridge. Each agent's cgroup and socket directory are
named after their owner (pid and start time, so a reused pid does not pass for the owner), and
as root each agent runs under a leased uid whose lock dies with its holder: a cgroup or socket
directory whose owner is gone, or a sandbox uid with processes and a free lock, is a leftover.
`Ledger.reconcile` (the recovery step of `run`, `experiment run` and `harness run`) calls
`sweep_agent_leftovers`.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import secrets
import stat
import tempfile
from pathlib import Path

from optarena.processes import all_pids, real_uid, start_ticks
from optarena.sandbox._cgroup import PidsCgroup, find_pids_root
from optarena.sandbox._uids import UID_BASE, UID_SLOTS, UidLease, _lock_dir

CGROUP_PREFIX = "optarena-agent-"


def owned_name() -> str:
    """`optarena-agent-<pid>-<start ticks>-<hex>`: a name that says which process made it, so
    that a sweep can tell a live owner from a dead one whose pid was reused."""
    pid = os.getpid()
    return f"{CGROUP_PREFIX}{pid}-{start_ticks(pid)}-{secrets.token_hex(4)}"


def _owner_gone(name: str) -> bool:
    """Whether a name made by `owned_name` names an owner that has ended (other names: no)."""
    parts = name[len(CGROUP_PREFIX) :].split("-")
    if not name.startswith(CGROUP_PREFIX) or len(parts) < 3 or not parts[0].isdigit():
        return False
    ticks = int(parts[1]) if parts[1].isdigit() else None
    return not _owner_alive(int(parts[0]), ticks)


def socket_bases() -> list[Path]:
    """Where agents' bridge sockets live: /run where optarena may write it, else the temp
    directory."""
    return [Path("/run")] if os.access("/run", os.W_OK) else [Path(tempfile.gettempdir())]


class AgentCgroup(PidsCgroup):
    """A pids cgroup named after its owner (`owned_name`)."""

    def __init__(self, base: Path, max_pids: int) -> None:
        self.path = base / owned_name()
        self.path.mkdir()
        try:
            (self.path / "pids.max").write_text(str(max_pids))
        except OSError:
            self.path.rmdir()
            raise


def _owner_alive(pid: int, ticks: int | None) -> bool:
    return start_ticks(pid) == ticks if ticks is not None else Path(f"/proc/{pid}").exists()


def remove_socket_dir(path: Path) -> bool:
    """Remove a bridge's socket directory: its sockets, then itself. Anything else in it (it
    was never the agent's to write) keeps it, untouched. True when it is gone."""
    with contextlib.suppress(OSError):
        fd = os.open(path, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW)
        try:
            for name in os.listdir(fd):
                st = os.stat(name, dir_fd=fd, follow_symlinks=False)
                if stat.S_ISSOCK(st.st_mode) and name.endswith(".sock"):
                    os.unlink(name, dir_fd=fd)
        finally:
            os.close(fd)
        path.rmdir()
    return not os.path.lexists(path)


def sweep_agent_sockets(bases: list[Path] | None = None) -> int:
    """Remove the bridge socket directories of agents whose optarena has ended (a `kill -9`
    leaves `/run/optarena-agent-*/PORT.sock`); returns how many. A directory whose name does
    not say its owner is left alone: it cannot be attributed."""
    removed = 0
    for base in bases if bases is not None else socket_bases():
        for path in base.glob(f"{CGROUP_PREFIX}*"):
            if path.is_dir() and not path.is_symlink() and _owner_gone(path.name):
                removed += remove_socket_dir(path)
    return removed


def sweep_agent_leftovers() -> int:
    """Kill what agents of dead optarena processes left running: the members of their
    cgroups (whose name says the owner), and, as root, every process of a sandbox uid whose
    lease nobody holds; remove their bridge sockets. Returns how many processes were killed.
    Cheap: one /proc scan."""
    killed = 0
    sweep_agent_sockets()
    base, _why = find_pids_root()
    if base is not None:
        for path in base.glob(f"{CGROUP_PREFIX}*"):
            if not _owner_gone(path.name):
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
