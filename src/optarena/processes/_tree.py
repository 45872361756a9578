"""Reading processes from /proc, and finding and ending whole process trees, including
children that left the group.

One reader of `/proc/PID/stat` (`parse_stat`, `stat_of`): a process's parent, state and start
time. A pid alone does not name a process, since the kernel reuses it once the process is
reaped; the pid with its start time (`start_ticks`) does, so a snapshot of a tree
(`descendants`: pid -> start time) can be signalled later without reaching a stranger that
inherited a pid (`signal_same`).

A process group is not a tree: a grandchild that calls `setsid` leaves its group, and a double
fork reparents it away from its creator. These helpers read parent links (and, for a dedicated
user, real uids) from /proc so that cleanup can reach such processes, and end a set of
processes without a race: stop everything seen, look again until nothing new appears (a stopped
process cannot fork), then kill.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import signal
import subprocess
import time
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass

PROC = "/proc"


@dataclass(frozen=True)
class ProcInfo:
    """What optarena reads of one process (or thread) from its `stat` line."""

    pid: int
    ppid: int
    state: str  # R, S, D, T (stopped), t (traced), Z (zombie), X (dead), ...
    start: int  # start time in clock ticks since boot: with the pid, it names one process


def parse_stat(pid: int, raw: bytes) -> ProcInfo:
    """The fields of a `/proc/PID/stat` line (stat(5)). The command name (field 2, in
    parentheses) may hold spaces, parentheses and any byte, so the fields after it are
    counted from the last `)`."""
    text = raw.decode("ascii", "replace")
    fields = text[text.rindex(")") + 2 :].split()  # fields[0] is field 3 of stat(5)
    return ProcInfo(pid=pid, ppid=int(fields[1]), state=fields[0], start=int(fields[19]))


def stat_of(pid: int, tid: int | str | None = None) -> ProcInfo | None:
    """`pid`'s stat (or that of its thread `tid`), or None once it is gone (or unreadable)."""
    path = f"{PROC}/{pid}/stat" if tid is None else f"{PROC}/{pid}/task/{tid}/stat"
    try:
        with open(path, "rb") as f:
            raw = f.read()
    except OSError:
        return None
    return parse_stat(pid if tid is None else int(tid), raw)


def start_ticks(pid: int) -> int | None:
    """A process's start time in clock ticks since boot (field 22 of stat(5)), or None when it
    cannot be read; tells a reused pid apart."""
    info = stat_of(pid)
    return info.start if info is not None else None


def all_pids() -> list[int]:
    try:
        return [int(n) for n in os.listdir(PROC) if n.isdigit()]
    except OSError:
        return []


def process_table() -> dict[int, ProcInfo]:
    """pid -> its stat (parent, state, start time) for every process visible now."""
    out: dict[int, ProcInfo] = {}
    for pid in all_pids():
        info = stat_of(pid)
        if info is not None:
            out[pid] = info
    return out


def descendants(
    roots: Iterable[int], table: Mapping[int, ProcInfo] | None = None
) -> dict[int, int]:
    """Every live process whose parent chain reaches one of `roots` (roots excluded), each
    with its start time (pid -> start ticks), including those that left the roots' process
    group with `setsid`; taken while the roots still live. The start times let a later
    `signal_same` skip a pid the kernel has given to another process meanwhile."""
    table = process_table() if table is None else table
    children: dict[int, list[int]] = {}
    for info in table.values():
        children.setdefault(info.ppid, []).append(info.pid)
    found: dict[int, int] = {}
    stack = list(roots)
    while stack:
        for child in children.get(stack.pop(), ()):
            if child not in found:
                found[child] = table[child].start
                stack.append(child)
    return found


def children_of(pid: int) -> set[int]:
    """The live children of `pid` (from the kernel's list where it has one, else /proc)."""
    try:
        with open(f"{PROC}/{pid}/task/{pid}/children") as f:
            return {int(c) for c in f.read().split()}
    except (OSError, ValueError):
        return {p for p, info in process_table().items() if info.ppid == pid}


