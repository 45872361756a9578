"""Finding and ending whole process trees from /proc, including children that left the group.

A process group is not a tree: a grandchild that calls `setsid` leaves its group, and a double
fork reparents it away from its creator. These helpers read parent links (and, for a dedicated
user, real uids) from /proc so that cleanup can reach such processes, and end a set of
processes without a race: stop everything seen, look again until nothing new appears (a stopped
process cannot fork), then kill.
"""

from __future__ import annotations

import contextlib
import os
import signal
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass

PROC = "/proc"


@dataclass(frozen=True)
class ProcInfo:
    pid: int
    ppid: int
    state: str


def _stat(pid: int) -> ProcInfo | None:
    try:
        with open(f"{PROC}/{pid}/stat", "rb") as f:
            raw = f.read().decode("ascii", "replace")
    except OSError:
        return None
    rest = raw[raw.rindex(")") + 2 :].split()  # the command name may contain spaces
    return ProcInfo(pid=pid, ppid=int(rest[1]), state=rest[0])


def all_pids() -> list[int]:
    try:
        return [int(n) for n in os.listdir(PROC) if n.isdigit()]
    except OSError:
        return []


def process_table() -> dict[int, ProcInfo]:
    """pid -> (ppid, state) for every process visible now."""
    out: dict[int, ProcInfo] = {}
    for pid in all_pids():
        info = _stat(pid)
        if info is not None:
            out[pid] = info
    return out


def descendants(roots: Iterable[int], table: dict[int, ProcInfo] | None = None) -> set[int]:
    """Every live process whose parent chain reaches one of `roots` (roots excluded)."""
    table = process_table() if table is None else table
    children: dict[int, list[int]] = {}
    for info in table.values():
        children.setdefault(info.ppid, []).append(info.pid)
    found: set[int] = set()
    stack = list(roots)
    while stack:
        for child in children.get(stack.pop(), ()):
            if child not in found:
                found.add(child)
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


def pids_in_namespace(kind: str, ns: str) -> set[int]:
    """Every process in namespace `ns`: unlike parent links, membership survives reparenting
    and cannot be left without privileges the sandboxed processes do not have."""
    return {pid for pid in all_pids() if namespace_of(pid, kind) == ns}


def is_zombie(pid: int) -> bool:
    info = _stat(pid)
    return info is None or info.state in ("Z", "X")


def signal_all(pids: Iterable[int], sig: int) -> None:
    for pid in pids:
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.kill(pid, sig)


def _threads_stopped(pid: int) -> bool:
    """Whether every thread of `pid` is stopped (or gone): a group stop is complete only then."""
    try:
        tids = os.listdir(f"{PROC}/{pid}/task")
    except OSError:
        return True
    for tid in tids:
        try:
            with open(f"{PROC}/{pid}/task/{tid}/stat", "rb") as f:
                raw = f.read().decode("ascii", "replace")
        except OSError:
            continue
        if raw[raw.rindex(")") + 2 :].split()[0] not in ("T", "t", "Z", "X"):
            return False
    return True


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


def stop_then_kill(collect: Callable[[], set[int]], rounds: int = 50) -> int:
    """SIGSTOP what `collect` finds until it finds nothing new, then SIGKILL all of it.

    Returns how many processes were killed. `collect` must not include the caller.
    """
    seen: set[int] = set()
    for _ in range(rounds):
        new = collect() - seen
        if not new:
            break
        signal_all(new, signal.SIGSTOP)
        seen |= new
    signal_all(seen, signal.SIGKILL)
    wait_dead(seen)  # a stopped process receiving SIGKILL dies at once
    return len(seen)


def wait_dead(pids: Iterable[int], timeout_s: float = 2.0) -> None:
    """Wait (briefly) until /proc shows each of `pids` dead or a zombie."""
    pids = list(pids)
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline and any(not is_zombie(p) for p in pids):
        time.sleep(0.002)
