"""What no sandbox reaches: the source repository, other ledgers and trials, the invoking
user's secrets, the host's sockets, by any path (a world-readable directory nobody listed, a
second mount, a hard link, /proc of another process, a variable naming it, a guessed pattern).

Each attack runs as a shell script in the three places optarena runs code it did not write:
the agent's sandbox, a candidate's worker sandbox, and `harness._contained` (a built verifier
or MCP server). The secrets live in a world-readable tree beside the checkout (not under /tmp,
/run or a home, which older defences hid by name), so only a default-deny root keeps them out.
"""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
import sys
import tempfile
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from optarena.sandbox import (
    AgentSandbox,
    AgentSandboxPolicy,
    ResourceLimits,
    Sandbox,
    SandboxPolicy,
    probe,
)

CAPS = probe()
CHECKOUT = Path(__file__).resolve().parents[2]
SECRET = "TOPSECRET-optarena-reach"
pytestmark = pytest.mark.skipif(
    CAPS.private_root is not None, reason=f"no private root: {CAPS.private_root}"
)
needs_root = pytest.mark.skipif(not CAPS.root, reason="needs root (a host bind mount)")
LIMITS = ResourceLimits(address_space_mb=2048, cpu_s=30, file_size_mb=16, processes=32)


@dataclass
class Outside:
    """A world-readable tree outside every sandbox: what must stay out of reach."""

    base: Path
    repo: Path  # an external task's source repository, later commits and all
    ledger: Path  # the ledger of this run (hidden by name) ...
    other_ledger: Path  # ... and another one nobody named
    work: Path  # where the sandbox's own directories are

    def secret_in(self, path: Path) -> Path:
        path.mkdir(parents=True, exist_ok=True)
        f = path / "secret.txt"
        f.write_text(SECRET)
        return f


@pytest.fixture
def outside() -> Iterator[Outside]:
    base = Path(tempfile.mkdtemp(prefix=".reach-test-", dir=CHECKOUT))
    os.chmod(base, 0o755)
    o = Outside(
        base=base,
        repo=base / "home" / "user" / "project",
        ledger=base / "ledger",
        other_ledger=base / "home" / "user" / ".local" / "share" / "optarena",
        work=base / "ledger" / "work" / "t1",
    )
    o.secret_in(o.repo / ".git")
    o.secret_in(o.ledger)
    o.secret_in(o.other_ledger / "work" / "t0" / "workspace")
    for d in ("workspace", "home"):
        (o.work / d).mkdir(parents=True)
    for root, dirs, files in os.walk(base):  # world-readable, as a home often is
        for name in dirs:
            os.chmod(os.path.join(root, name), 0o755)
        for name in files:
            os.chmod(os.path.join(root, name), 0o644)
    yield o
    shutil.rmtree(base)


Runner = Callable[[Outside, str, dict[str, str]], str]
Listen = Callable[..., Any]  # the `listen` fixture (tests/sandbox/conftest.py)


def _run_to_end(sb: AgentSandbox | Sandbox, argv: list[str], env: dict[str, str], log: Path) -> str:
    """Run `argv` in `sb` to its end; what it printed."""
    with open(log, "wb") as f:
        proc = sb.spawn(argv, env=env, stdout=f, stderr=f)
    try:
        proc.wait(timeout=60)
    finally:
        sb.close()
    return log.read_text()


def _agent(o: Outside, script: str, env: dict[str, str], user: bool = True) -> str:
    ws, home = o.work / "workspace", o.work / "home"
    policy = AgentSandboxPolicy(user=user)
    sb = AgentSandbox(policy, writable=[ws, home], hidden=[o.ledger], home=home)
    return _run_to_end(sb, ["sh", "-c", script], {**os.environ, **env}, o.base / "agent.log")


def _worker(o: Outside, script: str, env: dict[str, str]) -> str:
    sb = Sandbox(o.work / "workspace", LIMITS, SandboxPolicy(), hide=[o.ledger])
    env = {"PATH": os.environ["PATH"], **env}
    return _run_to_end(sb, ["/bin/sh", "-c", script], env, o.base / "worker.log")


