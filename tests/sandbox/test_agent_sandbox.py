"""The agent sandbox on this machine: each measure checked by what a shell inside can do (write,
read, connect, outlive it), the leftover sweep after a dead optarena, and the mountinfo parser
on literal lines. Measures the machine lacks are skipped, by name."""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest

from optarena.processes import descendants, is_zombie, namespace_of
from optarena.sandbox import (
    AgentSandbox,
    AgentSandboxError,
    AgentSandboxPolicy,
    _agent_child,
    probe,
    sweep_agent_leftovers,
)

# private: the sweep's, cgroups' and uids' internals, attacked directly
from optarena.sandbox._agent_sweep import (
    CGROUP_PREFIX,
    owned_name,
    socket_bases,
    sweep_agent_sockets,
)
from optarena.sandbox._cgroup import attach_self, find_pids_root
from optarena.sandbox._root import mount_points
from optarena.sandbox._uids import lease_uid

Listen = Callable[..., Any]  # the `listen` fixture (tests/sandbox/conftest.py)
# `sleep 3131.5N`: a process of ours, easy to find in /proc (N: the xdist worker, so a test
# checks for its own leftovers, never those of a test running beside it)
MARKER = f"3131.5{os.environ.get('PYTEST_XDIST_WORKER', 'gw')[2:]}"
CAPS = probe()
CHECKOUT = Path(__file__).resolve().parents[2]
needs_netns = pytest.mark.skipif(CAPS.netns is not None, reason=f"no netns: {CAPS.netns}")
needs_mounts = pytest.mark.skipif(CAPS.mountns is not None, reason=f"no mountns: {CAPS.mountns}")
needs_root = pytest.mark.skipif(not CAPS.root, reason="a dedicated uid needs optarena as root")
needs_cgroup = pytest.mark.skipif(CAPS.cgroup_base is None, reason=f"no cgroup: {CAPS.cgroup}")


def _marked() -> list[int]:
    out = []
    for name in os.listdir("/proc"):
        if name.isdigit():
            try:
                cmd = Path(f"/proc/{name}/cmdline").read_bytes()
            except OSError:
                continue
            if MARKER.encode() in cmd and not is_zombie(int(name)):
                out.append(int(name))
    return out


@pytest.fixture(autouse=True)
def nothing_left() -> Iterator[None]:
    yield
    assert _marked() == []
    assert [p for p in descendants([os.getpid()]) if not is_zombie(p)] == []


@pytest.fixture
def dirs(tmp_path: Path) -> dict[str, Path]:
    """A ledger-like layout: this trial's workspace and home, another trial, the database."""
    ledger = tmp_path / "ledger"
    out = {
        "ledger": ledger,
        "ws": ledger / "work" / "t1" / "workspace",
        "home": ledger / "work" / "t1" / "home",
        "other": ledger / "work" / "t0" / "workspace",
    }
    for key in ("ws", "home", "other"):
        out[key].mkdir(parents=True)
    (ledger / "ledger.db").write_text("rows")
    (out["other"] / "solution.py").write_text("other trial's secret")
    return out


def run_agent(
    dirs: dict[str, Path],
    script: str,
    policy: AgentSandboxPolicy | None = None,
    ports: tuple[int, ...] = (),
    wait: bool = True,
) -> tuple[str, AgentSandbox]:
    """Run a shell script as the agent, to completion; its output and the closed sandbox."""
    sb = AgentSandbox(
        policy or AgentSandboxPolicy(),
        writable=[dirs["ws"], dirs["home"]],
        hidden=[dirs["ledger"]],
        ports=list(ports),
        home=dirs["home"],
    )
    log = dirs["ledger"].parent / "agent.log"
    with open(log, "wb") as f:
        proc = sb.spawn(["sh", "-c", script], env=dict(os.environ), stdout=f, stderr=f)
    try:
        if wait:
            proc.wait(timeout=60)
    finally:
        sb.close()
    return log.read_text(), sb


@pytest.fixture
def installed_judge() -> Iterator[Path]:
    """A stand-in for an installed judge file: visible to the agent (not under /tmp, /root or
    /run) and writable by us, so the test never touches the real one if containment failed."""
    d = Path(tempfile.mkdtemp(prefix=".agent-test-", dir=CHECKOUT))
    target = d / "_checks.py"
    target.write_text("TOLERANCE = 1e-5\n")
    os.chmod(d, 0o777)  # even a world-writable directory is read-only for the agent
    yield target
    shutil.rmtree(d)


