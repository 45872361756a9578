"""The sandbox on this machine: each measure is checked by what a process inside can do, and
each cleanup mode ends a detached daemon. Measures the machine lacks are skipped, by name."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import textwrap
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from optarena.processes import descendants, is_zombie, kill_tree
from optarena.sandbox import (
    ResourceLimits,
    Sandbox,
    SandboxPolicy,
    SandboxStartError,
    probe,
    spawn,
)

# one per xdist worker: a test checks for its own leftovers, never those of its neighbour's
MARKER = f"optarena-sandbox-test-marker-{os.environ.get('PYTEST_XDIST_WORKER', 'gw')[2:]}-"
SPELLED = f"{MARKER[:17]!r} + {MARKER[17:]!r}"  # in code: the spawning argv must not match
CAPS = probe()
needs_netns = pytest.mark.skipif(CAPS.netns is not None, reason=f"no netns: {CAPS.netns}")
needs_mounts = pytest.mark.skipif(CAPS.mountns is not None, reason=f"no mountns: {CAPS.mountns}")
needs_root = pytest.mark.skipif(not CAPS.root, reason="a dedicated uid needs a root judge")

LIMITS = ResourceLimits(
    address_space_mb=2048, cpu_s=30, file_size_mb=16, open_files=64, processes=16
)


def _marked() -> list[int]:
    out = []
    for name in os.listdir("/proc"):
        if name.isdigit():
            try:
                if MARKER.encode() in Path(f"/proc/{name}/cmdline").read_bytes():
                    out.append(int(name))
            except OSError:
                pass
    return out


@pytest.fixture(autouse=True)
def nothing_left() -> Iterator[None]:
    yield
    assert _marked() == []
    assert [p for p in descendants([os.getpid()]) if not is_zombie(p)] == []


def run_inside(
    tmp_path: Path, code: str, policy: SandboxPolicy | None = None, hide: tuple[Path, ...] = ()
) -> tuple[str, Sandbox]:
    """Run `code` in a fresh sandbox to completion; its stdout, and the (closed) sandbox."""
    work = tmp_path / "work"
    work.mkdir(exist_ok=True)
    log = tmp_path / "out.log"
    sb = Sandbox(work, LIMITS, policy, hide=hide)
    with open(log, "wb") as f:
        proc = sb.spawn(
            [sys.executable, "-I", "-c", textwrap.dedent(code)],
            env={"PATH": os.environ.get("PATH", "")},
            stdout=f,
            stderr=f,
        )
    try:
        proc.wait(timeout=30)
    finally:
        sb.close()
    return log.read_text(), sb


@pytest.fixture
def listener() -> Iterator[socket.socket]:
    srv = socket.socket()
    srv.bind(("127.0.0.1", 0))
    srv.listen(4)
    srv.settimeout(0.5)
    yield srv
    srv.close()


CONNECT = """
    import socket
    try:
        socket.create_connection(("127.0.0.1", {port}), timeout=2)
        print("connected")
    except OSError as e:
        print("refused", e.errno)
