"""The Ray executor on a real two-node cluster (the `cluster` fixture): the example experiment
compares as it does locally; a node killed mid-agent and a driver killed with `kill -9` each
leave their attempt on record and the key run again, nothing recorded twice; an agent on a node
reaches neither the driver's ledger nor Ray; a cluster that would run agents beside judging is
refused."""

from __future__ import annotations

import contextlib
import json
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from local_cluster import LocalCluster

from optarena.experiments import compare_experiment, experiment_state, freeze, load_plan
from optarena.ledger import Ledger
from optarena.records import TrialRecord

# one cluster per module, so every test of it runs on one xdist worker (two clusters would share
# fixed ports and two cores)
pytestmark = [pytest.mark.slow, pytest.mark.xdist_group("ray-cluster")]
pytest.importorskip("ray")

EXAMPLE = Path(__file__).parents[3] / "examples" / "experiment"
BUILD = Path(__file__).parents[3] / "build" / "test-ledgers"
OPTARENA = [sys.executable, "-m", "optarena"]

# An agent that looks for what a contained agent must not reach on a Ray node, says what it
# found on stdout, then works for AGENT_SLEEP seconds.
PROBING_AGENT = """
import json, os, socket, sys, time
seen = {
    "driver_ledger": os.path.exists(os.path.join(os.environ["PROBE_LEDGER"], "ledger.db")),
    "ray_temp": os.path.exists(os.path.join(os.environ["PROBE_RAY_TEMP"], "ray_current_cluster")),
    "ray_env": sorted(k for k, v in os.environ.items() if k.startswith("RAY_") and v),
}
host, port = os.environ["PROBE_GCS"].rsplit(":", 1)
try:
    socket.create_connection((host, int(port)), timeout=2).close()
    seen["gcs"] = True
except OSError:
    seen["gcs"] = False
print(json.dumps(seen), flush=True)
time.sleep(float(os.environ["AGENT_SLEEP"]))
"""


def _probing_plan(tmp_path: Path, cluster: LocalCluster, home: Path, sleep_s: float) -> Path:
    (tmp_path / "agent.py").write_text(PROBING_AGENT)
    env = {
        "PROBE_LEDGER": str(home),
        "PROBE_RAY_TEMP": str(cluster.temp),
        "PROBE_GCS": cluster.address,
        "AGENT_SLEEP": str(sleep_s),
    }
    inline = ", ".join(f'{k} = "{v}"' for k, v in env.items())
    conditions = "".join(
        f"""
[[conditions]]
name = "{name}"
agent = "command"
command = "python3 {{plan_dir}}/agent.py {{workspace}}"
env = {{ {inline} }}
"""
        for name in ("a", "b")
    )
    path = tmp_path / "plan.toml"
    path.write_text(
        f"""
[experiment]
name = "ray-faults"
repetitions = 1
tasks = ["rmsnorm"]
retries = 2

[judge]
measure = false
{conditions}"""
    )
    freeze(load_plan(path))
    return path


def _driver(cluster: LocalCluster, plan: Path, home: Path, *extra: str) -> list[str]:
    return [
        *OPTARENA, "experiment", "run", str(plan), "--ledger", str(home), "--executor", "ray",
        "--ray-address", cluster.address, "--judge-nodes", "shared", *extra,
    ]  # fmt: skip


def _run(cluster: LocalCluster, argv: list[str]) -> subprocess.CompletedProcess[str]:
    return subprocess.run(argv, env=cluster.env, capture_output=True, text=True, timeout=300)


@contextlib.contextmanager
def _background(cluster: LocalCluster, plan: Path, home: Path) -> Iterator[subprocess.Popen[str]]:
    """A driver running while the test acts on the cluster; killed if the test leaves early."""
    driver = subprocess.Popen(
        _driver(cluster, plan, home), env=cluster.env, stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE, text=True,
    )  # fmt: skip
    try:
        yield driver
    finally:
        if driver.poll() is None:
            driver.kill()
        driver.communicate()


def _said(driver: subprocess.Popen[str]) -> str:
    return driver.stderr.read()[-3000:] if driver.stderr else ""


def _status(plan: Path, home: Path, *extra: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [*OPTARENA, "experiment", "status", str(plan), "--ledger", str(home), *extra],
        capture_output=True, text=True, timeout=120,
    )  # fmt: skip


def _rows(plan: Path, home: Path) -> dict[str, list[TrialRecord]]:
    with Ledger.open(home) as led:
        return experiment_state(load_plan(plan), led).rows


