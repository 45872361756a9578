"""A second Ray node on this machine, bound to the loopback like the head (run as a script).

`ray start --address` refuses to add a node to a loopback-only head (it would advertise the
machine's public address instead), so the node is started with Ray's own `Node`, as Ray's
test clusters do. SIGTERM ends it and every process it started.

    python ray_node.py GCS_ADDRESS CPUS RESOURCES_JSON TEMP_DIR
"""

from __future__ import annotations

import json
import signal
import sys
import time
from types import FrameType

import ray._private.node as ray_node
from ray._private.parameter import RayParams


def main() -> None:
    address, cpus, resources, temp = sys.argv[1:5]
    params = RayParams(
        node_ip_address="127.0.0.1",
        gcs_address=address,
        num_cpus=int(cpus),
        resources=json.loads(resources),
        temp_dir=temp,
        include_log_monitor=False,
    )
    node = ray_node.Node(params, head=False, shutdown_at_exit=False, spawn_reaper=True)

    def stop(signum: int, frame: FrameType | None) -> None:
        node.kill_all_processes(check_alive=False, allow_graceful=True)
        sys.exit(0)

    signal.signal(signal.SIGTERM, stop)
    raylet = node.all_processes["raylet"][0].process.pid
    print(json.dumps({"raylet": raylet, "node_id": node.node_id}), flush=True)
    while True:
        time.sleep(1)


if __name__ == "__main__":
    main()
