"""A real Ray cluster on this machine for the Ray executor's tests: `ray start --head` plus one
more node process, every socket on the loopback; each process ended by its id, none left.

The head offers the judge slot and one agent slot (`--judge-nodes shared`); the second node two
agent slots, so a trial can be lost with its node while the cluster goes on. Drivers run as
`optarena` subprocesses with `cluster.env`: a loopback-only cluster needs Ray told not to
trade 127.0.0.1 for the machine's public address (Ray reads that when it is imported).
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import signal
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path

NODE_SCRIPT = Path(__file__).with_name("ray_node.py")
RAY = shutil.which("ray") or str(Path(sys.executable).with_name("ray"))
START_TIMEOUT_S = 90.0


def _ray_env(temp: Path) -> dict[str, str]:
    env = dict(os.environ)
    env.update(
        {
            "RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER": "0",  # loopback addresses, loopback sockets
            "RAY_USAGE_STATS_ENABLED": "0",
            "RAY_AUTH_MODE": "disabled",  # loopback only: nothing else can reach it
            "OPTARENA_RAY_STAGING": str(temp),  # the nodes' staging goes with the cluster
        }
    )
    env.pop("RAY_ADDRESS", None)
    return env


@dataclass
class LocalCluster:
    temp: Path
    address: str = ""
    head: subprocess.Popen[bytes] | None = None
    node: subprocess.Popen[bytes] | None = None
    node_raylet: int = 0
    node_id: str = ""
    logs: list[Path] = field(default_factory=list)

    @property
    def env(self) -> dict[str, str]:
        return _ray_env(self.temp)

    def start_head(self) -> None:
        log = self.temp / "head.log"
        self.logs.append(log)
        resources = json.dumps({"optarena_judge": 1, "optarena_agent": 1})
        with log.open("wb") as out:
            self.head = subprocess.Popen(
                [RAY, "start", "--head", "--block", "--port=0", "--num-cpus=1",
                 f"--resources={resources}", "--include-dashboard=false",
                 f"--temp-dir={self.temp}", "--disable-usage-stats"],
                env=self.env, stdout=out, stderr=subprocess.STDOUT,
            )  # fmt: skip
        found = self.temp / "ray_current_cluster"
        deadline = time.monotonic() + START_TIMEOUT_S
        while not found.is_file() or not found.read_text().strip():
            if self.head.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError(f"the Ray head did not start: {log.read_text()[-2000:]}")
            time.sleep(0.2)
        self.address = found.read_text().strip()

    def start_node(self) -> None:
        """The agent node (again, after a test killed it)."""
        log = self.temp / f"node-{len(self.logs)}.log"
        self.logs.append(log)
        with log.open("wb") as err:
            self.node = subprocess.Popen(
                [sys.executable, str(NODE_SCRIPT), self.address, "2",
                 json.dumps({"optarena_agent": 2}), str(self.temp)],
                env=self.env, stdout=subprocess.PIPE, stderr=err,
            )  # fmt: skip
        assert self.node.stdout is not None
        line = self.node.stdout.readline()
        if not line:
            raise RuntimeError(f"the Ray node did not start: {log.read_text()[-2000:]}")
        info = json.loads(line)
        self.node_raylet, self.node_id = int(info["raylet"]), str(info["node_id"])
        self._wait_nodes(2)

    def _wait_nodes(self, count: int) -> None:
        probe = (
            "import ray, sys; ray.init(address=sys.argv[1], logging_level='ERROR'); "
            "print(sum(1 for n in ray.nodes() if n['Alive']))"
        )
        deadline = time.monotonic() + START_TIMEOUT_S
        while time.monotonic() < deadline:
            out = subprocess.run(
                [sys.executable, "-c", probe, self.address],
                env=self.env, capture_output=True, text=True, timeout=60,
            )  # fmt: skip
            if out.returncode == 0 and out.stdout.strip() == str(count):
                return
            time.sleep(0.5)
        raise RuntimeError(f"the cluster never had {count} live nodes")

    def node_alive(self) -> bool:
        return self.node is not None and self.node.poll() is None and _alive(self.node_raylet)

    def ensure_node(self) -> None:
        """Both nodes up: a test that killed the agent node's raylet leaves a dead one."""
        if self.node_alive():
            return
        self._stop(self.node)
        self.start_node()

    def kill_node_raylet(self) -> None:
        os.kill(self.node_raylet, signal.SIGKILL)

    @staticmethod
    def _stop(proc: subprocess.Popen[bytes] | None) -> None:
        if proc is None or proc.poll() is not None:
            return
        proc.send_signal(signal.SIGTERM)
        try:
            proc.wait(timeout=40)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()

    def stop(self) -> None:
        self._stop(self.node)
        self._stop(self.head)
        for pid in _ours(self.temp):  # what a killed raylet left: ours, by the temp dir's name
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    return state != "Z"


def _ours(temp: Path) -> list[int]:
    """Processes whose command line names our cluster's temp directory (its raylets,
    workers and agents), this process excluded."""
    out = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit() or int(entry.name) == os.getpid():
            continue
        try:
            cmdline = (entry / "cmdline").read_bytes()
        except OSError:
            continue
        if str(temp).encode() in cmdline:
            out.append(int(entry.name))
    return out