def _wait_running(plan: Path, home: Path, count: int, node: str | None = None) -> None:
    """Until `count` keys' rows are running (on `node`, when given)."""
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline:
        if home.joinpath("ledger.db").is_file():
            running = [
                r
                for rs in _rows(plan, home).values()
                for r in rs
                if r.state == "running"
                and (node is None or r.labels.get("node", "").endswith(node))
            ]
            if len(running) >= count:
                return
        time.sleep(0.2)
    raise AssertionError(f"never {count} running rows")


def _outcome(plan: Path, home: Path) -> dict[str, list[tuple[str, str]]]:
    """key -> (state, attempt label) of its rows, oldest first."""
    return {
        k: sorted((r.labels.get("attempt", "?"), r.state) for r in rs)
        for k, rs in _rows(plan, home).items()
    }


def test_the_example_on_a_cluster_compares_as_it_does_locally(
    ray_cluster: LocalCluster, tmp_path: Path
) -> None:
    plan_dir = tmp_path / "example"
    shutil.copytree(EXAMPLE, plan_dir)
    path = plan_dir / "plan.toml"
    path.write_text(path.read_text().replace("budget_s = 4", "measure = false"))
    freeze(load_plan(path))
    local, on_ray = tmp_path / "local", tmp_path / "ray"
    for argv, env in (
        ([*OPTARENA, "experiment", "run", str(path), "--ledger", str(local), "--max-parallel",
          "3"], None),
        (_driver(ray_cluster, path, on_ray), ray_cluster.env),
    ):  # fmt: skip
        done = subprocess.run(argv, env=env, capture_output=True, text=True, timeout=300)
        assert done.returncode == 0, done.stderr[-3000:]
    out = {}
    for home in (local, on_ray):
        with Ledger.open(home) as led:
            comparison = compare_experiment(experiment_state(load_plan(path), led))
        out[home] = comparison
    here, there = out[local], out[on_ray]
    assert [(r.task, r.condition, r.repetition, r.outcome, r.verdict) for r in here.trials] == [
        (r.task, r.condition, r.repetition, r.outcome, r.verdict) for r in there.trials
    ]
    assert [(c.treatment, c.verdict, c.correctness_diff) for c in here.comparisons] == [
        (c.treatment, c.verdict, c.correctness_diff) for c in there.comparisons
    ]
    assert {r.identity for r in here.trials} == {r.identity for r in there.trials}
    with Ledger.open(on_ray) as led:
        rows = [r for r in led.trials(limit=None)]
        for r in rows:
            assert r.labels["executor"] == "ray" and "/" in r.labels["node"]
            assert not r.labels["judge_node"].endswith(ray_cluster.node_id[:8])  # no judge slot
            assert r.agent_sandbox is not None and str(on_ray) in r.agent_sandbox["hidden"]
            for sha in r.artifacts.values():  # everything shipped home, checked on arrival
                assert led.store.has(sha)
            assert len(led.judgements(r.id)) == 1


def test_an_agent_on_a_node_reaches_neither_the_driver_nor_ray(
    ray_cluster: LocalCluster, tmp_path: Path
) -> None:
    # The driver's ledger outside the private /tmp of every sandbox and readable by any uid
    # (as a ledger under a non-root user's home is to that user's agents): only hiding it
    # keeps an agent on a node of the driver's machine from reading every trial.
    BUILD.mkdir(parents=True, exist_ok=True)
    home = Path(tempfile.mkdtemp(prefix="ray-ledger-", dir=BUILD))
    home.chmod(0o755)
    try:
        plan = _probing_plan(tmp_path, ray_cluster, home, 0)
        done = _run(ray_cluster, _driver(ray_cluster, plan, home))
        assert done.returncode == 0, done.stderr[-3000:]
        with Ledger.open(home) as led:
            for r in led.trials(limit=None):
                seen = json.loads(led.store.read_text(r.artifacts["logs/stdout.log"]))
                nothing = {"driver_ledger": False, "ray_temp": False, "ray_env": [], "gcs": False}
                assert seen == nothing
    finally:
        shutil.rmtree(home, ignore_errors=True)