@needs_mounts
def test_only_the_workspace_and_home_are_writable(
    dirs: dict[str, Path], installed_judge: Path
) -> None:
    target = installed_judge
    before = target.read_bytes()
    script = f"""
        echo ok > {dirs["ws"]}/solution.py && echo ws-written
        echo ok > "$HOME/notes" && echo home-written
        {{ echo '# x' >> {target}; }} 2>/dev/null || echo judge-refused
        {{ echo 'x' > {target.parent}/new.py; }} 2>/dev/null || echo judge-refused
        {{ echo x > {dirs["ledger"]}/ledger.db; }} 2>/dev/null || echo ledger-refused
        cat {dirs["other"]}/solution.py 2>/dev/null || echo other-unreadable
        ls {dirs["ledger"]}/work
        echo scratch > /tmp/agent-scratch && echo tmp-written
    """
    out, sb = run_agent(dirs, script)
    # The ledger under /tmp is absent from the agent's root: writing its path lands in the
    # private /tmp, refused only for a dedicated uid (a user namespace owns its scratch).
    ledger = ["ledger-refused"] if sb.report()["user"].startswith("uid") else []
    assert [w for w in out.split() if w != "ledger-refused" or ledger] == [
        "ws-written",
        "home-written",
        "judge-refused",
        "judge-refused",
        *ledger,
        "other-unreadable",
        "t1",  # the other trial's directory is not even listed
        "tmp-written",
    ], out
    assert target.read_bytes() == before and not (target.parent / "new.py").exists()
    assert (dirs["ledger"] / "ledger.db").read_text() == "rows"
    assert (dirs["ws"] / "solution.py").read_text() == "ok\n"
    assert not Path("/tmp/agent-scratch").exists()  # /tmp was private
    # given back: the judge reads the workspace as the user who started optarena
    assert (dirs["ws"] / "solution.py").stat().st_uid == os.getuid()
    report = sb.report()
    assert report["mounts"].startswith("private root: only the system")
    assert not any(str(dirs["ledger"]).startswith(v) for v in report["visible"])
    assert "/run" not in report["visible"] and str(dirs["ws"]) in report["visible"]
    assert report["ipc"] == ("private" if CAPS.ipcns is None else "host")


@needs_mounts
def test_the_agent_can_still_do_its_job(dirs: dict[str, Path]) -> None:
    script = f"""
        cd {dirs["ws"]}
        git init -q . && git -c user.name=a -c user.email=a@b commit -q --allow-empty -m x \\
            && echo git-ok
        python3 -c 'import numpy; print("numpy-ok")'
        printf 'int main(void){{return 0;}}' > t.c
        if command -v cc >/dev/null; then cc -o t t.c && ./t && echo cc-ok; else echo cc-ok; fi
    """
    out, _ = run_agent(dirs, script)
    assert out.split() == ["git-ok", "numpy-ok", "cc-ok"], out


@needs_mounts
def test_python3_through_a_version_managers_shim_still_runs(
    dirs: dict[str, Path], monkeypatch: pytest.MonkeyPatch
) -> None:
    """With pyenv's shims first on PATH, `python3` is a script that runs pyenv from its root:
    the sandbox keeps the manager's root readable, or every `python3` exits 127."""
    shims = Path(os.environ.get("PYENV_ROOT", Path.home() / ".pyenv")) / "shims"
    if not (shims / "python3").exists():
        pytest.skip(f"no pyenv shims at {shims}")
    monkeypatch.setenv("PATH", f"{shims}:{os.environ['PATH']}")
    out, _ = run_agent(dirs, "command -v python3; python3 -c 'print(\"shim-ok\")'")
    assert out.split() == [str(shims / "python3"), "shim-ok"], out


@needs_root
@needs_mounts
def test_a_dedicated_uid_owns_only_the_writable_directories(dirs: dict[str, Path]) -> None:
    out, sb = run_agent(dirs, "id -u; kill -0 1 2>/dev/null && echo signalled-init || true")
    uid = int(out.split()[0])
    assert uid != os.getuid() and sb.report()["user"] == f"uid {uid}"
    assert "signalled-init" not in out


