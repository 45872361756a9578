"""Hostile `command` agents in real trials: each attempt on what the agent must not touch
fails, the trial is recorded, a following trial is judged by the intact judge, and nothing the
agent started survives. An honest agent (edits solution.py, runs numpy, calls the proxy it was
given) is unaffected. (Editing the installed judge: test_trials_tamper.py.)"""

from __future__ import annotations

import http.server
import os
import threading
from collections.abc import Callable, Iterator
from dataclasses import replace
from pathlib import Path

import pytest

from optarena.agents import RunContext
from optarena.judge import verify_judge
from optarena.ledger import Ledger
from optarena.records import AgentLimits, TrialRecord
from optarena.sandbox import probe
from optarena.tasks import Task
from optarena.trials import TrialConfig, TrialHook, run_trial

Trial = Callable[..., TrialRecord]
Agent = Callable[[str], str]
# `sleep 3232.5N`: this file's agents' processes, easy to find in /proc (N: the xdist worker,
# so a test checks for its own leftovers, never those of a test running beside it)
MARKER = f"3232.5{os.environ.get('PYTEST_XDIST_WORKER', 'gw')[2:]}"
CAPS = probe()
contained = pytest.mark.skipif(
    CAPS.mountns is not None or CAPS.netns is not None,
    reason=f"the agent sandbox needs mount and network namespaces ({CAPS.mountns or CAPS.netns})",
)
pytestmark = contained


@pytest.fixture(autouse=True)
def nothing_survives(find_pids: Callable[[str], list[int]]) -> Iterator[None]:
    yield
    assert find_pids(MARKER) == [], "a process of the agent outlived its trial"


@pytest.fixture
def judged_intact(trial: Trial, agent: Agent, control: Callable[[str], Path]) -> Callable[[], None]:
    """A following trial delivering zeros is rejected by the judge, which verifies itself."""

    def check() -> None:
        verify_judge()
        rec = trial(agent(f"cp {control('zeros')}/solution.py solution.py"))
        assert rec.verdict == "rejected" and "out_of_tolerance" in rec.reason_codes
        assert "judge_tampered" not in rec.reason_codes

    return check


def _contained(rec: TrialRecord) -> None:
    assert rec.state == "complete" and rec.agent_sandbox is not None
    assert rec.agent_sandbox["enabled"] is True
    assert rec.agent_sandbox["mounts"].startswith(("private root", "read-only"))
    assert rec.agent_sandbox["network"].startswith("netns")
    assert rec.outside_changes == []


def _log(ledger: Ledger, rec: TrialRecord, name: str = "stdout.log") -> str:
    return ledger.store.read_text(rec.artifacts[f"logs/{name}"])


def attempts(**tries: str) -> str:
    """A shell body running each Python statement as one attempt, printing 'NAME done' or
    'NAME denied' (what the agent saw; the tests assert on what actually happened)."""
    lines = ["python3 - <<'EOF'", "import os, shutil, sqlite3"]
    for name, stmt in tries.items():
        lines += [
            "try:",
            f"    {stmt}",
            f"    print({name!r}, 'done')",
            "except Exception:",
            f"    print({name!r}, 'denied')",
        ]
    return "\n".join([*lines, "EOF", ""])


def test_the_ledger_database_cannot_be_changed(
    trial: Trial, agent: Agent, ledger: Ledger, judged_intact: Callable[[], None]
) -> None:
    first = trial(agent("true"))
    db = str(ledger.db_path)
    body = attempts(
        sql=f"sqlite3.connect({db!r}).executescript('DROP TRIGGER trials_kept; "
        "DELETE FROM trials')",
        overwrite=f"open({db!r}, 'wb').write(b'garbage')",
        delete=f"os.unlink({db!r})",
        rename=f"os.rename({db!r}, {db!r} + '.old')",
    )
    rec = trial(agent(body))
    _contained(rec)
    log = _log(ledger, rec)
    assert ledger.get(first.id) == first and ledger.db_path.is_file(), log
    assert ledger._conn.execute("SELECT COUNT(*) FROM trials").fetchone()[0] == 2
    judged_intact()


def test_the_artifact_store_cannot_be_written(
    trial: Trial, agent: Agent, ledger: Ledger, judged_intact: Callable[[], None]
) -> None:
    first = trial(agent("echo first"))
    sha = first.artifacts["logs/stdout.log"]
    stored = str(ledger.store.path(sha))
    planted = str(ledger.store.path(sha).parent / "planted")
    body = attempts(
        overwrite=f"open({stored!r}, 'w').write('forged')",
        plant=f"open({planted!r}, 'w').write('planted')",
        chmod=f"os.chmod({stored!r}, 0o666)",
        delete=f"os.unlink({stored!r})",
    )
    rec = trial(agent(body))
    _contained(rec)
    log = _log(ledger, rec)
    assert ledger.store.read_text(sha) == "first\n", log  # read_text checks it against its name
    assert not Path(planted).exists() and os.stat(stored).st_mode & 0o022 == 0
    judged_intact()


