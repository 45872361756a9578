"""The worker's cgroups: the kernel's CPU count sees exited threads and children, the freezer
stops a busy tree (forks included) and thaw resumes it, and the candidate cannot leave.

Each check has a control that shows what it would see without the measure: a per-thread count
that misses the exited thread, CPU that grows while not frozen, a root worker that does leave.
"""

from __future__ import annotations

import os
import select
import subprocess
import sys
import textwrap
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from optarena.processes import descendants, is_zombie
from optarena.sandbox import ResourceLimits, Sandbox, SandboxPolicy, probe, spawn

# private: the cgroup layout's internals, tested on literal hierarchies
from optarena.sandbox._cgroup import (
    Hierarchy,
    Layout,
    WorkerCgroups,
    attach_self,
    find_hierarchies,
    plan_layout,
)

CAPS = probe()
LAYOUT = CAPS.cgroups
needs_cpu = pytest.mark.skipif("cpu" not in LAYOUT.chosen, reason=f"{LAYOUT.why_not.get('cpu')}")
needs_freezer = pytest.mark.skipif(
    "freezer" not in LAYOUT.chosen, reason=f"{LAYOUT.why_not.get('freezer')}"
)
LIMITS = ResourceLimits(
    address_space_mb=2048, cpu_s=60, file_size_mb=16, open_files=64, processes=16
)
MS = 1_000_000


@pytest.fixture(autouse=True)
def nothing_left() -> Iterator[None]:
    yield
    assert [p for p in descendants([os.getpid()]) if not is_zombie(p)] == []


SAY = "def say(*a):\n    os.write(OUT, (' '.join(map(str, a)) + '\\n').encode())\n"


class Worker:
    """A sandboxed script that reports progress as lines on a pipe (fd 3 in the script)."""

    def __init__(self, tmp_path: Path, code: str, policy: SandboxPolicy | None = None) -> None:
        work = tmp_path / "work"
        work.mkdir(exist_ok=True)
        self.sb = Sandbox(work, LIMITS, policy)
        r, w = os.pipe()
        code = f"import os\nOUT = {w}\n{SAY}" + textwrap.dedent(code)
        self.proc = self.sb.spawn(
            [sys.executable, "-I", "-c", code],
            env={"PATH": os.environ.get("PATH", "")},
            pass_fds=(w,),
            stderr=subprocess.DEVNULL,
        )
        os.close(w)
        self.r = r
        self.buf = b""

    def line(self, timeout: float = 20.0) -> str:
        deadline = time.monotonic() + timeout
        while b"\n" not in self.buf:
            left = deadline - time.monotonic()
            assert left > 0 and select.select([self.r], [], [], left)[0], "no line from worker"
            chunk = os.read(self.r, 4096)
            assert chunk, "worker closed its pipe"
            self.buf += chunk
        line, _, self.buf = self.buf.partition(b"\n")
        return line.decode()

    def close(self) -> None:
        self.sb.close()
        os.close(self.r)


def test_layout_prefers_v1_controllers_and_the_v2_freezer() -> None:
    v1 = Hierarchy(1, Path("/c/cpuacct"), frozenset({"cpuacct"}))
    v1f = Hierarchy(1, Path("/c/freezer"), frozenset({"freezer"}))
    v2 = Hierarchy(2, Path("/c/unified"), frozenset())
    layout = plan_layout([v2, v1, v1f])
    assert layout.chosen == {"cpu": v1, "freezer": v2}  # v2's freezer: no static-key flips
    assert set(layout.why_not) == {"pids", "memory", "cpuset"}
    assert plan_layout([v1, v1f]).chosen == {"cpu": v1, "freezer": v1f}
    only_v2 = plan_layout([v2])
    assert only_v2.chosen == {"cpu": v2, "freezer": v2}
    with_ctrl = plan_layout([Hierarchy(2, Path("/c"), frozenset({"pids", "memory"}))])
    assert set(with_ctrl.chosen) == {"pids", "cpu", "freezer", "memory"}
    cpuset = Hierarchy(1, Path("/c/cpuset"), frozenset({"cpuset"}))
    assert plan_layout([v1, cpuset]).chosen["cpuset"] == cpuset
    assert layout.only(["cpu"]).chosen == {"cpu": v1}