CONNECT = """python3 - <<'EOF'
import socket
for port in ({ports}):
    try:
        s = socket.create_connection(("127.0.0.1", port), timeout=3)
        print(port, s.recv(5).decode() or "eof")
    except OSError as e:
        print(port, "refused")
try:
    socket.create_connection(("192.0.2.1", 80), timeout=3)
    print("internet")
except OSError:
    print("no-internet")
EOF"""


@needs_netns
def test_only_the_forwarded_port_is_reachable(dirs: dict[str, Path], listen: Listen) -> None:
    proxy, other = listen(), listen()
    out, sb = run_agent(
        dirs, CONNECT.format(ports=f"{proxy.port}, {other.port}"), ports=(proxy.port,)
    )
    assert out.splitlines() == [f"{proxy.port} hello", f"{other.port} refused", "no-internet"]
    assert (proxy.accepted, other.accepted) == (1, 0)
    assert sb.report()["network"] == f"netns, reachable: 127.0.0.1:{proxy.port}"


@needs_netns
def test_without_a_forwarded_port_nothing_is_reachable(
    dirs: dict[str, Path], listen: Listen
) -> None:
    other = listen()
    out, _ = run_agent(dirs, CONNECT.format(ports=f"{other.port},"))
    assert out.splitlines() == [f"{other.port} refused", "no-internet"]
    assert other.accepted == 0


BOMB = f"""python3 - <<'EOF'
import os
n = 0
for _ in range(300):
    try:
        pid = os.fork()
    except OSError:
        break
    if pid == 0:
        os.execvp("sleep", ["sleep", "{MARKER}"])
    n += 1
print("forked", n)
EOF"""


@needs_cgroup
def test_a_detached_daemon_and_a_fork_bomb_end_with_the_agent(dirs: dict[str, Path]) -> None:
    script = f"setsid sh -c 'sleep {MARKER} &' &\n{BOMB}"
    out, sb = run_agent(dirs, script, AgentSandboxPolicy(max_processes=40))
    forked = int(out.split("forked")[1].split()[0])
    assert 0 < forked < 40, out  # the bomb hit pids.max (and RLIMIT_NPROC), not 300
    assert "pids.max=40" in sb.report()["processes"]
    # nothing_left: neither the daemon nor any of the sleeps survived the close


def _start_daemons(dirs: dict[str, Path]) -> tuple[AgentSandbox, set[int]]:
    """An agent that left a detached daemon and a child behind, and their pids, once both
    run."""
    sb = AgentSandbox(AgentSandboxPolicy(), writable=[dirs["ws"], dirs["home"]], home=dirs["home"])
    script = f"setsid sh -c 'sleep {MARKER} &' & sleep {MARKER} & wait"
    sb.spawn(["sh", "-c", script], env=dict(os.environ))

    def sleeps() -> set[int]:
        found = set()
        for pid in _marked():
            with contextlib.suppress(OSError):  # a shell that forked its sleep and ended
                if Path(f"/proc/{pid}/cmdline").read_bytes()[:6] == b"sleep\0":
                    found.add(pid)
        return found

    try:
        deadline = time.monotonic() + 10
        while len(sleeps()) < 2 and time.monotonic() < deadline:
            time.sleep(0.02)
        assert len(sleeps()) == 2
    except BaseException:
        sb.close()  # nothing left for the tests after this one to find
        raise
    return sb, set(_marked())


def _no_kill(*_args: object, **_kwargs: object) -> int:
    return 0


def _disable_kills(
    monkeypatch: pytest.MonkeyPatch, *, pid_namespace: bool, last_look: bool
) -> None:
    """Turn `close()`'s kill steps into no-ops, to stand for kills that missed: the cgroup's
    (its removal kills too), the uid's, the tree's, and where asked the PID namespace's init
    and the last look's."""
    # private: the sandbox's kill steps
    from optarena.sandbox import _agent, _cgroup, _steps, _uids

    monkeypatch.setattr(_cgroup.PidsCgroup, "kill_all", _no_kill)
    monkeypatch.setattr(_cgroup, "_empty_and_remove", _no_kill)
    monkeypatch.setattr(_uids.UidLease, "kill_all", _no_kill)
    monkeypatch.setattr(_agent, "kill_tree", _no_kill)
    if pid_namespace:
        monkeypatch.setattr(_agent, "end_pid_namespace", _no_kill)
    if last_look:
        monkeypatch.setattr(_steps, "stop_then_kill", _no_kill)