def test_a_node_killed_during_an_agent_loses_that_attempt_only(
    ray_cluster: LocalCluster, tmp_path: Path
) -> None:
    home = tmp_path / "ledger"
    plan = _probing_plan(tmp_path, ray_cluster, home, 6)
    with _background(ray_cluster, plan, home) as driver:
        _wait_running(plan, home, 1, node=ray_cluster.node_id[:8])
        ray_cluster.kill_node_raylet()
        assert driver.wait(timeout=240) == 0, _said(driver)
    rows = _rows(plan, home)
    lost = [r for rs in rows.values() for r in rs if r.state == "interrupted"]
    assert lost and all("during ray:" in (r.error or "") for r in lost)
    assert all(r.labels["node"].endswith(ray_cluster.node_id[:8]) for r in lost)
    for key, rs in rows.items():  # one complete trial per key, after its lost attempt
        assert [r.state for r in rs].count("complete") == 1, key
        attempts = sorted(int(r.labels["attempt"]) for r in rs)
        assert attempts == list(range(1, len(rs) + 1)), key
    with Ledger.open(home) as led:
        state = experiment_state(load_plan(plan), led)
    assert state.counts()["complete"] == 2 and state.counts()["pending"] == 0


def _agents_of(plan_dir: Path) -> list[int]:
    """Live processes running this test's agent script."""
    out = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                cmd = (entry / "cmdline").read_bytes()
            except OSError:
                continue
            if str(plan_dir / "agent.py").encode() in cmd:
                out.append(int(entry.name))
    return out


def test_kill_9_of_the_driver_then_resume_records_each_key_once(
    ray_cluster: LocalCluster, tmp_path: Path
) -> None:
    home = tmp_path / "ledger"
    plan = _probing_plan(tmp_path, ray_cluster, home, 8)
    with _background(ray_cluster, plan, home) as driver:
        _wait_running(plan, home, 2)
        driver.send_signal(signal.SIGKILL)
    deadline = time.monotonic() + 60
    while _agents_of(tmp_path) and time.monotonic() < deadline:  # Ray ends the job's workers
        time.sleep(0.5)
    assert _agents_of(tmp_path) == []
    status = _status(plan, home, "--keys")
    assert status.returncode == 0 and "pending" in status.stdout, status.stdout
    done = _run(ray_cluster, _driver(ray_cluster, plan, home))
    assert done.returncode == 0, done.stderr[-3000:]
    for key, rows in _outcome(plan, home).items():
        assert rows == [("1", "interrupted"), ("2", "complete")], key
    with Ledger.open(home) as led:
        for r in led.trials(limit=None):
            if r.state == "interrupted":
                assert f"optarena process {driver.pid} ended" in (r.error or "")


def test_a_node_offering_agents_and_judging_is_refused_unless_shared(
    ray_cluster: LocalCluster, tmp_path: Path
) -> None:
    home = tmp_path / "ledger"
    plan = _probing_plan(tmp_path, ray_cluster, home, 0)
    argv = _driver(ray_cluster, plan, home)
    argv = argv[: argv.index("--judge-nodes")]
    done = _run(ray_cluster, argv)
    assert done.returncode == 2
    assert "offers both agent and judge slots" in done.stderr
    assert "Traceback" not in done.stderr
    assert not (home / "ledger.db").exists() or _rows(plan, home) == {}


def test_status_names_the_node_and_sigterm_stops_the_driver_on_record(
    ray_cluster: LocalCluster, tmp_path: Path
) -> None:
    home = tmp_path / "ledger"
    plan = _probing_plan(tmp_path, ray_cluster, home, 30)
    with _background(ray_cluster, plan, home) as driver:
        _wait_running(plan, home, 2)
        status = _status(plan, home)
        driver.send_signal(signal.SIGTERM)
        assert driver.wait(timeout=120) == 130, _said(driver)
    assert status.returncode == 0
    running = [line for line in status.stdout.splitlines() if ": running on " in line]
    assert len(running) == 2 and all("/" in line.split("running on ")[1] for line in running)
    with Ledger.open(home) as led:
        state = experiment_state(load_plan(plan), led)
    rows = [r for rs in state.rows.values() for r in rs]
    assert len(rows) == 2 and all(r.state == "interrupted" for r in rows)
    assert all("KeyboardInterrupt: the experiment run was stopped" in (r.error or "") for r in rows)
    assert all(state.failed_attempts(k) == [] for k in state.rows)  # the user's stop: no retry
    # The driver cancels each attempt's task with force and waits for it to end, so no agent
    # outlives its exit (a loaded run once found them a moment after it, before the wait). The
    # kernel reaps an agent's tree when its Ray worker dies (a parent-death signal to the
    # sandbox's PID 1): allow it a moment, far less than Ray's own time to end a worker.
    deadline = time.monotonic() + 5
    while _agents_of(tmp_path) and time.monotonic() < deadline:
        time.sleep(0.1)
    assert _agents_of(tmp_path) == []