@needs_cpu
@pytest.mark.parametrize("how", ["thread", "child"])
def test_cpu_of_an_exited_thread_or_child_is_counted(tmp_path: Path, how: str) -> None:
    start = {
        "thread": "th = threading.Thread(target=work)\nth.start()\nth.join()",
        "child": "pid = os.fork()\nif pid == 0:\n    work()\n    os._exit(0)\nos.waitpid(pid, 0)",
    }[how]
    code = f"""
import threading, time
say("ready")
time.sleep(0.2)
def work():
    t0 = time.thread_time()
    while time.thread_time() - t0 < 0.4:
        pass
{start}
say("done")
time.sleep(60)
"""
    w = Worker(tmp_path, code)
    try:
        assert w.line() == "ready"
        before = w.sb.cpu_ns()
        assert before is not None
        assert w.line() == "done"
        after = w.sb.cpu_ns()
        assert after is not None
        assert after - before >= 380 * MS, (after - before) / MS
        # Control: what a per-thread count of the live worker sees misses the burnt time.
        # join() returns once the thread's Python state is released, before the OS thread has
        # left; on a busy machine it can still be listed, with its time, for a moment.
        task = Path(f"/proc/{w.sb.worker_pid}/task")
        deadline = time.monotonic() + 10
        while len(os.listdir(task)) > 1 and time.monotonic() < deadline:
            time.sleep(0.01)
        assert len(os.listdir(task)) == 1
        live = 0
        for tid in os.listdir(task):
            live += int((task / tid / "schedstat").read_text().split()[0])
        assert live < after - 300 * MS
        assert w.sb.cpu_source in ("cpuacct", "cgroup2")
        assert w.sb.report()["cpu_accounting"] == w.sb.cpu_source
    finally:
        w.close()


def test_without_a_cgroup_cpu_ns_is_none_and_says_why(tmp_path: Path) -> None:
    w = Worker(tmp_path, "import time\ntime.sleep(5)", SandboxPolicy(cgroup=False))
    try:
        assert w.sb.cpu_ns() is None
        assert w.sb.cpu_source.startswith("unavailable (")
    finally:
        w.close()


BUSY_FORKER = """
    import time
    say("ready")
    n = 0
    while True:
        try:
            if os.fork() == 0:
                while True:
                    pass
            n += 1
        except OSError:
            pass
        t = time.perf_counter()
        while time.perf_counter() - t < 0.003:
            pass
"""


def _members_frozen_cpu(sb: Sandbox, seconds: float) -> tuple[int, int]:
    """CPU growth and member-count change over `seconds` (both 0 for a frozen tree)."""
    c0, m0 = sb.cpu_ns(), sb.members()
    time.sleep(seconds)
    c1, m1 = sb.cpu_ns(), sb.members()
    assert c0 is not None and c1 is not None
    return c1 - c0, len(m1 ^ m0)


FREEZE_POLICIES = {
    "cgroup-freezer": SandboxPolicy(),
    "sigstop": SandboxPolicy(freezer=False),
}


@needs_cpu
@pytest.mark.parametrize("mode", sorted(FREEZE_POLICIES))
def test_freeze_stops_a_forking_busy_tree_and_thaw_resumes_it(tmp_path: Path, mode: str) -> None:
    if mode == "cgroup-freezer" and "freezer" not in LAYOUT.chosen:
        pytest.skip(f"no freezer: {LAYOUT.why_not.get('freezer')}")
    w = Worker(tmp_path, BUSY_FORKER, FREEZE_POLICIES[mode])
    try:
        assert w.line() == "ready"
        time.sleep(0.1)  # forking: the freeze races with new children
        w.sb.freeze()
        w.sb.freeze()  # idempotent
        grown, changed = _members_frozen_cpu(w.sb, 0.3)
        assert grown < 2 * MS and changed == 0, (grown / MS, changed)
        assert len(w.sb.members()) > 3
        w.sb.thaw()
        grown, _ = _members_frozen_cpu(w.sb, 0.3)
        assert grown > 30 * MS  # control: the same tree, thawed, burns CPU again
        for _ in range(5):  # repeated cycles stay exact
            w.sb.freeze()
            grown, changed = _members_frozen_cpu(w.sb, 0.05)
            assert grown < 2 * MS and changed == 0, (grown / MS, changed)
            w.sb.thaw()
        expected = "sigstop" if mode == "sigstop" else w.sb.freeze_method
        assert w.sb.freeze_method == expected
        assert w.sb.report()["freeze"] == expected
        w.sb.freeze()  # closing a frozen sandbox ends everything in it
        members = w.sb.members()
    finally:
        w.close()
    assert all(is_zombie(p) for p in members)