"""


@needs_netns
def test_no_network_not_even_loopback(tmp_path: Path, listener: socket.socket) -> None:
    out, sb = run_inside(tmp_path, CONNECT.format(port=listener.getsockname()[1]))
    assert out.startswith("refused"), out
    with pytest.raises(TimeoutError):
        listener.accept()
    assert sb.report()["network"] == "netns"


def test_the_network_check_can_see_a_connection(tmp_path: Path, listener: socket.socket) -> None:
    """Control: without the namespace the same code connects, so the test above means it."""
    out, sb = run_inside(
        tmp_path, CONNECT.format(port=listener.getsockname()[1]), SandboxPolicy.none()
    )
    assert out.startswith("connected"), out
    assert sb.report()["network"] == "off"


@needs_root
@needs_mounts
def test_dedicated_uid_cannot_touch_the_judge(tmp_path: Path) -> None:
    """The uid alone (no PID namespace, which would hide the judge anyway)."""
    judge_file = tmp_path / "result.json"
    judge_file.write_text("{}")
    judge_file.chmod(0o644)
    out, sb = run_inside(
        tmp_path,
        f"""
        import os
        print("uid", os.getuid())
        for what, act in [("write", lambda: open({str(judge_file)!r}, "a")),
                          ("signal", lambda: os.kill({os.getpid()}, 0)),
                          ("memory", lambda: open("/proc/{os.getpid()}/mem", "rb")),
                          ("workdir", lambda: open("mine.txt", "w"))]:
            try:
                act()
                print(what, "ok")
            except OSError as e:
                print(what, "denied", e.errno)
    """,
        SandboxPolicy(pid=False),
    )
    lines = dict(line.split(" ", 1) for line in out.splitlines())
    assert int(lines["uid"]) >= 1_500_000
    assert lines["write"].startswith("denied"), out
    assert lines["signal"].startswith("denied"), out
    assert lines["memory"].startswith("denied"), out
    assert lines["workdir"] == "ok", out
    assert judge_file.read_text() == "{}"
    assert sb.report()["user"].startswith("uid ")


# A child of the sandboxed process opens its parent's memory, and its own, through /proc.
MEM_CHILD = """
import os
pp = os.getppid()
for what, path, mode in (("parent-read", f"/proc/{pp}/mem", os.O_RDONLY),
                         ("parent-write", f"/proc/{pp}/mem", os.O_RDWR),
                         ("self-write", "/proc/self/mem", os.O_RDWR)):
    try:
        os.close(os.open(path, mode))
        print(what, "ok")
    except OSError as e:
        print(what, "denied", e.errno)
"""


@needs_mounts
def test_no_process_of_a_sandbox_writes_anothers_memory(tmp_path: Path) -> None:
    """Red team, 2026-12-06: the processes of one sandbox share a uid and are dumpable, so a
    child could open its parent's /proc/PID/mem for writing (seccomp stops ptrace and
    process_vm_writev, not open) and an external benchmark's candidate code set its benchmark
    script's loop counter to 1. The sandbox's /proc is read-only: the open fails, whoever
    asks. Control: the parent's memory still opens for reading (what the mount leaves) ...
    unless the parent made itself non-dumpable first, as a benchmark's checker can (the
    examples' do): then its /proc entry is root's, hidden and closed to the child."""
    for guarded in (False, True):
        out, _ = run_inside(
            tmp_path,
            f"""
            import ctypes, subprocess, sys
            if {guarded}:
                ctypes.CDLL(None, use_errno=True).prctl(4, 0, 0, 0, 0)  # PR_SET_DUMPABLE
            subprocess.run([sys.executable, "-I", "-c", {MEM_CHILD!r}])
        """,
        )
        lines = dict(line.split(" ", 1) for line in out.splitlines())
        if guarded:
            assert lines["parent-read"].startswith("denied"), out
        else:
            assert lines["parent-read"] == "ok", out
            assert lines["parent-write"] == "denied 30", out  # EROFS
        assert lines["self-write"] == "denied 30", out


@needs_mounts
def test_task_hidden_and_scratch_private(tmp_path: Path) -> None:
    task = Path(__file__).resolve().parents[2] / "src/optarena/tasks/builtin/rmsnorm"
    Path(f"/tmp/{MARKER}-scratch").unlink(missing_ok=True)  # a leak of an earlier run
    out, sb = run_inside(
        tmp_path,
        f"""
        import os
        try:
            print(sorted(os.listdir({str(task)!r})))
        except FileNotFoundError:  # a checkout under /tmp: gone with the private /tmp
            print([])
        open("/tmp/{MARKER}-scratch", "w").write("x")
        print("wrote")
    """,
        hide=(task,),
    )
    assert out.splitlines() == ["[]", "wrote"], out
    assert not Path(f"/tmp/{MARKER}-scratch").exists()
    assert (task / "oracle.py").is_file()
    assert "hidden" in sb.report()["mounts"]


@pytest.mark.skipif(CAPS.cgroup is not None and not CAPS.root, reason="no process limit here")
def test_process_limit_bounds_a_fork_bomb(tmp_path: Path) -> None:
    out, _ = run_inside(
        tmp_path,
        """
        import os, time
        n = 0
        try:
            while n < 200:
                if os.fork() == 0:
                    time.sleep(30)
                    os._exit(0)
                n += 1
        except OSError as e:
            print("stopped", n, e.errno)
    """,
    )
    words = out.split()
    assert words[0] == "stopped", out
    assert int(words[1]) < LIMITS.processes  # type: ignore[operator]


DAEMON = f"""
    import os, sys, time
    if os.fork() == 0:
        os.setsid()
        if os.fork() == 0:
            os.execv(sys.executable, [sys.executable, "-c", "import time; time.sleep(60)",
                                      {SPELLED}])
        os._exit(0)
    os.wait()
    print("daemon started", flush=True)
    time.sleep(60)
