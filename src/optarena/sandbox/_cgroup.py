"""Cgroups per worker: a process limit, the kernel's CPU count, a freezer and a memory limit.

Membership of a cgroup is inherited by every fork and cannot be left without privileges, which
makes a cgroup the one handle on "everything this candidate started":

- **pids**: a hard process limit, and `cgroup.procs` lists every process however detached, so
  ending them all is a loop over one file;
- **cpu**: the kernel's CPU time of every thread that ever ran in it, exited threads and
  children included (v1 `cpuacct.usage`, v2 `cpu.stat`), which per-thread clocks miss;
- **freezer**: stops the whole tree at once (v1 `freezer.state`, v2 `cgroup.freeze`), so the
  arm that is not being timed cannot run, and no helper thread works between calls;
- **memory**: a limit on resident memory, tmpfs pages included, which `RLIMIT_AS` does not see;
- **cpuset**: the CPUs a timed worker may run on. `sched_setaffinity` pins too, but the worker
  can undo it (a candidate moved itself to the other CPU while its kernel work ran on the
  shared one); a cpuset cannot be left or widened from inside.

Each feature comes from a cgroup v1 hierarchy that has its controller mounted, or from the v2
tree (cpu.stat and cgroup.freeze are core v2 files; pids and memory need the controller enabled
in our subtree). Where both exist, v1 is preferred for pids, cpu and memory (on a hybrid
machine the v1 controllers are the real ones, and cpuacct counts in ns, v2 in µs) and v2 for
the freezer: every v1 freeze or thaw that starts or ends the machine's only frozen cgroup
flips a kernel static key (code patching on every CPU), which made a v1 freeze of an idle
worker cost 150-250 µs against 15-30 µs for v2 on the development VM. `plan_layout` is
pure; `WorkerCgroups` creates and drives the directories.
"""

from __future__ import annotations

import contextlib
import os
import secrets
import signal
import time
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path

FEATURES = ("pids", "cpu", "freezer", "memory", "cpuset")
V1_CONTROLLER = {
    "pids": "pids",
    "cpu": "cpuacct",
    "freezer": "freezer",
    "memory": "memory",
    "cpuset": "cpuset",
}
V2_CORE = frozenset({"cpu", "freezer"})  # cpu.stat and cgroup.freeze exist without controllers
PREFIX = "optarena-"


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


def _below(mount: str, root: str, own: str) -> Path:
    """Our cgroup `own` as a directory of a hierarchy mounted at `mount` showing `root`."""
    rel = os.path.relpath(own, root) if own.startswith(root) else "."
    return Path(mount) / rel


@dataclass(frozen=True)
class Hierarchy:
    """A place where worker cgroups can be made: our own cgroup in a v1 hierarchy or in v2."""

    version: int
    base: Path
    controllers: frozenset[str]  # v1: mounted controllers; v2: enabled in base's subtree

    def offers(self, feature: str) -> bool:
        if self.version == 1:
            return V1_CONTROLLER[feature] in self.controllers
        return feature in V2_CORE or feature in self.controllers


def find_hierarchies() -> tuple[list[Hierarchy], list[str]]:
    """Every writable hierarchy holding our process, and why the others cannot be used."""
    own = _own_cgroups()
    found: list[Hierarchy] = []
    notes: list[str] = []
    seen: set[frozenset[str]] = set()
    wanted_v1 = set(V1_CONTROLLER.values())
    for root, mnt, fstype, opts in _mountinfo():
        if fstype == "cgroup":
            ctrls = frozenset(opts.split(",")) & wanted_v1
            mine = [c for c in ctrls if c in own]
            if not ctrls or not mine or ctrls in seen:
                continue
            seen.add(ctrls)
            base = _below(mnt, root, own[mine[0]])
            if os.access(base, os.W_OK):
                found.append(Hierarchy(1, base, ctrls))
            else:
                notes.append(f"{','.join(sorted(ctrls))}: {base} not writable")
        elif fstype == "cgroup2" and "" in own and frozenset() not in seen:
            seen.add(frozenset())
            base = _below(mnt, root, own[""])
            try:
                enabled = frozenset((base / "cgroup.subtree_control").read_text().split())
            except OSError as e:
                notes.append(f"cgroup2: {e.strerror}")
                continue
            if os.access(base, os.W_OK):
                found.append(Hierarchy(2, base, enabled))
            else:
                notes.append(f"cgroup2: {base} not writable")
    return found, notes


@dataclass(frozen=True)
class Layout:
    """Which hierarchy serves each feature; `why_not` names the reason for each missing one."""

    chosen: Mapping[str, Hierarchy] = field(default_factory=dict)
    why_not: Mapping[str, str] = field(default_factory=dict)

    def hierarchies(self) -> list[Hierarchy]:
        out: list[Hierarchy] = []
        for h in self.chosen.values():
            if h not in out:
                out.append(h)
        return out

    def only(self, features: Iterable[str]) -> Layout:
        keep = set(features)
        return Layout(
            {f: h for f, h in self.chosen.items() if f in keep},
            {f: w for f, w in self.why_not.items() if f in keep},
        )