def _v2_only() -> Layout | None:
    found, _ = find_hierarchies()
    v2 = [h for h in found if h.version == 2]
    if not v2:
        return None
    return plan_layout(v2, ["cpu", "freezer"])


@pytest.mark.parametrize("version", [1, 2])
def test_each_cgroup_version_counts_and_freezes(tmp_path: Path, version: int) -> None:
    """The v1 and v2 backends directly (the sandbox picks one; both must be right)."""
    if version == 1:
        found, _ = find_hierarchies()
        layout = plan_layout([h for h in found if h.version == 1], ["cpu", "freezer"])
    else:
        layout = _v2_only() or Layout()
    if set(layout.chosen) != {"cpu", "freezer"}:
        pytest.skip(f"no cgroup v{version} cpu and freezer here")
    try:
        cg = WorkerCgroups(layout)
    except OSError as e:
        pytest.skip(f"cgroup v{version}: {e}")
    code = "import threading\ndef f():\n    while True: pass\n"
    code += "threading.Thread(target=f).start()\nf()"
    proc = spawn(
        [sys.executable, "-c", code],
        cwd=tmp_path,
        env={},
        setup=lambda: attach_self(cg.procs_files),
    )
    try:
        time.sleep(0.2)
        times = []
        for _ in range(20):
            t0 = time.perf_counter_ns()
            cg.freeze()
            times.append(time.perf_counter_ns() - t0)
            a = cg.cpu_ns()
            time.sleep(0.02)
            b = cg.cpu_ns()
            assert a is not None and b is not None
            assert b - a < 2 * MS, (b - a) / MS
            cg.thaw()
            time.sleep(0.01)
        c = cg.cpu_ns()
        d = c
        deadline = time.monotonic() + 10  # control: thawed, it runs (a busy machine lends
        while time.monotonic() < deadline and c is not None and d is not None:  # it less CPU)
            time.sleep(0.05)
            d = cg.cpu_ns()
            if d is not None and d - c > 20 * MS:
                break
        assert c is not None and d is not None and d - c > 20 * MS
        assert cg.procs() == {proc.pid}
    finally:
        cg.remove()
        proc.wait(timeout=5)
    assert proc.returncode == -9


@needs_freezer
def test_freeze_and_thaw_of_an_idle_worker_are_fast(tmp_path: Path) -> None:
    w = Worker(tmp_path, "import time\nsay('ready')\ntime.sleep(60)")
    try:
        assert w.line() == "ready"
        freezes, thaws = [], []
        for _ in range(200):
            t0 = time.perf_counter_ns()
            w.sb.freeze()
            t1 = time.perf_counter_ns()
            w.sb.thaw()
            t2 = time.perf_counter_ns()
            freezes.append(t1 - t0)
            thaws.append(t2 - t1)
        freezes.sort()
        thaws.sort()
        # Well under a millisecond on a quiet machine; the bound leaves room for a busy CI.
        assert freezes[100] < 1 * MS and thaws[100] < 1 * MS, (freezes[100], thaws[100])
    finally:
        w.close()


LEAVE = """
    import glob
    targets = sorted(glob.glob("/sys/fs/cgroup/*/cgroup.procs") + ["/sys/fs/cgroup/cgroup.procs"])
    moved = []
    for t in targets:
        try:
            with open(t, "w") as f:
                f.write("0")
            moved.append(t)
        except OSError:
            pass
    say("moved", len(moved))
    import time
    time.sleep(60)
"""


@pytest.mark.skipif(not CAPS.root or CAPS.cgroup is not None, reason="needs a root judge, cgroups")
@pytest.mark.parametrize("policy", ["full", "root-worker"])
def test_a_candidate_cannot_leave_its_cgroup(tmp_path: Path, policy: str) -> None:
    pol = SandboxPolicy() if policy == "full" else SandboxPolicy(user=False, mounts=False)
    w = Worker(tmp_path, LEAVE, pol)
    try:
        words = w.line().split()
        assert w.sb.cgroup is not None
        inside = w.sb.worker_pid in w.sb.cgroup.procs()
        if policy == "full":
            assert words == ["moved", "0"] and inside
        else:  # control: a worker running as root does leave, so the check above means it
            assert int(words[1]) > 0 and not inside
    finally:
        w.close()