def _remove_kept_cgroups() -> None:
    """End and remove this process's agent cgroups that a disabled removal kept."""
    from optarena.sandbox import _cgroup  # private: its removal, called directly

    kept = Path(CAPS.cgroup_base or "/").glob(f"{CGROUP_PREFIX}{os.getpid()}-*")
    _cgroup._empty_and_remove(list(kept))


@needs_cgroup
def test_what_every_kill_of_close_missed_is_found_and_killed_before_release(
    dirs: dict[str, Path], monkeypatch: pytest.MonkeyPatch
) -> None:
    """Each kill of `close()` trusts one thing (the PID namespace's init, the cgroup's list,
    the uid's, the tree's); should all of them miss (a leak once seen in CI, not
    understood), the look that follows asks every list again and kills what it finds."""
    sb, pids = _start_daemons(dirs)
    _disable_kills(monkeypatch, pid_namespace=True, last_look=False)
    try:
        sb.close()
        assert all(is_zombie(p) for p in pids)
        assert sb.report()["survivors"] == []
        assert not [n for n in sb.notes if "outlived" in n]
    finally:
        monkeypatch.undo()
        _remove_kept_cgroups()


@needs_cgroup
@pytest.mark.skipif(CAPS.pidns is not None, reason=f"no PID namespace: {CAPS.pidns}")
def test_the_pid_namespaces_init_killed_alone_ends_the_whole_tree(
    dirs: dict[str, Path], monkeypatch: pytest.MonkeyPatch
) -> None:
    """The first kill of `close()` is the PID namespace's init (through a pidfd): the kernel
    then ends every process inside, a detached daemon included, with no list of pids to race
    past (a traced process need not stop). Every other kill is disabled here."""
    sb, pids = _start_daemons(dirs)
    _disable_kills(monkeypatch, pid_namespace=False, last_look=True)
    try:
        sb.close()
        assert sb.report()["survivors"] == []
        assert all(is_zombie(p) for p in pids)
    finally:
        monkeypatch.undo()
        _remove_kept_cgroups()


@needs_cgroup
@pytest.mark.skipif(CAPS.pidns is not None, reason=f"no PID namespace: {CAPS.pidns}")
def test_the_namespaces_are_taken_before_the_agent_runs(dirs: dict[str, Path]) -> None:
    """The agent's first act is to make a PID namespace inside its own and leave a process in
    each. Read from /proc after the exec (without root, from the agent itself), the namespace
    optarena held could be the inner one, and the process left in the outer one in no list
    (a red team's race: 3 escapes in 12 runs under load). Now the child sends its namespaces
    before the exec: what is held is the one the holder made, and both processes are in it.
    (As root the old read went through the holder and was right too: this holds the
    guarantee here; the race itself needs a user without root.)"""
    sb = AgentSandbox(AgentSandboxPolicy(), writable=[dirs["ws"], dirs["home"]], home=dirs["home"])
    script = f"sleep {MARKER} & exec unshare -Urpf sleep {MARKER}"
    sb.spawn(["sh", "-c", script], env=dict(os.environ))
    try:
        assert sb.pid_namespace is not None
        held = sb.pid_namespace.id
        assert held == namespace_of(sb.proc.pid, "pid_for_children")  # type: ignore[union-attr]

        def inner() -> list[int]:
            return [p for p in _marked() if namespace_of(p, "pid") not in (held, None)]

        # Three processes carry the marker: the outer sleep, `unshare` (in the held namespace)
        # and its forked child in the inner one. Waiting for any two (as before) could stop
        # before the fork under load, with nothing inner yet (a CI failure).
        deadline = time.monotonic() + 30
        while not inner() and time.monotonic() < deadline:
            time.sleep(0.02)
        assert inner() and set(_marked()) <= sb.pid_namespace.pids()
    finally:
        sb.close()
    assert sb.report()["survivors"] == []