"""

POLICIES = {
    "full": SandboxPolicy(),
    "uid-without-cgroup": SandboxPolicy(cgroup=False),
    "process-tree-only": SandboxPolicy.none(),
}


@pytest.mark.parametrize("mode", sorted(POLICIES))
def test_every_cleanup_mode_ends_a_detached_daemon(tmp_path: Path, mode: str) -> None:
    work = tmp_path / "w"
    work.mkdir()
    sb = Sandbox(work, LIMITS, POLICIES[mode])
    log = tmp_path / "log"
    with open(log, "wb") as f:
        sb.spawn([sys.executable, "-I", "-c", textwrap.dedent(DAEMON)], env={}, stdout=f, stderr=f)
    try:
        deadline = time.monotonic() + 20
        while not _marked() and time.monotonic() < deadline:
            time.sleep(0.02)
        assert _marked(), log.read_text()
        assert sb.strays() == set(_marked())
    finally:
        sb.close()
    assert _marked() == []


@needs_netns
def test_an_orphan_of_a_dead_worker_is_found_by_its_namespace(tmp_path: Path) -> None:
    """No cgroup, no uid: the worker exits at once, its daemon is reparented away from the
    tree, and only namespace membership still ties it to the sandbox."""
    work = tmp_path / "w"
    work.mkdir()
    sb = Sandbox(work, LIMITS, SandboxPolicy(user=False, mounts=False, cgroup=False, pid=False))
    code = DAEMON.replace("time.sleep(60)\n", "").replace(
        'print("daemon started", flush=True)', "os._exit(0)"
    )
    try:
        proc = sb.spawn([sys.executable, "-I", "-c", textwrap.dedent(code)], env={})
        proc.wait(timeout=20)
        deadline = time.monotonic() + 20
        while not _marked() and time.monotonic() < deadline:
            time.sleep(0.02)
        assert _marked()
        assert sb.strays() == set(_marked())
    finally:
        sb.close()
    assert _marked() == []


def test_an_orphan_dies_with_its_worker_in_a_pid_namespace(tmp_path: Path) -> None:
    """No cgroup, no uid: a detached daemon of a worker that exits is killed by the kernel
    with the namespace (the test above, without the namespace, shows that it survives)."""
    if CAPS.pidns is not None:
        pytest.skip(f"no PID namespace: {CAPS.pidns}")
    work = tmp_path / "w"
    work.mkdir()
    sb = Sandbox(work, LIMITS, SandboxPolicy(user=False, mounts=False, cgroup=False))
    wait_for_it = f"""
    def running():
        for n in os.listdir("/proc"):
            try:
                cmd = open(f"/proc/{{n}}/cmdline", "rb").read() if n.isdigit() else b""
                if ({SPELLED}).encode() in cmd:
                    return True
            except OSError:
                pass
    while not running():
        time.sleep(0.01)
    print("daemon running", flush=True)
    os._exit(0)
