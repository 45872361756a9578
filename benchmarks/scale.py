"""How many trials an hour a Ray cluster gets through, and what each costs the driver.

On this machine it starts a loopback-only Ray cluster of one node with N agent slots (N Ray
worker processes running agents at once) and one judge slot (judging serial, as on every
node), runs an experiment of scripted agents that sleep (so agents dominate, as real ones
do), and reports for N = 1, 2, 4:

- trials per hour (wall clock, from the first submission to the last trial written);
- the driver's CPU per trial (the one process that writes the ledger), and within it the time
  it holds the ledger for one trial: inserting the running row, and storing the shipment's
  artifacts plus the one transaction that finishes the row;
- the bytes shipped per trial.

docs/scale-out.md turns these into trials per hour and driver load at 10 and 100 nodes.

    python benchmarks/scale.py                    # 8 trials per N, agents sleep 20 s
    python benchmarks/scale.py --trials 4 --sleep-s 10 --slots 1 2
"""

from __future__ import annotations

import os

# Before Ray is imported: a cluster bound to the loopback only, no usage reports.
os.environ.setdefault("RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER", "0")
os.environ.setdefault("RAY_USAGE_STATS_ENABLED", "0")
os.environ.setdefault("RAY_AUTH_MODE", "disabled")
os.environ.pop("RAY_ADDRESS", None)

import argparse
import json
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from optarena.experiments import RayOptions, freeze, load_plan, run_experiment
from optarena.experiments._ray import _driver
from optarena.ledger import Ledger

AGENT = "import sys, time; time.sleep(float(sys.argv[1]))\n"
PLAN = """
[experiment]
name = "scale-{slots}"
repetitions = {repetitions}
tasks = ["rmsnorm"]

[judge]
measure = false

[[conditions]]
name = "a"
agent = "command"
command = "python3 {{plan_dir}}/agent.py {sleep}"

[[conditions]]
name = "b"
agent = "command"
command = "python3 {{plan_dir}}/agent.py {sleep}"
"""


@dataclass
class Result:
    slots: int
    trials: int
    wall_s: float
    trials_per_hour: float
    driver_cpu_s_per_trial: float
    begin_ms: float  # median: the running row inserted
    store_ms: float  # per trial: its chunks received, hashed and stored
    import_ms: float  # median: the row finished in one transaction
    bytes_per_trial: float
    agent_s: float  # median agent wall time
    judge_s: float  # median judging time (on the judge slot)


@contextmanager
def cluster(slots: int) -> Iterator[str]:
    """A one-node cluster: `slots` agent slots and CPUs, one judge slot. Stopped by its pid."""
    temp = Path(tempfile.mkdtemp(prefix="oa-scale-", dir="/tmp"))
    resources = json.dumps({"optarena_agent": slots, "optarena_judge": 1})
    log = (temp / "head.log").open("wb")
    head = subprocess.Popen(
        [shutil.which("ray") or "ray", "start", "--head", "--block", "--port=0",
         f"--num-cpus={slots}", f"--resources={resources}", "--include-dashboard=false",
         f"--temp-dir={temp}", "--disable-usage-stats"],
        stdout=log, stderr=subprocess.STDOUT,
    )  # fmt: skip
    try:
        found = temp / "ray_current_cluster"
        while not found.is_file() or not found.read_text().strip():
            if head.poll() is not None:
                raise RuntimeError((temp / "head.log").read_text()[-2000:])
            time.sleep(0.2)
        yield found.read_text().strip()
    finally:
        head.send_signal(signal.SIGTERM)
        head.wait(timeout=60)
        log.close()
        shutil.rmtree(temp, ignore_errors=True)


def _timed(target: Any, name: str, into: list[float]) -> Callable[[], None]:
    """Wrap `target.name` to record each call's seconds; returns the undo."""
    original = getattr(target, name)

    def wrapper(*args: Any, **kwargs: Any) -> Any:
        t0 = time.perf_counter()
        try:
            return original(*args, **kwargs)
        finally:
            into.append(time.perf_counter() - t0)

    setattr(target, name, wrapper)
    return lambda: setattr(target, name, original)