@needs_cgroup
@pytest.mark.skipif(CAPS.pidns is not None, reason=f"no PID namespace: {CAPS.pidns}")
def test_a_pid_namespace_that_could_not_be_held_still_has_its_init_killed(
    dirs: dict[str, Path], monkeypatch: pytest.MonkeyPatch
) -> None:
    """Whether its namespace could be held or not, an agent with a PID namespace has its
    init killed first (the holder's one child): every other kill disabled, the tree ends."""
    from optarena.sandbox import _agent_child  # private: how the namespaces are sent

    monkeypatch.setattr(_agent_child, "send_namespaces", lambda *_args: None)
    sb, pids = _start_daemons(dirs)
    assert sb.pid_namespace is None
    _disable_kills(monkeypatch, pid_namespace=False, last_look=True)
    try:
        sb.close()
        assert all(is_zombie(p) for p in pids)
    finally:
        monkeypatch.undo()
        _remove_kept_cgroups()


@needs_cgroup
def test_what_outlives_every_kill_is_named_in_the_report(
    dirs: dict[str, Path], monkeypatch: pytest.MonkeyPatch
) -> None:
    """The negative control: with the last look's kill disabled as well, the survivors are
    named (pid, state, command) in the report and its notes, not released silently."""
    sb, pids = _start_daemons(dirs)
    _disable_kills(monkeypatch, pid_namespace=True, last_look=True)
    try:
        sb.close()
        survivors = sb.report()["survivors"]
        assert {int(s.split()[0]) for s in survivors} >= pids
        assert all(f"sleep {MARKER}" in s for s in survivors if int(s.split()[0]) in pids)
        assert any(n.startswith("cleanup: ") and "outlived every kill" in n for n in sb.notes)
    finally:
        monkeypatch.undo()
        _remove_kept_cgroups()


# An optarena process that dies (SIGKILL, from a timer thread) while one of its sandbox's helper
# processes is slowed down in its setup: argv[1] names the function slowed (module.name), argv[2]
# whether the agent gets a PID namespace, argv[3:] the writable directories.
DYING_SPAWNER = """
import os, signal, sys, threading, time
from pathlib import Path
from optarena.sandbox import AgentSandbox, AgentSandboxPolicy, probe
from optarena.sandbox import _agent_child, _child, _linux

probe()  # cached: it forks children of its own, not to be slowed
module = {"_agent_child": _agent_child, "_child": _child, "_linux": _linux}[
    sys.argv[1].split(".")[0]
]
name = sys.argv[1].split(".")[1]
original = getattr(module, name)

def slowed(*args, **kwargs):
    time.sleep(2.0)  # in a forked child of the sandbox: its optarena is killed meanwhile
    return original(*args, **kwargs)

setattr(module, name, slowed)
policy = AgentSandboxPolicy() if sys.argv[2] == "pid" else AgentSandboxPolicy(mounts=False)
ws, home = Path(sys.argv[3]), Path(sys.argv[4])
sb = AgentSandbox(policy, writable=[ws, home], home=home)
threading.Timer(0.5, os.kill, (os.getpid(), signal.SIGKILL)).start()
sb.spawn(["sleep", sys.argv[5]], env=dict(os.environ))
time.sleep(30)
"""


