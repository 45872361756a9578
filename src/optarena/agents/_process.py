"""Running an agent's process tree under a wall-time limit, with its output in files.

Output goes to files, never to pipes: a grandchild that inherits stdout and outlives its parent
cannot keep us waiting for an EOF that never comes. When the agent exits, times out or we are
interrupted, its whole process group is killed (`optarena.sandbox.kill_tree`), so nothing it
started keeps changing the workspace after the delivery is captured.

CPU time comes from the OS: the difference in `getrusage(RUSAGE_CHILDREN)` across the run, i.e.
user + system time of the agent's process and of every descendant that was reaped (by its
parent or by us). Descendants that escaped (daemonized and reparented elsewhere) are not
counted, and the figure assumes no other child of this process is reaped meanwhile (the trial
lifecycle runs one agent at a time).
"""

from __future__ import annotations

import resource
import subprocess
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

from optarena.agents._base import AgentStatus
from optarena.sandbox import kill_tree, spawn


@dataclass(frozen=True)
class ProcessResult:
    """How the agent's process ended. `exit_code` < 0 means killed by signal -exit_code."""

    exit_code: int | None
    timed_out: bool
    wall_s: float
    cpu_s: float | None


def _children_cpu() -> float:
    ru = resource.getrusage(resource.RUSAGE_CHILDREN)
    return ru.ru_utime + ru.ru_stime


def run_logged(
    argv: Sequence[str],
    *,
    cwd: Path,
    env: Mapping[str, str],
    wall_s: float,
    stdout_path: Path,
    stderr_path: Path,
    grace_s: float = 1.0,
) -> ProcessResult:
    """Run `argv` in its own session with stdout/stderr appended to files; kill the tree
    after `wall_s` (SIGTERM, then SIGKILL after `grace_s`) and whenever we are interrupted."""
    cpu0, t0 = _children_cpu(), time.monotonic()
    with open(stdout_path, "ab") as out, open(stderr_path, "ab") as err:
        proc = spawn(argv, cwd=cwd, env=env, stdout=out, stderr=err)
    timed_out = False
    try:
        try:
            proc.wait(timeout=wall_s)
        except subprocess.TimeoutExpired:
            timed_out = True
            kill_tree(proc, grace_s=grace_s)
    finally:
        kill_tree(proc)  # what the agent left running in its group ends with it
    wall = time.monotonic() - t0
    cpu = _children_cpu() - cpu0
    return ProcessResult(
        exit_code=proc.returncode,
        timed_out=timed_out,
        wall_s=round(wall, 4),
        cpu_s=round(cpu, 4) if cpu >= 0 else None,
    )


def status_of(result: ProcessResult) -> tuple[AgentStatus, str]:
    """The agent status a process result means, and a one-line explanation."""
    code = result.exit_code
    if result.timed_out:
        return "timeout", f"killed after the wall-time limit ({result.wall_s:.1f} s)"
    if code is None:
        return "crashed", "no exit status"
    if code < 0:
        return "crashed", f"killed by signal {-code}"
    if code > 0:
        return "failed", f"exited with status {code}"
    return "completed", "exited with status 0"