def real_uid(pid: int) -> int | None:
    """The real uid of `pid` (from /proc/PID/status, which a process cannot disguise)."""
    try:
        with open(f"{PROC}/{pid}/status", "rb") as f:
            for line in f:
                if line.startswith(b"Uid:"):
                    return int(line.split()[1])
    except (OSError, ValueError, IndexError):
        return None
    return None


def pids_of_uid(uid: int) -> set[int]:
    return {pid for pid in all_pids() if real_uid(pid) == uid}


def namespace_of(pid: int, kind: str) -> str | None:
    """The namespace id of `pid` (e.g. 'net:[4026532]'), or None if it cannot be read."""
    try:
        return os.readlink(f"{PROC}/{pid}/ns/{kind}")
    except OSError:
        return None


_NS_GET_PARENT = 0xB702  # ioctl_ns(2): _IO(0xb7, 0x2)
_NS_DEPTH = 33  # user and PID namespaces nest at most 32 deep


class HeldNamespace:
    """A namespace of another process, kept from ending by an open descriptor of it.

    A namespace's id (`pid:[inode]`) names it only while it exists: once it ends, the kernel
    gives its inode number to the next namespace made, and every process of that one (another
    sandbox's, on a busy machine within milliseconds) would pass for a member of ours. Held,
    it cannot end, so its id names it alone until `close()`."""

    def __init__(self, pid: int, kind: str) -> None:
        """`pid`'s namespace `kind`. Raises OSError when `pid` has no such namespace to read
        (gone, or a zombie)."""
        self._take(os.open(f"{PROC}/{pid}/ns/{kind}", os.O_RDONLY | os.O_CLOEXEC), kind)

    @classmethod
    def of_fd(cls, fd: int, kind: str) -> HeldNamespace:
        """The namespace descriptor `fd` is (of kind `kind`), taken over: `close()` closes
        it. For a namespace sent by the process that made it, before anything could change
        what its /proc links say."""
        held = cls.__new__(cls)
        held._take(fd, kind)
        return held

    def _take(self, fd: int, kind: str) -> None:
        self.kind = kind.removesuffix("_for_children")  # what processes' own links say
        self._fd = fd
        self.id = f"{self.kind}:[{os.fstat(fd).st_ino}]"

    def is_mine(self) -> bool:
        """Whether it is the namespace this process is in (then nothing sets its members
        apart)."""
        return namespace_of(os.getpid(), self.kind) == self.id

    def pids(self) -> set[int]:
        """Its processes now, those of namespaces made inside it included (none once closed:
        the id may name another namespace then)."""
        if self._fd < 0:
            return set()
        # what each namespace seen in this look is, walked once however many processes it
        # has (ours is no descendant of the one held)
        known = {self.id: True, str(namespace_of(os.getpid(), self.kind)): False}
        return {pid for pid in all_pids() if self._holds(pid, known)}

    def _holds(self, pid: int, known: dict[str, bool]) -> bool:
        """Whether `pid` is in this namespace or one nested in it, however deep: a user or
        PID namespace needs no privilege to make, and a process in one made inside ours
        has an id of its own (its parent chain, `NS_GET_PARENT`, still leads here).
        Records every namespace on the chain it walks in `known`."""
        link = namespace_of(pid, self.kind)
        if link is None:
            return False
        if link in known:
            return known[link]
        try:
            fd = os.open(f"{PROC}/{pid}/ns/{self.kind}", os.O_RDONLY | os.O_CLOEXEC)
        except OSError:
            return False
        chain: list[str] = []
        held = False
        try:
            for _ in range(_NS_DEPTH):
                here = f"{self.kind}:[{os.fstat(fd).st_ino}]"
                if here in known:  # the held one is known (True) from the start
                    held = known[here]
                    break
                chain.append(here)
                try:  # EPERM above the caller's own namespace: not one of ours
                    parent = fcntl.ioctl(fd, _NS_GET_PARENT)
                except OSError:
                    break
                os.close(fd)
                fd = parent
        finally:
            os.close(fd)
        known.update(dict.fromkeys(chain, held))
        return held

    def close(self) -> None:
        if self._fd >= 0:
            os.close(self._fd)
            self._fd = -1