@needs_cgroup
@pytest.mark.parametrize(
    ("slowed", "pid_ns"),
    [
        ("_linux.unshare", True),  # the holder (optarena's child), before it forks init
        ("_child._init", True),  # init, the holder already set up: the race seen under Ray
        ("_linux.unshare", False),  # no PID namespace: the agent's own first process
        # the arming itself late: what the check after it is for
        ("_agent_child.die_with_parent", True),  # the holder finds optarena gone
        ("_child._die_with_holder", True),  # init finds the holder gone
    ],
)
def test_an_agent_whose_optarena_dies_while_its_sandbox_starts_dies_with_it(
    dirs: dict[str, Path], slowed: str, pid_ns: bool
) -> None:
    """A `kill -9` of optarena (a Ray worker ended with its driver) while the agent's sandbox
    is still starting: each process between optarena and the agent watches its parent with a
    parent-death signal, armed before anything slow and checked against the parent it was
    forked by; armed late, after setup, it watched whatever adopted the orphan, and the agent
    ran on (an experiment's agent outlived its Ray worker under load)."""
    if pid_ns and CAPS.pidns is not None:
        pytest.skip(f"no PID namespace: {CAPS.pidns}")
    if not pid_ns and CAPS.netns is not None:
        pytest.skip(f"no unshare without a PID namespace: {CAPS.netns}")
    argv = [sys.executable, "-c", DYING_SPAWNER, slowed, "pid" if pid_ns else "none",
            str(dirs["ws"]), str(dirs["home"]), MARKER]  # fmt: skip
    said = dirs["ledger"].parent / "spawner.log"
    with open(said, "wb") as out:  # not a pipe: an orphan would hold it open
        spawner = subprocess.run(argv, stdout=out, stderr=out, timeout=60)
    try:
        assert spawner.returncode == -signal.SIGKILL, said.read_text()[-2000:]
        time.sleep(3.0)  # past the slowed step: an orphan would have started the agent by now
        deadline = time.monotonic() + 5
        while _marked() and time.monotonic() < deadline:
            time.sleep(0.05)
        assert _marked() == []
    finally:
        for pid in _marked():
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)
        sweep_agent_leftovers()  # the dead spawner's cgroup and uid lease


@needs_cgroup
def test_the_sweep_kills_what_a_dead_optarenas_agent_left(tmp_path: Path) -> None:
    base, _ = find_pids_root()
    assert base is not None
    # our own pid with a start time that is not ours: an owner that died, its pid reused
    stale = base / f"{CGROUP_PREFIX}{os.getpid()}-1-deadbeef"
    stale.mkdir()
    proc = subprocess.Popen(
        ["sleep", MARKER], preexec_fn=lambda: attach_self(str(stale / "cgroup.procs"))
    )
    try:
        # the sweep is host-wide: a test beside this one may sweep first, so what is checked
        # is the outcome (killed, its cgroup gone), not which sweep counted it
        sweep_agent_leftovers()
        assert proc.wait(timeout=5) == -signal.SIGKILL
        assert not stale.exists()
    finally:
        proc.kill()
        proc.wait()


@needs_root
def test_the_sweep_kills_processes_of_a_released_uid() -> None:
    lease = lease_uid()
    uid = lease.uid

    def drop() -> None:
        os.setgid(uid)
        os.setuid(uid)

    proc = subprocess.Popen(["sleep", MARKER], preexec_fn=drop)
    try:
        os.close(lease._fd)  # what a kill -9 of its holder does: the lock goes, the process stays
        lease._fd = -1
        time.sleep(0.05)
        sweep_agent_leftovers()  # host-wide (see above): the outcome is what is checked
        assert proc.wait(timeout=5) == -signal.SIGKILL
    finally:
        proc.kill()
        proc.wait()


def test_off_reports_every_measure_off(dirs: dict[str, Path]) -> None:
    out, sb = run_agent(dirs, "echo ran", AgentSandboxPolicy.off())
    assert out == "ran\n"
    r = sb.report()
    assert (r["enabled"], r["user"], r["network"], r["mounts"]) == (False, "off", "off", "off")
    assert r["setup_ms"] is not None and r["teardown_ms"] is not None


def test_mountinfo_lines_give_paths_and_the_flags_a_remount_must_keep() -> None:
    text = (
        "27 1 254:0 / / rw,relatime - ext4 /dev/vda rw\n"
        "28 27 0:25 / /mnt/with\\040space ro,nosuid,nodev,noexec - tmpfs t ro\n"
        "29 27 0:26 / /data rw,noatime,nodiratime - xfs /dev/b rw\n"
    )
    assert mount_points(text) == [
        ("/", 1 << 21),
        ("/mnt/with space", 2 | 4 | 8),
        ("/data", 1024 | 2048),
    ]


def test_a_missing_writable_directory_is_refused(dirs: dict[str, Path]) -> None:
    missing = dirs["ledger"] / "gone"
    with pytest.raises(AgentSandboxError, match=f"{missing} does not exist"):
        AgentSandbox(AgentSandboxPolicy(), writable=[dirs["ws"], missing])