def run_one(slots: int, trials: int, sleep_s: float, work: Path) -> Result:
    plan_dir = work / f"slots-{slots}"
    plan_dir.mkdir(parents=True)
    (plan_dir / "agent.py").write_text(AGENT)
    path = plan_dir / "plan.toml"
    path.write_text(PLAN.format(slots=slots, repetitions=max(1, trials // 2), sleep=sleep_s))
    plan = load_plan(path)
    freeze(plan)
    home = plan_dir / "ledger"
    begins: list[float] = []
    imports: list[float] = []
    adds: list[float] = []
    undo = [
        _timed(_driver.RayAttempt, "_begin", begins),
        _timed(_driver, "import_trial", imports),
        _timed(_driver.Receiver, "add", adds),
    ]
    try:
        with cluster(slots) as address:
            cpu0, t0 = time.process_time(), time.monotonic()
            state = run_experiment(
                plan, home, executor="ray",
                ray=RayOptions(address=address, judge_nodes="shared"),
            )  # fmt: skip
            wall, cpu = time.monotonic() - t0, time.process_time() - cpu0
    finally:
        for u in undo:
            u()
    with Ledger(home) as led:
        rows = [r for r in led.trials(limit=None) if r.state == "complete"]
        shipped = sum(
            led.store.path(sha).stat().st_size for r in rows for sha in r.artifacts.values()
        )
    done = state.counts()["complete"]
    return Result(
        slots=slots,
        trials=done,
        wall_s=round(wall, 1),
        trials_per_hour=round(done / wall * 3600, 1),
        driver_cpu_s_per_trial=round(cpu / max(done, 1), 3),
        begin_ms=round(statistics.median(begins) * 1000, 2),
        store_ms=round(sum(adds) / max(done, 1) * 1000, 2),
        import_ms=round(statistics.median(imports) * 1000, 2),
        bytes_per_trial=round(shipped / max(done, 1)),
        agent_s=round(statistics.median(r.agent_wall_s or 0 for r in rows), 2),
        judge_s=round(statistics.median(r.phases_s.get("judge", 0) for r in rows), 2),
    )


def store_rate(mib: int = 64) -> float:
    """MiB per second the driver receives and stores an artifact at (hashing each chunk as it
    arrives, then into the store): what a trial's bytes cost the single writer."""
    import hashlib

    from optarena.experiments._ray._transfer import CHUNK_BYTES, Chunk, Shipment

    data = os.urandom(mib << 20)
    sha = hashlib.sha256(data).hexdigest()
    with tempfile.TemporaryDirectory(prefix="optarena-store-") as tmp, Ledger(Path(tmp)) as led:
        receiver = _driver.Receiver(led.store, Shipment("n", "{}", (), (), ((sha, len(data)),)))
        t0 = time.perf_counter()
        for i in range(0, len(data), CHUNK_BYTES):
            receiver.add(Chunk(sha, data[i : i + CHUNK_BYTES]))
        return mib / (time.perf_counter() - t0)


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    p.add_argument("--trials", type=int, default=8, help="trials per slot count (even)")
    p.add_argument("--sleep-s", type=float, default=20.0, help="each scripted agent's time")
    p.add_argument("--slots", type=int, nargs="+", default=[1, 2, 4], help="agent slots")
    p.add_argument("--json", type=Path, help="also write the results here")
    a = p.parse_args()
    results = []
    with tempfile.TemporaryDirectory(prefix="optarena-scale-") as tmp:
        for slots in a.slots:
            r = run_one(slots, a.trials, a.sleep_s, Path(tmp))
            results.append(r)
            print(json.dumps(asdict(r)), flush=True)
    rate = round(store_rate(), 1)
    print(json.dumps({"driver_store_mib_per_s": rate}), flush=True)
    if a.json:
        out: list[dict[str, Any]] = [asdict(r) for r in results]
        a.json.write_text(json.dumps([*out, {"driver_store_mib_per_s": rate}], indent=1) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