@pytest.mark.parametrize("outside", [False, True], ids=["in-ledger", "own-workspace-dir"])
def test_another_trials_workspace_cannot_be_read(
    trial: Trial,
    agent: Agent,
    ledger: Ledger,
    control: Callable[[str], Path],
    tmp_path: Path,
    outside: bool,
    judged_intact: Callable[[], None],
) -> None:
    kw = {"workspace": tmp_path / "elsewhere"} if outside else {}
    first = trial(agent(f"cp {control('optimized')}/solution.py solution.py"), **kw)
    theirs = Path(first.workspace)
    stolen = '"$OPTARENA_LOGS_DIR/stolen"'
    body = (
        f"cat {theirs}/solution.py > {stolen} 2>/dev/null || true\n"
        f"ls {theirs} {ledger.home}/work >> {stolen} 2>/dev/null || true\n"
        f"cat {ledger.db_path} >> {stolen} 2>/dev/null || true\n"
    )
    rec = trial(agent(body))
    _contained(rec)
    stolen_text = _log(ledger, rec, "stolen")
    secret = (control("optimized") / "solution.py").read_text()
    # its own trial directory shows (the way to its workspace), nothing else of the ledger
    assert secret not in stolen_text and first.id not in stolen_text, stolen_text
    assert "SQLite format" not in stolen_text
    assert str(theirs) in rec.agent_sandbox["hidden"] or outside is False
    judged_intact()


def test_the_task_package_cannot_be_read(trial: Trial, agent: Agent, ledger: Ledger) -> None:
    """Its controls hold a known-good `optimized` solution, its oracle the reference: the
    agent finds the package through the installed optarena, and finds it empty."""
    find = "python3 -c 'import optarena.tasks as t; print(t.BUILTIN_DIR)'"
    body = (
        f'tasks="$({find})"; echo "found $tasks"\n'
        'cat "$tasks/rmsnorm/controls/optimized/solution.py" "$tasks/rmsnorm/oracle.py" || true\n'
        'ls "$tasks/rmsnorm" | wc -l\n'
    )
    rec = trial(agent(body))
    _contained(rec)
    log = _log(ledger, rec)
    assert "found /" in log and "def rmsnorm" not in log and "def reference" not in log, log
    assert log.splitlines()[-1].strip() == "0", log


def test_the_task_package_and_oracle_cannot_be_edited(
    ledger: Ledger,
    agent: Agent,
    task_copy: Callable[..., Task],
    control: Callable[[str], Path],
    judged_intact: Callable[[], None],
) -> None:
    task = task_copy("rmsnorm")  # a copy: a failed defence must not damage the built-in task
    before = {p: p.read_bytes() for p in task.root.rglob("*") if p.is_file()}
    root = str(task.root)
    body = (
        attempts(
            oracle=f"open({root!r} + '/oracle.py', 'w').write('def reference(x, w, *, eps):\\n"
            "    return x * 0\\n')",
            spec=f"open({root!r} + '/task.toml', 'a').write('# more')",
            baseline=f"shutil.rmtree({root!r} + '/baseline')",
        )
        + f"cp {control('zeros')}/solution.py solution.py\n"
    )
    config = TrialConfig(
        task=task, agent="command", agent_args={"command": agent(body)}, measure=False
    )
    rec = run_trial(config, ledger)
    _contained(rec)
    log = _log(ledger, rec)
    assert {p: p.read_bytes() for p in task.root.rglob("*") if p.is_file()} == before, log
    # judged by the real oracle: zeros are wrong
    assert rec.verdict == "rejected" and "out_of_tolerance" in rec.reason_codes
    judged_intact()


class Server:
    """An HTTP server on the host's 127.0.0.1 that counts requests (a proxy, or a bystander)."""

    def __init__(self) -> None:
        outer = self
        self.requests = 0

        class Handler(http.server.BaseHTTPRequestHandler):
            def do_GET(self) -> None:
                outer.requests += 1
                self.send_response(200)
                self.send_header("Content-Length", "2")
                self.end_headers()
                self.wfile.write(b"ok")

            def log_message(self, *args: object) -> None:
                pass

        self.httpd = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.port = self.httpd.server_address[1]
        threading.Thread(target=self.httpd.serve_forever, daemon=True).start()

    def close(self) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()


class Proxy(TrialHook):
    """Stands in for the metering proxy: a port on the host's loopback the agent may reach."""

    def __init__(self, server: Server) -> None:
        self.server = server

    def before_agent(self, context: RunContext) -> RunContext:
        return replace(
            context,
            env={**context.env, "PROXY_URL": f"http://127.0.0.1:{self.server.port}"},
            proxy_ports=(*context.proxy_ports, self.server.port),
        )