@needs_netns
def test_a_sandbox_that_cannot_start_says_why_and_leaves_nothing(
    dirs: dict[str, Path], monkeypatch: pytest.MonkeyPatch
) -> None:
    def broken() -> None:
        raise OSError(19, "no loopback here")

    monkeypatch.setattr(_agent_child, "loopback_up", broken)  # runs in the forked child
    sb = AgentSandbox(AgentSandboxPolicy(), writable=[dirs["ws"]], hidden=[dirs["ledger"]])
    with pytest.raises(AgentSandboxError, match=r"no loopback here.*--no-agent-sandbox"):
        sb.spawn(["true"], env=dict(os.environ))
    assert sb.cgroup is None and sb.lease is None  # released on the way out
    assert dirs["ws"].stat().st_uid == os.getuid()  # and the workspace given back


def test_the_sweep_removes_the_sockets_of_a_dead_optarenas_bridge_only() -> None:
    """A `kill -9` of optarena leaves `optarena-agent-<pid>-<ticks>-<hex>/PORT.sock`: removed
    once its owner is gone; a live owner's, an unattributable name and a directory holding
    anything but sockets are left alone."""
    dead = subprocess.Popen(["true"])
    dead.wait()
    tmp_path = Path(tempfile.mkdtemp(prefix="oa-"))  # short: a socket's path has a limit

    def bridge(name: str, extra: str | None = None) -> Path:
        d = tmp_path / name
        d.mkdir()
        s = socket.socket(socket.AF_UNIX)
        s.bind(str(d / "4242.sock"))
        s.close()
        if extra:
            (d / extra).write_text("not ours to remove")
        return d

    gone = bridge(f"{CGROUP_PREFIX}{dead.pid}-1-aaaa")
    live = bridge(owned_name())
    legacy = bridge(f"{CGROUP_PREFIX}k3x9q2")  # mkdtemp's name: nobody can say whose
    odd = bridge(f"{CGROUP_PREFIX}{dead.pid}-1-bbbb", extra="notes.txt")
    assert sweep_agent_sockets([tmp_path]) == 1
    assert not gone.exists() and live.exists() and legacy.exists()
    assert (odd / "notes.txt").exists() and not (odd / "4242.sock").exists()
    shutil.rmtree(tmp_path)


@needs_netns
def test_a_bridges_socket_directory_names_its_owner_and_goes_with_the_sandbox(
    dirs: dict[str, Path], listen: Listen
) -> None:
    proxy = listen()
    base = socket_bases()[0]
    script = f"ls {base}; test -S {base}/optarena-agent-*/{proxy.port}.sock && echo bridged"
    out, sb = run_agent(dirs, script, ports=(proxy.port,))
    assert sb.sockets is not None and sb.sockets.name.startswith(f"{CGROUP_PREFIX}{os.getpid()}-")
    assert not sb.sockets.exists()
    if CAPS.private_root is None:  # of the host's /run, only its own bridge
        seen = out.split()  # of the host's bridges, only its own
        assert [w for w in seen if w.startswith(CGROUP_PREFIX)] == [sb.sockets.name], out
        assert seen[-1] == "bridged", out


@needs_mounts
def test_without_a_private_root_the_hidden_list_still_holds(
    dirs: dict[str, Path], monkeypatch: pytest.MonkeyPatch
) -> None:
    """Where the kernel refuses a private root (pivot_root), the agent still runs: read-only
    everywhere but its directories, the ledger and /run hidden by name, and the report says
    that only what was listed is hidden."""
    # private: monkeypatched (a refused private root)
    from optarena.sandbox import _agent

    caps = replace(CAPS, private_root="pivot_root: refused here")
    monkeypatch.setattr(_agent, "probe", lambda: caps)
    script = f"""
        echo ok > {dirs["ws"]}/solution.py && echo ws-written
        cat {dirs["other"]}/solution.py 2>/dev/null || echo other-unreadable
        ls /run | wc -l
    """
    out, sb = run_agent(dirs, script)
    assert out.split() == ["ws-written", "other-unreadable", "0"], out
    report = sb.report()
    assert report["mounts"].startswith("read-only but for the writable directories")
    assert report["visible"] is None and str(dirs["ledger"]) in report["hidden"]
    assert any("no private root" in n for n in report["notes"])