PREFERRED_VERSION = {"pids": 1, "cpu": 1, "memory": 1, "freezer": 2, "cpuset": 1}


def candidates(hierarchies: Iterable[Hierarchy], feature: str) -> list[Hierarchy]:
    """The hierarchies offering `feature`, best first (pure)."""
    first = PREFERRED_VERSION[feature]
    offering = [h for h in hierarchies if h.offers(feature)]
    return sorted(offering, key=lambda h: h.version != first)


def plan_layout(
    hierarchies: Iterable[Hierarchy], features: Iterable[str] = FEATURES, notes: str = ""
) -> Layout:
    """Pick the best hierarchy per feature (pure: tested on literal hierarchies)."""
    hierarchies = list(hierarchies)
    chosen: dict[str, Hierarchy] = {}
    why_not: dict[str, str] = {}
    for feature in features:
        best = candidates(hierarchies, feature)
        if best:
            chosen[feature] = best[0]
        else:
            why_not[feature] = f"no writable cgroup offers {feature}" + (
                f" ({notes})" if notes else ""
            )
    return Layout(chosen, why_not)


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def _write(path: Path, text: str) -> None:
    fd = os.open(path, os.O_WRONLY)
    try:
        os.write(fd, text.encode())
    finally:
        os.close(fd)


def _procs(directory: Path) -> set[int]:
    found = _read_procs(directory)
    return found if found is not None else set()


def _read_procs(directory: Path) -> set[int] | None:
    """The cgroup's processes; empty once it is gone; None when it could not be read (an
    error is not an empty cgroup: a kill loop that took it for one would stop early)."""
    try:
        return {int(p) for p in (directory / "cgroup.procs").read_text().split()}
    except FileNotFoundError:
        return set()
    except (OSError, ValueError):
        return None


def _thaw_dir(directory: Path) -> None:
    """A frozen v1 task does not act on SIGKILL until thawed: thaw before any kill."""
    for name, text in (("freezer.state", "THAWED"), ("cgroup.freeze", "0")):
        if (directory / name).exists():
            with contextlib.suppress(OSError):
                _write(directory / name, text)


def _kill_members(dirs: list[Path], rounds: int = 200) -> int:
    """Thaw, then SIGKILL every member until all are empty (pids.max bounds any fork race;
    v2's cgroup.kill has none)."""
    for d in dirs:
        _thaw_dir(d)
    for d in dirs:
        if (d / "cgroup.kill").exists():
            with contextlib.suppress(OSError):
                _write(d / "cgroup.kill", "1")
    killed: set[int] = set()
    for _ in range(rounds):
        read = [_read_procs(d) for d in dirs]
        members = set().union(*(r for r in read if r is not None))
        if not members and None not in read:
            break
        for pid in members:
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.kill(pid, signal.SIGKILL)
        killed |= members
        time.sleep(0.002)
    return len(killed)


def _empty_and_remove(dirs: Iterable[Path]) -> int:
    """Kill every member, then rmdir each directory (EBUSY until the last member is reaped)."""
    dirs = list(dirs)
    killed = _kill_members(dirs)
    for d in dirs:
        for _ in range(250):
            try:
                d.rmdir()
                break
            except FileNotFoundError:
                break
            except OSError:
                time.sleep(0.004)
    return killed


def sweep_stale(bases: Iterable[Path]) -> None:
    """Remove cgroups left by judges that died without cleaning up (killed, power cut): their
    processes are thawed and killed and the directories deleted. Named optarena-<pid>-<hex>;
    a live judge's are left alone. Freezer directories go first, so nothing is left frozen."""
    stale: dict[str, list[Path]] = {}
    for base in bases:
        for path in base.glob(f"{PREFIX}*-*"):
            owner = path.name.split("-")[1]
            if owner.isdigit() and not _alive(int(owner)):
                stale.setdefault(path.name, []).append(path)
    for dirs in stale.values():
        _empty_and_remove(dirs)


class FreezeTimeout(OSError):
    """The tree did not reach the frozen state in time (a task stuck in the kernel)."""