def _contained(o: Outside, script: str, env: dict[str, str]) -> str:
    ws = o.work / "workspace"
    wrapper = [sys.executable, "-m", "optarena.harness._contained", "--writable", str(ws)]
    r = subprocess.run(
        [*wrapper, "--", "sh", "-c", script],
        env={**os.environ, **env},
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    return r.stdout + r.stderr + ("" if r.returncode == 0 else f"\n[exit {r.returncode}]")


WHERE: dict[str, Runner] = {"agent": _agent, "worker": _worker, "contained": _contained}
where = pytest.mark.parametrize("run", list(WHERE.values()), ids=list(WHERE))


@where
def test_a_world_readable_source_repository_is_absent(outside: Outside, run: Runner) -> None:
    repo = outside.repo
    out = run(outside, f"cat {repo}/.git/secret.txt; ls {repo.parent} 2>&1; echo done", {})
    assert SECRET not in out and "\nproject\n" not in out and "done" in out, out


@where
def test_another_ledger_named_by_an_inherited_variable_is_absent(
    outside: Outside, run: Runner
) -> None:
    env = {"OPTARENA_LEDGER": str(outside.other_ledger)}
    out = run(outside, 'cat "$OPTARENA_LEDGER"/work/*/workspace/secret.txt; echo done', env)
    assert SECRET not in out and "done" in out, out


@where
def test_another_trials_workspace_found_by_its_path_pattern_is_absent(
    outside: Outside, run: Runner
) -> None:
    """From its own workspace `<ledger>/work/<id>/workspace`, the pattern names every other
    trial: `../../*/workspace`, and the same pattern in a sibling ledger."""
    ws = outside.work / "workspace"
    script = (
        f"cd {ws}; cat ../../*/workspace/secret.txt ../../../../*/work/*/workspace/*; echo done"
    )
    out = run(outside, script, {})
    assert SECRET not in out and "done" in out, out


@where
def test_a_hard_link_to_a_hidden_file_is_absent(outside: Outside, run: Runner) -> None:
    """The ledger is hidden by name; a hard link to its file elsewhere is the same inode."""
    link = outside.base / "innocent.txt"
    os.link(outside.ledger / "secret.txt", link)
    out = run(outside, f"cat {link}; echo done", {})
    assert SECRET not in out and "done" in out, out


@needs_root
@where
def test_a_second_mount_of_a_hidden_directory_is_absent(outside: Outside, run: Runner) -> None:
    """The host mounts the hidden ledger a second time (a bind, a container volume): the
    sandbox's mountinfo would name it, and hiding the first path leaves the second."""
    mirror = outside.base / "mirror"
    mirror.mkdir()
    subprocess.run(["mount", "--bind", str(outside.ledger), str(mirror)], check=True)
    try:
        script = (
            "for m in $(awk '{print $5}' /proc/self/mountinfo); do "
            'cat "$m/secret.txt" 2>/dev/null; done; '
            f"cat {mirror}/secret.txt; echo done"
        )
        out = run(outside, script, {})
    finally:
        subprocess.run(["umount", "-l", str(mirror)], check=True)
    assert SECRET not in out and "done" in out, out


@where
def test_a_socket_in_a_directory_nobody_listed_is_unreachable(
    outside: Outside, run: Runner, listen: Listen
) -> None:
    path = outside.base / "daemon.sock"
    daemon = listen(socket.AF_UNIX, str(path))
    os.chmod(path, 0o777)
    out = run(outside, _connect(str(path)), {})
    assert out.splitlines()[-1] == "refused" and daemon.accepted == 0, out


@needs_root
@where
def test_a_socket_under_dev_or_var_run_is_unreachable(
    outside: Outside, run: Runner, listen: Listen
) -> None:
    """/dev is the host's (devices stay usable), /var/run is /run: neither carries a socket in."""
    name = outside.base.name
    for path in (f"/dev/{name}.sock", f"/run/{name}.sock"):
        daemon = listen(socket.AF_UNIX, path)
        os.chmod(path, 0o777)
        out = run(outside, _connect(path.replace("/run/", "/var/run/")), {})
        assert out.splitlines()[-1] == "refused" and daemon.accepted == 0, (path, out)


IN_PROCESS = pytest.mark.parametrize("run", [_agent, _worker], ids=["agent", "worker"])


def _after_the_plan(monkeypatch: pytest.MonkeyPatch, act: Callable[[], None]) -> None:
    """Run `act` between the sandbox's plan of its root and its start (what another process
    on the host may do at that moment)."""
    # private: monkeypatched (the plan of the root, then a host change)
    from optarena.sandbox import _agent, _sandbox

    for module in (_agent, _sandbox):
        planned = module.private_root

        def plan_then_act(*args: Any, _planned: Any = planned, **kwargs: Any) -> Any:
            plan = _planned(*args, **kwargs)
            act()
            return plan

        monkeypatch.setattr(module, "private_root", plan_then_act)


@needs_root
@IN_PROCESS
def test_a_socket_made_in_dev_after_the_plan_is_unreachable(
    outside: Outside, run: Runner, listen: Listen, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A daemon's socket (or FIFO, or device) appearing in /dev while a sandbox starts: /dev
    is built device by device, so nothing of the host's /dev shows that was not named."""
    path = f"/dev/{outside.base.name}.sock"
    daemons: list[Any] = []

    def start() -> None:
        daemons.append(listen(socket.AF_UNIX, path))
        os.chmod(path, 0o777)

    _after_the_plan(monkeypatch, start)
    out = run(outside, f"ls -A /dev; {_connect(path)}", {})
    assert out.splitlines()[-1] == "refused" and daemons[0].accepted == 0, out
    assert "kmsg" not in out.split() and "null" in out.split(), out


@where
def test_an_abstract_socket_is_unreachable(outside: Outside, run: Runner, listen: Listen) -> None:
    """An abstract Unix socket has no file: it belongs to a network namespace."""
    daemon = listen(socket.AF_UNIX, "\0" + outside.base.name)
    out = run(outside, _connect("@" + outside.base.name), {})
    assert out.splitlines()[-1] == "refused" and daemon.accepted == 0, out


def test_the_invoking_users_ssh_directory_is_absent(outside: Outside) -> None:
    """~/.ssh of the user who started optarena, whoever the agent runs as."""
    ssh = Path(os.path.expanduser("~")) / ".ssh"
    if not ssh.is_dir():
        pytest.skip(f"{ssh} does not exist here")
    for user in (True, False):
        out = _agent(outside, f"ls -A {ssh} && echo listed; echo done", {}, user=user)
        assert "listed" not in out and "done" in out, (user, out)


@pytest.mark.parametrize("through", ["cwd", "root"])
def test_proc_of_a_process_outside_leads_nowhere(outside: Outside, through: str) -> None:
    """A host process of the agent's own uid (optarena not root, or an agent left as root):
    /proc/PID/cwd and /proc/PID/root walk into its view of the host, mounts or not."""
    host = subprocess.Popen(["sleep", "60"], cwd=outside.repo / ".git")
    try:
        path = "secret.txt" if through == "cwd" else f"{outside.repo}/.git/secret.txt"
        script = f"cat /proc/{host.pid}/{through}/{path}; echo done"
        out = _agent(outside, script, {}, user=False)
    finally:
        host.kill()
        host.wait()
    assert SECRET not in out and "done" in out, out


# --- helpers ----------------------------------------------------------------------------


def _connect(address: str) -> str:
    """A script that prints `connected` or `refused` as its last line."""
    target = repr("\0" + address[1:]) if address.startswith("@") else repr(address)
    code = (
        "import socket\n"
        "s = socket.socket(socket.AF_UNIX)\n"
        "try:\n"
        f"    s.connect({target}); print('connected')\n"
        "except OSError:\n"
        "    print('refused')\n"
    )
    return f"{sys.executable} -c {_quote(code)}"


def _quote(text: str) -> str:
    return "'" + text.replace("'", "'\"'\"'") + "'"


@where
def test_a_relative_path_entry_shows_nothing_of_optarenas_working_directory(
    outside: Outside, run: Runner, monkeypatch: pytest.MonkeyPatch
) -> None:
    """`.` on PATH names optarena's working directory (often the project itself) outside the
    sandbox: it must not become a directory the sandbox shows."""
    monkeypatch.chdir(outside.repo)
    monkeypatch.setenv("PATH", f".:bin:{os.environ['PATH']}")
    out = run(outside, f"cat {outside.repo}/.git/secret.txt; echo done", {})
    assert SECRET not in out and "done" in out, out