"""
    code = DAEMON.replace('    print("daemon started", flush=True)\n    time.sleep(60)\n', "")
    code = textwrap.dedent(code) + textwrap.dedent(wait_for_it)
    log = tmp_path / "log"
    try:
        with open(log, "wb") as f:
            proc = sb.spawn([sys.executable, "-I", "-c", code], env={}, stdout=f, stderr=f)
        proc.wait(timeout=20)
        assert log.read_text() == "daemon running\n"
        time.sleep(0.2)
        assert _marked() == []
        assert sb.report()["pid"] == "namespace"
    finally:
        sb.close()


def test_kill_tree_reaches_a_setsid_child_of_a_live_parent(tmp_path: Path) -> None:
    """Agents use spawn/kill_tree directly: a grandchild in its own session still dies."""
    code = f"""
        import os, subprocess, sys, time
        subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)", {SPELLED}],
                         start_new_session=True)
        time.sleep(60)
    """
    proc = spawn(
        [sys.executable, "-c", textwrap.dedent(code)],
        cwd=tmp_path,
        env={},
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        deadline = time.monotonic() + 20
        while not _marked() and time.monotonic() < deadline:
            time.sleep(0.02)
        assert _marked()
    finally:
        kill_tree(proc)
    assert _marked() == []


def test_report_says_what_was_off(tmp_path: Path) -> None:
    _, sb = run_inside(tmp_path, "print('hi')", SandboxPolicy.none())
    report = sb.report()
    assert {report[k] for k in ("network", "user", "mounts")} == {"off"}
    assert report["cleanup"] == "process tree"
    assert report["guard"] == "off"


def test_address_space_limit(tmp_path: Path) -> None:
    out, sb = run_inside(
        tmp_path,
        """
        try:
            b = bytearray(4 * 1024**3)
            print("allocated")
        except MemoryError:
            print("refused")
    """,
    )
    assert out.strip() == "refused", (out, sb.proc.returncode, sb.worker_pid, sb.proc.pid)


def test_a_failed_isolated_start_runs_nothing(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """When the isolated start fails (here: its child setup) the candidate is not run at all.
    It was run with rlimits only: no private root, uid or namespaces, so whatever made the
    start fail (a host change under the plan, a path shaped by the agent) bought the candidate
    the ledger, the oracle and the network."""
    # private: monkeypatched (a child setup that fails)
    from optarena.sandbox import _sandbox

    def broken(plan: object) -> None:
        raise OSError("a mount refused")

    monkeypatch.setattr(_sandbox, "child_setup", broken)
    marker = tmp_path / "ran"
    sb = Sandbox(tmp_path, ResourceLimits(address_space_mb=1024), SandboxPolicy())
    try:
        with pytest.raises(SandboxStartError, match="did not start"):
            sb.spawn(["/bin/sh", "-c", f"touch {marker}"], env={"PATH": "/usr/bin:/bin"})
    finally:
        sb.close()
    time.sleep(0.2)
    assert not marker.exists()


def test_a_descriptor_limit_below_the_judges_own_count_still_starts_confined(
    tmp_path: Path,
) -> None:
    """The child holds its parent's descriptors until exec and opens more while it builds the
    sandbox: a task's `open_files` below the judge's own count made every open there fail
    (EMFILE) and the start with it, which ran the worker unconfined before the fail-closed
    start, and ended every such judgement as judge_error after it."""
    held = [os.open(os.devnull, os.O_RDONLY) for _ in range(48)]
    try:
        work = tmp_path / "w"
        work.mkdir()
        limits = ResourceLimits(address_space_mb=1024, open_files=16)
        sb = Sandbox(work, limits, SandboxPolicy())
        code = "import resource; print(resource.getrlimit(resource.RLIMIT_NOFILE)[0])"
        proc = sb.spawn([sys.executable, "-I", "-c", code], env={}, stdout=subprocess.PIPE)
        try:
            out, _ = proc.communicate(timeout=30)
        finally:
            sb.close()
        assert out.decode().strip() == "16"
        report = sb.report()
        if CAPS.mountns is None:
            assert report["mounts"] != "unavailable", report
    finally:
        for fd in held:
            os.close(fd)
