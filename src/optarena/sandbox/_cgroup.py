"""A pids cgroup per worker: a hard process limit and a complete list of what the worker started.

Membership of a cgroup is inherited by every fork and cannot be left without privileges, so
`cgroup.procs` lists every process the candidate started, detached daemons included; ending
them all is then a loop over one file. Works with cgroup v1 (a `pids` hierarchy) and with v2
where the `pids` controller is enabled for our subtree; elsewhere `find_pids_root` says why not.
"""

from __future__ import annotations

import contextlib
import os
import secrets
import signal
import time
from pathlib import Path


def _mountinfo() -> list[tuple[str, str, str, str]]:
    """(root, mount point, fstype, super options) for every mount."""
    out: list[tuple[str, str, str, str]] = []
    try:
        lines = Path("/proc/self/mountinfo").read_text().splitlines()
    except OSError:
        return out
    for line in lines:
        left, _, right = line.partition(" - ")
        fields, rfields = left.split(), right.split()
        if len(fields) >= 5 and len(rfields) >= 3:
            out.append((fields[3], fields[4], rfields[0], rfields[2]))
    return out


def _own_cgroups() -> dict[str, str]:
    """controller (or '' for v2) -> our cgroup path."""
    out: dict[str, str] = {}
    try:
        lines = Path("/proc/self/cgroup").read_text().splitlines()
    except OSError:
        return out
    for line in lines:
        parts = line.split(":", 2)
        if len(parts) == 3:
            for ctrl in parts[1].split(",") if parts[1] else [""]:
                out[ctrl] = parts[2]
    return out


def find_pids_root() -> tuple[Path | None, str]:
    """The directory under which we may create pids cgroups, or None and the reason."""
    own = _own_cgroups()
    for root, mnt, fstype, opts in _mountinfo():
        if fstype == "cgroup" and "pids" in opts.split(",") and "pids" in own:
            rel = os.path.relpath(own["pids"], root) if own["pids"].startswith(root) else "."
            base = Path(mnt) / rel
            return (base, "cgroup v1 pids") if os.access(base, os.W_OK) else (None, "not writable")
    for root, mnt, fstype, _opts in _mountinfo():
        if fstype == "cgroup2" and "" in own:
            rel = os.path.relpath(own[""], root) if own[""].startswith(root) else "."
            base = Path(mnt) / rel
            try:
                controllers = (base / "cgroup.subtree_control").read_text().split()
            except OSError:
                continue
            if "pids" in controllers and os.access(base, os.W_OK):
                return base, "cgroup v2 pids"
    return None, "no writable pids controller"


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def sweep_stale(base: Path) -> None:
    """Remove cgroups left by judges that died without cleaning up (killed, power cut):
    their processes are killed and the directory deleted. Named optarena-<judge pid>-<hex>."""
    for path in base.glob("optarena-*-*"):
        owner = path.name.split("-")[1]
        if owner.isdigit() and not _alive(int(owner)):
            stale = PidsCgroup.__new__(PidsCgroup)
            stale.path = path
            stale.remove()


class PidsCgroup:
    """One freshly created pids cgroup; `remove()` ends its processes and deletes it."""

    def __init__(self, base: Path, max_pids: int) -> None:
        self.path = base / f"optarena-{os.getpid()}-{secrets.token_hex(4)}"
        self.path.mkdir()
        try:
            (self.path / "pids.max").write_text(str(max_pids))
        except OSError:
            self.path.rmdir()
            raise

    @property
    def procs_file(self) -> str:
        return str(self.path / "cgroup.procs")

    def procs(self) -> set[int]:
        try:
            text = Path(self.procs_file).read_text()
        except OSError:
            return set()
        return {int(p) for p in text.split()}

    def kill_all(self, rounds: int = 200) -> int:
        """SIGKILL every member until the cgroup is empty (pids.max bounds any fork race)."""
        killed: set[int] = set()
        for _ in range(rounds):
            members = self.procs()
            if not members:
                break
            for pid in members:
                with contextlib.suppress(ProcessLookupError, PermissionError):
                    os.kill(pid, signal.SIGKILL)
            killed |= members
            time.sleep(0.002)
        return len(killed)

    def remove(self) -> None:
        self.kill_all()
        for _ in range(250):  # rmdir fails with EBUSY until the last member is reaped
            try:
                self.path.rmdir()
                return
            except FileNotFoundError:
                return
            except OSError:
                time.sleep(0.004)


def attach_self(procs_file: str) -> None:
    """In the child before exec: join the cgroup (written by pid; works for v1 and v2)."""
    fd = os.open(procs_file, os.O_WRONLY)
    try:
        os.write(fd, str(os.getpid()).encode())
    finally:
        os.close(fd)