class WorkerCgroups:
    """One worker's cgroups, one directory per hierarchy, all with the same fresh name.

    Files read or written around every timed call stay open (a read is then one `pread`).
    """

    def __init__(
        self,
        layout: Layout,
        max_pids: int | None = None,
        memory_bytes: int | None = None,
        cpus: tuple[int, ...] | None = None,
    ) -> None:
        if cpus is None:  # an unconfigured cpuset would refuse every task (ENOSPC)
            layout = layout.only(f for f in FEATURES if f != "cpuset")
        self.layout = layout
        self.name = f"{PREFIX}{os.getpid()}-{secrets.token_hex(4)}"
        self.dirs: dict[Hierarchy, Path] = {}
        self._fds: list[int] = []
        self._cpu_fd = self._freeze_fd = self._state_fd = -1
        try:
            for h in layout.hierarchies():
                d = h.base / self.name
                d.mkdir()
                self.dirs[h] = d
            self._configure(max_pids, memory_bytes)
            self._configure_cpuset(cpus)
        except OSError:
            self.remove()
            raise

    def _open(self, feature: str, name: str, flags: int) -> int:
        fd = os.open(self.dirs[self.layout.chosen[feature]] / name, flags | os.O_CLOEXEC)
        self._fds.append(fd)
        return fd

    def _configure(self, max_pids: int | None, memory_bytes: int | None) -> None:
        chosen = self.layout.chosen
        if "pids" in chosen and max_pids is not None:
            _write(self.dirs[chosen["pids"]] / "pids.max", str(max_pids))
        if "memory" in chosen and memory_bytes is not None:
            d = self.dirs[chosen["memory"]]
            if chosen["memory"].version == 1:
                _write(d / "memory.limit_in_bytes", str(memory_bytes))
                if (d / "memory.memsw.limit_in_bytes").exists():  # no escape into swap
                    _write(d / "memory.memsw.limit_in_bytes", str(memory_bytes))
            else:
                _write(d / "memory.max", str(memory_bytes))
                if (d / "memory.swap.max").exists():
                    _write(d / "memory.swap.max", "0")
        if "cpu" in chosen:
            v1 = chosen["cpu"].version == 1
            self._cpu_fd = self._open("cpu", "cpuacct.usage" if v1 else "cpu.stat", os.O_RDONLY)
        if "freezer" in chosen:
            if chosen["freezer"].version == 1:
                self._freeze_fd = self._open("freezer", "freezer.state", os.O_RDWR)
                self._state_fd = self._freeze_fd
            else:
                self._freeze_fd = self._open("freezer", "cgroup.freeze", os.O_WRONLY)
                self._state_fd = self._open("freezer", "cgroup.events", os.O_RDONLY)

    def _configure_cpuset(self, cpus: tuple[int, ...] | None) -> None:
        h = self.layout.chosen.get("cpuset")
        if h is None or cpus is None:
            return
        d = self.dirs[h]
        if h.version == 1:  # a v1 cpuset takes no task before it has memory nodes
            mems = (h.base / "cpuset.mems").read_text().strip()
            _write(d / "cpuset.mems", mems)
        _write(d / "cpuset.cpus", ",".join(str(c) for c in cpus))

    # -- queries ------------------------------------------------------------------------------

    @property
    def procs_files(self) -> tuple[str, ...]:
        """Each directory's `cgroup.procs`: the child writes its pid to all before exec."""
        return tuple(str(d / "cgroup.procs") for d in self.dirs.values())

    @property
    def measured_procs_files(self) -> tuple[str, ...]:
        """`cgroup.procs` of the hierarchies that count CPU time, freeze or bound memory: the
        ones only the worker itself should join, not the sandbox's helper processes (see
        ChildPlan). In the memory cgroup the helpers, forks of the judge tens of MiB large,
        were what the kernel killed first at the limit (the worker then died with them, an
        anonymous SIGKILL), and their pages counted against the candidate's limit."""
        measured = {self.layout.chosen.get(f) for f in ("cpu", "freezer", "memory")}
        return tuple(str(d / "cgroup.procs") for h, d in self.dirs.items() if h in measured)

    def procs(self) -> set[int]:
        """Every member, from the pids hierarchy if there is one: it holds the sandbox's
        helpers too, while the CPU and freezer hierarchies hold only the worker's tree (all
        were joined before exec and cannot be left)."""
        h = self.layout.chosen.get("pids") or next(iter(self.dirs), None)
        return _procs(self.dirs[h]) if h is not None else set()

    def frozen_procs(self) -> set[int]:
        """The members of the freezer hierarchy: the ones a freeze holds (its directory may
        be gone or unreadable: then none is known to be held)."""
        h = self.layout.chosen.get("freezer")
        return _procs(self.dirs[h]) if h is not None and h in self.dirs else set()

    def cpu_source(self) -> str | None:
        h = self.layout.chosen.get("cpu")
        return None if h is None else ("cpuacct" if h.version == 1 else "cgroup2")

    def freeze_source(self) -> str | None:
        h = self.layout.chosen.get("freezer")
        return None if h is None else ("freezer" if h.version == 1 else "cgroup2")

    def cpu_ns(self) -> int | None:
        """CPU time of everything that ever ran in the cgroup, in ns (v2 counts in µs)."""
        if self._cpu_fd < 0:
            return None
        raw = os.pread(self._cpu_fd, 4096, 0)
        if self.layout.chosen["cpu"].version == 1:
            return int(raw)
        for line in raw.split(b"\n"):
            if line.startswith(b"usage_usec "):
                return int(line.split()[1]) * 1000
        raise OSError(f"no usage_usec in {self.dirs[self.layout.chosen['cpu']]}/cpu.stat")

    def cpu_counter(self) -> tuple[int, bool] | None:
        """The open file `cpu_ns` reads and whether it is v1's `cpuacct.usage` (ns; else v2's
        `cpu.stat`, us), for a reader outside Python (the judge's compiled turn); None: none."""
        if self._cpu_fd < 0:
            return None
        return self._cpu_fd, self.layout.chosen["cpu"].version == 1

    # -- freezing -----------------------------------------------------------------------------

    def _is_frozen(self) -> bool:
        raw = os.pread(self._state_fd, 256, 0)
        if self.layout.chosen["freezer"].version == 1:
            return raw.strip() == b"FROZEN"
        return b"frozen 1" in raw

    def freeze(self, timeout_s: float = 2.0) -> None:
        """Freeze and return once the kernel reports every task frozen.

        A task freezes when it next runs (a sleeping one is woken to do so), which needs a
        CPU: so the judge yields between polls rather than spinning (on two cores a spinning
        judge would delay the very task it waits for), and sleeps only after 2 ms. A task that
        does not freeze in time (stuck in an uninterruptible sleep) thaws the tree again and
        raises FreezeTimeout.
        """
        if self._freeze_fd < 0:
            raise OSError("no freezer cgroup")
        v1 = self.layout.chosen["freezer"].version == 1
        os.write(self._freeze_fd, b"FROZEN" if v1 else b"1")
        start = time.perf_counter()
        deadline = start + timeout_s
        while not self._is_frozen():
            now = time.perf_counter()
            if now - start < 0.002:
                # A sleep costs at least the 50 µs timer slack; yielding lets a task on this
                # CPU run to its freeze point, and a freeze usually completes in tens of µs.
                os.sched_yield()
            elif now < deadline:
                time.sleep(0.0002)
            else:
                self.thaw()
                raise FreezeTimeout(f"the worker did not freeze within {timeout_s:g} s")

    def thaw(self) -> None:
        if self._freeze_fd < 0:
            return
        v1 = self.layout.chosen["freezer"].version == 1
        os.write(self._freeze_fd, b"THAWED" if v1 else b"0")

    # -- ending -------------------------------------------------------------------------------

    def kill_all(self) -> int:
        """Thaw, then SIGKILL every member until the cgroups are empty."""
        return _kill_members(list(self.dirs.values()))

    def remove(self) -> None:
        """End every member and delete the directories (idempotent)."""
        for fd in self._fds:
            with contextlib.suppress(OSError):
                os.close(fd)
        self._fds = []
        self._cpu_fd = self._freeze_fd = self._state_fd = -1
        if self.dirs:
            _empty_and_remove(self.dirs.values())
        self.dirs = {}