def pids_in_namespace(kind: str, ns: str) -> set[int]:
    """Every process in namespace `ns`: unlike parent links, membership survives reparenting
    and cannot be left without privileges the sandboxed processes do not have."""
    return {pid for pid in all_pids() if namespace_of(pid, kind) == ns}


def is_zombie(pid: int) -> bool:
    """Whether `pid` is a zombie, dead, or gone: every thread of it, not only the leader,
    whose `Z` says only that the first thread ended (a process can end its main thread and
    run on in another)."""
    info = stat_of(pid)
    if info is None:
        return True
    return info.state in ("Z", "X") and all(s in ("Z", "X") for s in _thread_states(pid))


def signal_all(pids: Iterable[int], sig: int) -> None:
    for pid in pids:
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.kill(pid, sig)


def signal_same(snapshot: Mapping[int, int], sig: int) -> None:
    """Signal the processes of a snapshot (pid -> start ticks, as `descendants` gives) that
    are still the same processes: a pid now held by another process is left alone."""
    for pid, start in snapshot.items():
        if start_ticks(pid) == start:
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.kill(pid, sig)


def _thread_states(pid: int) -> list[str]:
    """The state of each thread of `pid` still there (none once it is gone)."""
    try:
        tids = os.listdir(f"{PROC}/{pid}/task")
    except OSError:
        return []
    return [info.state for tid in tids if (info := stat_of(pid, tid)) is not None]


def _threads_stopped(pid: int) -> bool:
    """Whether every thread of `pid` is stopped (or gone): a group stop is complete only then."""
    return all(s in ("T", "t", "Z", "X") for s in _thread_states(pid))


def stop_all(collect: Callable[[], set[int]], timeout_s: float = 2.0) -> set[int]:
    """SIGSTOP everything `collect` finds, again until nothing new appears, and return once
    every thread of every one is stopped (SIGSTOP cannot be caught, blocked or ignored).

    The fallback freezer where no cgroup freezer exists. Raises OSError (after continuing
    everything it stopped) if the tree is not stopped within `timeout_s`."""
    stopped: set[int] = set()
    deadline = time.monotonic() + timeout_s
    while True:
        new = collect() - stopped
        if not new:
            return stopped
        signal_all(new, signal.SIGSTOP)
        stopped |= new
        delay = 1e-5
        while not all(_threads_stopped(p) for p in new):
            if time.monotonic() > deadline:
                continue_all(stopped)
                raise OSError(f"the worker did not stop within {timeout_s:g} s")
            time.sleep(delay)
            delay = min(2 * delay, 1e-3)


def continue_all(pids: Iterable[int]) -> None:
    signal_all(pids, signal.SIGCONT)


def _wait_stopped(pids: Iterable[int], deadline: float) -> None:
    """Wait until every thread of each of `pids` is stopped or dead, or `deadline`: SIGSTOP
    takes effect when its target next runs, and until then it may still fork."""
    pending = set(pids)
    delay = 1e-5
    while pending and time.monotonic() < deadline:
        pending = {p for p in pending if not _threads_stopped(p)}
        if pending:
            time.sleep(delay)
            delay = min(2 * delay, 1e-3)


