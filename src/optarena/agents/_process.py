"""Running an agent's process tree under a wall-time limit, with its output in files.

Output goes to files, never to pipes: a grandchild that inherits stdout and outlives its parent
cannot keep us waiting for an EOF that never comes. In a trial the agent runs in an
`AgentSandbox`, and when it exits, times out or we are interrupted, every process it started is
killed, detached daemons included (the sandbox's cgroup or uid lists them all). Without a
sandbox (a runner's unit test, `--no-agent-sandbox`) its whole process group is killed
(`optarena.processes.kill_tree`), and on a timeout or interruption also every descendant that
left the group (`setsid`) but still descends from the agent; a daemon that was already
orphaned when the agent ended cannot be found that way. The delivery is copied out of the
workspace before judging, so a straggler cannot change what is judged.

CPU time comes from the OS: the difference in `getrusage(RUSAGE_CHILDREN)` across the run, i.e.
user + system time of the agent's process and of every descendant that was reaped (by its
parent or by us). Descendants that escaped (daemonized and reparented elsewhere) are not
counted, and the figure assumes no other child of this process is reaped meanwhile (the trial
lifecycle runs one agent at a time).
"""

from __future__ import annotations

import resource
import signal
import subprocess
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

from optarena.processes import descendants, kill_tree, signal_same
from optarena.records import AgentStatus
from optarena.sandbox import AgentSandbox, spawn


@dataclass(frozen=True)
class ProcessResult:
    """How the agent's process ended. `exit_code` < 0 means killed by signal -exit_code."""

    exit_code: int | None
    timed_out: bool
    wall_s: float
    cpu_s: float | None
    sandbox: dict[str, object] | None = None  # the AgentSandbox report, when one was used


def end_tree(proc: subprocess.Popen[bytes], grace_s: float = 0.0) -> None:
    """End the agent's group via `kill_tree`, and the descendants that left the group while
    their parent chain still led to the agent (snapshot first: a SIGTERM that ends the agent
    orphans them). SIGTERM with `grace_s` to all of them first when given."""
    escaped = descendants([proc.pid]) if proc.poll() is None else {}
    if grace_s > 0 and escaped:
        signal_same(escaped, signal.SIGTERM)
    kill_tree(proc, grace_s=grace_s)
    signal_same(escaped, signal.SIGKILL)


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
    sandbox: AgentSandbox | None = None,
) -> ProcessResult:
    """Run `argv` in its own session (in `sandbox` when given) with stdout/stderr appended to
    files; kill everything it started after `wall_s` (SIGTERM, then SIGKILL after `grace_s`),
    when it exits, and whenever we are interrupted."""
    cpu0, t0 = _children_cpu(), time.monotonic()
    with open(stdout_path, "ab") as out, open(stderr_path, "ab") as err:
        if sandbox is not None:
            proc = sandbox.spawn(argv, env=env, stdout=out, stderr=err)
        else:
            proc = spawn(argv, cwd=cwd, env=env, stdout=out, stderr=err)
    timed_out = False
    try:
        proc.wait(timeout=wall_s)
    except subprocess.TimeoutExpired:
        timed_out = True
    finally:
        # On exit too: what the agent left running ends with it.
        grace = grace_s if timed_out else 0.0
        if sandbox is not None:
            sandbox.close(grace)
        else:
            end_tree(proc, grace)
    wall = time.monotonic() - t0
    cpu = _children_cpu() - cpu0
    return ProcessResult(
        exit_code=proc.returncode,
        timed_out=timed_out,
        wall_s=round(wall, 4),
        cpu_s=round(cpu, 4) if cpu >= 0 else None,
        sandbox=sandbox.report() if sandbox is not None else None,
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