@pytest.mark.skipif(not LAYOUT.chosen, reason="no cgroups here")
def test_cgroups_of_dead_judges_are_swept_in_every_hierarchy(tmp_path: Path) -> None:
    """A judge killed while its worker was frozen left cgroups in every hierarchy with a live
    process inside: the sweep thaws and kills it and removes every directory, and leaves a
    live judge's cgroups alone."""
    # private: see above
    from optarena.sandbox._cgroup import sweep_stale

    dead = subprocess.Popen(["true"])
    dead.wait()
    # A cpuset cgroup takes a task only once configured: joining is what this test needs.
    bases = [h.base for f, h in LAYOUT.chosen.items() if f != "cpuset"]
    stale = [b / f"optarena-{dead.pid}-deadbeef" for b in bases]
    mine = [b / f"optarena-{os.getpid()}-cafef00d" for b in bases]
    for d in (*stale, *mine):
        d.mkdir()
    leftover = subprocess.Popen(["sleep", "60"])
    try:
        for d in stale:
            (d / "cgroup.procs").write_text(str(leftover.pid))
        for d in stale:
            if (d / "freezer.state").exists():
                (d / "freezer.state").write_text("FROZEN")
        sweep_stale(bases)
        assert leftover.wait(timeout=10) == -9
        assert not any(d.exists() for d in stale)
        assert all(d.exists() for d in mine)
    finally:
        leftover.kill()
        leftover.wait()
        for d in (*stale, *mine):
            if d.exists():
                d.rmdir()


STRAY_MAKER = """
    import time
    if os.fork() == 0:
        os.setsid()
        while True:
            time.sleep(0.01)
    say("ready")
    while True:
        line = os.read(IN, 100)
        say("alive", line.decode().strip())
"""


def _v1_freezer_caps() -> object:
    """The probe's capabilities with the freezer taken from cgroup v1 instead."""
    import dataclasses

    found, _ = find_hierarchies()
    v1 = [h for h in found if h.version == 1 and h.offers("freezer")]
    if not v1:
        return None
    chosen = {**LAYOUT.chosen, "freezer": v1[0]}
    return dataclasses.replace(CAPS, cgroups=Layout(chosen, dict(LAYOUT.why_not)))


@pytest.mark.parametrize("mode", ["default", "v1-freezer", "sigstop"])
def test_strays_of_a_frozen_worker_are_killed_and_the_worker_lives_on(
    tmp_path: Path, mode: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    # private: monkeypatched (a cgroup v1 freezer; which processes the kill waits for)
    from optarena.processes import _tree
    from optarena.sandbox import _sandbox

    if mode == "v1-freezer":
        caps = _v1_freezer_caps()
        if caps is None:
            pytest.skip("no cgroup v1 freezer")
        monkeypatch.setattr(_sandbox, "probe", lambda: caps)
    policy = SandboxPolicy(freezer=mode != "sigstop")
    waited: list[set[int]] = []
    wait_stopped = _tree._wait_stopped
    monkeypatch.setattr(
        _tree,
        "_wait_stopped",
        lambda pids, deadline: (waited.append(set(pids)), wait_stopped(pids, deadline)),
    )
    r, w = os.pipe()
    try:
        code = STRAY_MAKER.replace("IN, 100", f"{r}, 100")
        work = tmp_path / "work"
        work.mkdir()
        sb = Sandbox(work, LIMITS, policy)
        out_r, out_w = os.pipe()
        full = f"import os\nOUT = {out_w}\n{SAY}" + textwrap.dedent(code)
        sb.spawn([sys.executable, "-I", "-c", full], env={}, pass_fds=(r, out_w))
        os.close(out_w)
        try:
            assert select.select([out_r], [], [], 20)[0]
            assert os.read(out_r, 100).startswith(b"ready")
            time.sleep(0.05)
            assert len(sb.strays()) == 1
            if mode == "v1-freezer":
                assert sb.freeze_method == "freezer"
            sb.freeze()
            stray = sb.strays()
            t0 = time.monotonic()
            assert sb.kill_strays() == 1
            assert time.monotonic() - t0 < 1.0
            assert sb.strays() == set()
            if sb.freeze_method == "cgroup2":
                # Frozen, it can neither run nor fork: no wait for a SIGSTOP that never shows
                # (0.5 s per call of a candidate that left a process, before).
                assert not any(stray & pids for pids in waited)
            sb.thaw()
            os.write(w, b"ping\n")
            assert select.select([out_r], [], [], 20)[0]
            assert os.read(out_r, 100) == b"alive ping\n"
        finally:
            sb.close()
            os.close(out_r)
    finally:
        os.close(r)
        os.close(w)