def stop_then_kill(
    collect: Callable[[], set[int]],
    timeout_s: float = 2.0,
    held: Callable[[], set[int]] | None = None,
) -> int:
    """SIGSTOP what `collect` finds until it finds nothing new or `timeout_s` has passed, then
    SIGKILL all of it. Returns how many processes were killed. `collect` must not include the
    caller. `held` lists processes that cannot run (a frozen cgroup's): they cannot fork, so
    their stops are not waited for (a frozen task never shows as stopped: each round would
    wait out its half second).

    Each round waits (within the deadline) for its stops to take effect: a process signalled
    but not yet stopped can still fork, and a child born after the last look would be missed.
    The deadline bounds the whole, not each round: a traced process need never stop (its
    tracer may swallow the SIGSTOP), and rounds of those must not hold the caller. A process
    is known by its pid and start time, and signalled only while its pid still names it: one
    that died meanwhile (killed by its own kind) may have left its pid to a stranger.
    """
    deadline = time.monotonic() + timeout_s
    seen: dict[int, int] = {}
    while time.monotonic() < deadline:
        found = {}
        for pid in collect():
            start = start_ticks(pid)
            if start is not None and seen.get(pid) != start:
                found[pid] = start
        if not found:
            break
        # A start time read after the look that listed its pid may be a stranger's (the
        # member died, its pid was given on): looking again after reading it keeps only the
        # pids that are members with those start times.
        again = collect()
        new = {pid: start for pid, start in found.items() if pid in again}
        signal_same(new, signal.SIGSTOP)
        seen.update(new)
        running = set(new) - (held() if held is not None else set())
        _wait_stopped(running, min(deadline, time.monotonic() + 0.5))
    signal_same(seen, signal.SIGKILL)
    wait_dead(seen)  # a stopped process receiving SIGKILL dies at once
    return len(seen)


def describe(pid: int) -> str:
    """One process in a line, for a note that it outlived its kill: command, state, where it
    sleeps in the kernel (a `D` state in a driver explains a survivor; nothing else does)."""
    base = f"{PROC}/{pid}"
    try:
        with open(f"{base}/cmdline", "rb") as f:
            cmd = f.read().replace(b"\0", b" ").decode(errors="replace").strip()
        with open(f"{base}/wchan") as f:
            wchan = f.read().strip() or "-"
    except OSError:
        return f"{pid}: gone"
    info = stat_of(pid)
    state = info.state if info is not None else "?"
    # the command line is the process's to write: quoted, so that it cannot pass for more
    # entries of a list, and without what could drive a terminal
    shown = repr("".join(c if c.isprintable() else "?" for c in cmd[:160]))
    return f"{pid} (state {state}, wchan {wchan}): {shown}"


def wait_dead(pids: Iterable[int], timeout_s: float = 2.0) -> None:
    """Wait (briefly) until /proc shows each of `pids` dead or a zombie."""
    pids = list(pids)
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline and any(not is_zombie(p) for p in pids):
        time.sleep(0.002)


def kill_tree(proc: subprocess.Popen[bytes], grace_s: float = 0.0) -> None:
    """End the process, its group and its descendants, and reap it.

    SIGTERM to the group first when a grace period is given. Descendants are found from parent
    links while everything is stopped, so a child that called `setsid` is reached as long as it
    has not been orphaned; an already-orphaned daemon is not (that needs a Sandbox).
    """
    pgid = proc.pid  # start_new_session: the child leads its own group
    if proc.returncode is not None and stat_of(pgid) is not None:
        # Reaped earlier, and its pid now names another live process: the kernel reuses a pid
        # once its process is reaped and its group empty, so this group id may be a stranger's
        # (another sandbox's whole session). While our group has members its id is not reused
        # and no process has that pid: then the group is still ours to end, below.
        return
    if grace_s > 0 and proc.poll() is None:
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(pgid, signal.SIGTERM)
        deadline = time.monotonic() + grace_s
        while proc.poll() is None and time.monotonic() < deadline:
            time.sleep(0.02)
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(pgid, signal.SIGSTOP)  # a stopped group cannot fork while we look
    if proc.poll() is None:
        stop_then_kill(lambda: set(descendants([proc.pid])))
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(pgid, signal.SIGKILL)
    with contextlib.suppress(ProcessLookupError):
        proc.kill()
    with contextlib.suppress(subprocess.TimeoutExpired):
        proc.wait(timeout=5)
