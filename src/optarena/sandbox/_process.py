"""Starting untrusted processes in their own session with resource limits.

Every process optarena starts for a candidate or an agent gets a new session (so its whole
process group can be signalled, by `optarena.processes.kill_tree`) and, for candidates, rlimits
set in the child before exec. A worker's complete cleanup (detached daemons too) is
`Sandbox.close`.
"""

from __future__ import annotations

import resource
import subprocess
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Any

MiB = 1024 * 1024


@dataclass(frozen=True)
class ResourceLimits:
    """rlimits for a child process; None leaves that limit as inherited."""

    address_space_mb: int | None = None
    cpu_s: int | None = None
    file_size_mb: int | None = None
    open_files: int | None = None
    processes: int | None = None  # RLIMIT_NPROC counts per real uid: only for a dedicated uid
    core_dumps: bool = False  # a crashing candidate must not write a core file anywhere

    def as_rlimits(self) -> list[tuple[int, int]]:
        out: list[tuple[int, int]] = []
        if self.address_space_mb is not None:
            out.append((resource.RLIMIT_AS, self.address_space_mb * MiB))
        if self.cpu_s is not None:
            out.append((resource.RLIMIT_CPU, self.cpu_s))
        if self.file_size_mb is not None:
            out.append((resource.RLIMIT_FSIZE, self.file_size_mb * MiB))
        if self.open_files is not None:
            out.append((resource.RLIMIT_NOFILE, self.open_files))
        if self.processes is not None:
            out.append((resource.RLIMIT_NPROC, self.processes))
        if not self.core_dumps:
            out.append((resource.RLIMIT_CORE, 0))
        return out


def _preexec(
    limits: ResourceLimits | None, setup: Callable[[], None] | None
) -> Callable[[], None] | None:
    if limits is None and setup is None:
        return None
    rlimits = limits.as_rlimits() if limits else []

    def limit(which: int, value: int) -> None:
        _soft, hard = resource.getrlimit(which)
        cap = value if hard == resource.RLIM_INFINITY else min(value, hard)
        # CPU: SIGXCPU at the limit (a nameable death), SIGKILL a second later regardless.
        top = cap
        if which == resource.RLIMIT_CPU and (hard == resource.RLIM_INFINITY or cap < hard):
            top = cap + 1
        resource.setrlimit(which, (cap, top))

    def apply() -> None:
        for which, value in rlimits:
            if which != resource.RLIMIT_NOFILE:
                limit(which, value)
        if setup is not None:
            setup()
        # The descriptor limit last: the child still holds every descriptor of its parent
        # (closed only at exec), and setup opens more (a private root holds one per bound
        # path); under a limit below the judge's own count each open failed with EMFILE and
        # the sandbox did not start. Lowering a limit needs no privilege after setup's uid drop.
        for which, value in rlimits:
            if which == resource.RLIMIT_NOFILE:
                limit(which, value)

    return apply


def spawn(
    argv: Sequence[str],
    *,
    cwd: Path,
    env: Mapping[str, str],
    limits: ResourceLimits | None = None,
    pass_fds: Sequence[int] = (),
    stdout: IO[Any] | int | None = None,
    stderr: IO[Any] | int | None = None,
    setup: Callable[[], None] | None = None,
    stdin: IO[Any] | int | None = subprocess.DEVNULL,
) -> subprocess.Popen[bytes]:
    """Start `argv` in a new session, stdin closed unless given, with the given limits.

    `setup` runs in the child after the rlimits but the descriptor limit, before exec
    (namespaces, uid change).
    """
    return subprocess.Popen(
        list(argv),
        cwd=str(cwd),
        env=dict(env),
        stdin=stdin,
        stdout=stdout,
        stderr=stderr,
        pass_fds=tuple(pass_fds),
        start_new_session=True,
        preexec_fn=_preexec(limits, setup),
    )