def find_pids_root() -> tuple[Path | None, str]:
    """The directory under which we may create pids cgroups, or None and the reason (for
    callers that want only a process limit, such as the agent sandbox)."""
    found, notes = find_hierarchies()
    layout = plan_layout(found, ["pids"], "; ".join(notes))
    h = layout.chosen.get("pids")
    if h is None:
        return None, layout.why_not["pids"]
    return h.base, f"cgroup v{h.version} pids"


class PidsCgroup:
    """One pids cgroup in a given directory; `remove()` ends its processes and deletes it."""

    def __init__(self, base: Path, max_pids: int) -> None:
        self.path = base / f"{PREFIX}{os.getpid()}-{secrets.token_hex(4)}"
        self.path.mkdir()
        try:
            _write(self.path / "pids.max", str(max_pids))
        except OSError:
            self.path.rmdir()
            raise

    @property
    def procs_file(self) -> str:
        return str(self.path / "cgroup.procs")

    def procs(self) -> set[int]:
        return _procs(self.path)

    def kill_all(self) -> int:
        return _kill_members([self.path])

    def remove(self) -> bool:
        """End every member and delete the directory; True once it is gone (a member no
        kill could end keeps it)."""
        _empty_and_remove([self.path])
        return not self.path.exists()


def attach_self(procs_files: str | Iterable[str]) -> None:
    """In the child before exec: join each cgroup (written by pid; works for v1 and v2)."""
    pid = str(os.getpid()).encode()
    for procs_file in [procs_files] if isinstance(procs_files, str) else procs_files:
        fd = os.open(procs_file, os.O_WRONLY)
        try:
            os.write(fd, pid)
        finally:
            os.close(fd)