@pytest.fixture
def servers() -> Iterator[tuple[Server, Server]]:
    proxy, bystander = Server(), Server()
    yield proxy, bystander
    proxy.close()
    bystander.close()


FETCH = """python3 - {url} <<'EOF'
import sys, urllib.request
try:
    print(urllib.request.urlopen(sys.argv[1], timeout=3).read().decode())
except OSError as e:
    print("unreachable")
EOF
"""


def test_no_host_listener_but_the_proxy_is_reachable(
    ledger: Ledger,
    rmsnorm: Task,
    agent: Agent,
    servers: tuple[Server, Server],
    judged_intact: Callable[[], None],
) -> None:
    proxy, bystander = servers
    body = (
        FETCH.format(url=f"http://127.0.0.1:{bystander.port}/")
        + FETCH.format(url=f"http://localhost:{bystander.port}/")
        + FETCH.format(url="http://192.0.2.1/")
        + FETCH.format(url='"$PROXY_URL/v1/models"')
    )
    config = TrialConfig(
        task=rmsnorm,
        agent="command",
        agent_args={"command": agent(body), "meter": "false"},  # `proxy` stands in for it
        measure=False,
    )
    rec = run_trial(config, ledger, hooks=[Proxy(proxy)])
    _contained(rec)
    assert _log(ledger, rec).split() == ["unreachable", "unreachable", "unreachable", "ok"]
    assert (bystander.requests, proxy.requests) == (0, 1)
    assert rec.agent_sandbox["ports"] == [proxy.port]
    judged_intact()


def test_a_setsid_daemon_does_not_outlive_the_trial(
    trial: Trial, agent: Agent, judged_intact: Callable[[], None]
) -> None:
    # double fork out of a new session: orphaned at once, no parent link back to the agent
    rec = trial(agent(f"setsid sh -c 'sleep {MARKER} &' &\nsleep 0.3"))
    _contained(rec)
    assert rec.agent_status == "completed" and rec.agent_sandbox["cleanup"] == "cgroup"
    judged_intact()  # and nothing_survives checks the daemon is gone


BOMB = f"""python3 - <<'EOF'
import os
n = 0
for _ in range(400):
    try:
        pid = os.fork()
    except OSError:
        break
    if pid == 0:
        os.execvp("sleep", ["sleep", "{MARKER}"])
    n += 1
print("forked", n)
EOF
"""


def test_a_fork_bomb_is_capped_and_ended(
    ledger: Ledger, rmsnorm: Task, agent: Agent, judged_intact: Callable[[], None]
) -> None:
    config = TrialConfig(
        task=rmsnorm,
        agent="command",
        agent_args={"command": agent(BOMB)},
        limits=AgentLimits(wall_s=30, max_processes=64),
        measure=False,
    )
    rec = run_trial(config, ledger)
    _contained(rec)
    forked = int(_log(ledger, rec).split()[1])
    assert 0 < forked < 64  # pids.max, not 400
    assert "pids.max=64" in rec.agent_sandbox["processes"]
    judged_intact()


def test_an_honest_agent_is_unaffected(
    ledger: Ledger,
    rmsnorm: Task,
    agent: Agent,
    control: Callable[[str], Path],
    servers: tuple[Server, Server],
) -> None:
    body = (
        f"cp {control('optimized')}/solution.py solution.py\n"
        "python3 -c 'import numpy; print(numpy.ones(3).sum())'\n"
        "git status --short\n" + FETCH.format(url='"$PROXY_URL/v1/models"')
    )
    proxy, _ = servers
    config = TrialConfig(
        task=rmsnorm,
        agent="command",
        agent_args={"command": agent(body), "meter": "false"},  # `proxy` stands in for it
        measure=False,
    )
    rec = run_trial(config, ledger, hooks=[Proxy(proxy)])
    _contained(rec)
    logs = {n: _log(ledger, rec, n) for n in ("stdout.log", "stderr.log")}
    assert (rec.agent_status, rec.verdict) == ("completed", "accepted"), (rec.error, logs)
    assert _log(ledger, rec).split() == ["3.0", "M", "solution.py", "ok"]
    assert proxy.requests == 1
    sb = rec.agent_sandbox
    if CAPS.root:
        assert sb["user"].startswith("uid ") and sb["cleanup"] == "cgroup"
    assert sb["setup_ms"] is not None and sb["teardown_ms"] is not None
    assert Path(rec.workspace, "solution.py").stat().st_uid == os.getuid()


def test_no_agent_sandbox_is_recorded_as_such(trial: Trial, agent: Agent) -> None:
    rec = trial(agent("id -u"), agent_sandbox=False)
    assert rec.agent_sandbox == {
        "enabled": False,
        "notes": [
            f"--no-agent-sandbox: the agent ran as uid {os.getuid()} with everything that user "
            "may do (the installed judge, the ledger, other trials, the network)"
        ],
    }
