"""The cluster as the driver sees it: connecting, which nodes offer agent and judge slots,
and refusing a cluster (or a node) that cannot keep optarena's guarantees, before any trial.

A node offers work only through custom resources declared at `ray start --resources`:
`optarena_agent: N` (N agents at once) and `optarena_judge: 1` (one judgement at a time: timed
measurements must not share a CPU with each other). With `--judge-nodes dedicated` (the
default) a node may offer one or the other, never both, so no agent ever runs beside a
measurement; `shared` allows both on one node (a one-machine cluster), as the local executor
runs agents beside its serial judge.
"""

from __future__ import annotations

import contextlib
import logging
import os
import socket
from dataclasses import dataclass
from types import ModuleType
from typing import Any, Literal

from optarena.errors import OptarenaError

AGENT_RESOURCE = "optarena_agent"
JUDGE_RESOURCE = "optarena_judge"
INSTALL = "pip install 'optarena[ray]'"
JudgeNodes = Literal["dedicated", "shared"]
CONNECT_TIMEOUT_S = 10.0
PROBE_TIMEOUT_S = 120.0


def import_ray() -> ModuleType:
    """Ray, or the one line that says how to install it."""
    try:
        import ray
    except ImportError:
        raise OptarenaError(f"--executor ray: Ray is not installed; {INSTALL}") from None
    return ray


def _bootstrap(ray: ModuleType, address: str | None) -> str:
    """host:port of the cluster to join: --ray-address, else $RAY_ADDRESS, else the cluster
    last started on this machine (`ray start`). Never a new local instance."""
    where = address or os.environ.get("RAY_ADDRESS") or "auto"
    try:
        found = ray._private.services.canonicalize_bootstrap_address(where)
    except Exception as e:  # Ray's own words: no cluster recorded, a malformed address
        raise OptarenaError(f"--ray-address {where}: {_first_line(e)}") from None
    if not found:
        raise OptarenaError(f"--ray-address {where}: no running Ray cluster found; {START_HINT}")
    return str(found)


START_HINT = (
    'start one with `ray start --head --resources \'{"optarena_agent": 2, "optarena_judge": '
    "1}'` (docs/scale-out.md)"
)


def _first_line(e: BaseException) -> str:
    text = str(e).strip().splitlines()
    return text[0] if text else type(e).__name__


def connect(address: str | None) -> ModuleType:
    """Join the cluster as its driver (Ray's own logs kept out of optarena's output)."""
    ray = import_ray()
    _token_auth(ray)
    where = _bootstrap(ray, address)
    host, _, port = where.rpartition(":")
    try:
        socket.create_connection((host, int(port)), timeout=CONNECT_TIMEOUT_S).close()
    except (OSError, ValueError) as e:
        raise OptarenaError(
            f"--ray-address {where}: no Ray cluster answers there ({e}); {START_HINT}"
        ) from None
    try:
        ray.init(
            address=where, logging_level=logging.ERROR, log_to_driver=False,
            namespace="optarena", configure_logging=True,
        )  # fmt: skip
    except Exception as e:
        raise OptarenaError(
            f"--ray-address {where}: cannot join the cluster: {_first_line(e)}"
        ) from None
    _quiet(ray)
    return ray


def _token_auth(ray: ModuleType) -> None:
    """Use the cluster's token when this machine has one (`ray get-auth-token --generate`,
    $RAY_AUTH_TOKEN or $RAY_AUTH_TOKEN_PATH) and $RAY_AUTH_MODE does not say otherwise, as
    `ray start` itself does: a cluster started with token authentication refuses a driver
    without it."""
    with contextlib.suppress(ImportError, AttributeError):
        from ray._private.authentication import authentication_token_setup as auth

        log = logging.getLogger(auth.__name__)
        level = log.level
        log.setLevel(logging.ERROR)  # its notice that token mode is on: not optarena's output
        try:
            auth.maybe_enable_token_auth_if_token_available(warn_if_disabled=False)
        finally:
            log.setLevel(level)


def _quiet(ray: ModuleType) -> None:
    """Ray prints the cluster's error messages (a node's death, with its raylet's log) on the
    driver's stdout, which is optarena's output; each reaches the trial it concerns as its
    error instead, and Ray's logger keeps them at debug level."""
    log = logging.getLogger("ray")

    def to_log(data: dict[str, Any], ignore_prefix: bool = False) -> None:
        for line in data.get("lines", []):
            log.debug("%s: %s", data.get("pid", "ray"), line)

    with contextlib.suppress(AttributeError):  # another Ray: its messages stay as they are
        ray._private.worker.print_to_stdstream = to_log


@dataclass(frozen=True)
class RayNode:
    """A live node and what it offers optarena."""

    node_id: str
    host: str
    agent_slots: float
    judge_slots: float

    @property
    def name(self) -> str:
        """`host/node-id-prefix`, as its workers name it (machines may hold several)."""
        return f"{self.host}/{self.node_id[:8]}"


def nodes_of(raw: list[dict[str, Any]]) -> list[RayNode]:
    """The live nodes in `ray.nodes()`'s words."""
    return [
        RayNode(
            str(n["NodeID"]),
            str(n.get("NodeManagerHostname") or n.get("NodeManagerAddress", "?")),
            float(n.get("Resources", {}).get(AGENT_RESOURCE, 0)),
            float(n.get("Resources", {}).get(JUDGE_RESOURCE, 0)),
        )
        for n in raw
        if n.get("Alive")
    ]


def layout_problems(nodes: list[RayNode], judge_nodes: JudgeNodes) -> list[str]:
    """Why this cluster cannot run an experiment as asked (empty: it can)."""
    out = []
    if not any(n.agent_slots for n in nodes):
        out.append(
            f"no node offers '{AGENT_RESOURCE}' slots: start agent nodes with "
            f"`ray start --resources '{{\"{AGENT_RESOURCE}\": N}}'`"
        )
    if not any(n.judge_slots for n in nodes):
        out.append(
            f"no node offers a '{JUDGE_RESOURCE}' slot: start a judge node with "
            f"`ray start --resources '{{\"{JUDGE_RESOURCE}\": 1}}'`"
        )
    for n in nodes:
        if n.judge_slots > 1:
            out.append(
                f"node {n.name} offers {n.judge_slots:g} '{JUDGE_RESOURCE}' slots: two "
                "judgements there would time each other's noise (offer 1)"
            )
        if judge_nodes == "dedicated" and n.judge_slots and n.agent_slots:
            out.append(
                f"node {n.name} offers both agent and judge slots: agents would run beside "
                "timed measurements; give judge nodes no agent slots, or pass "
                "--judge-nodes shared to accept it (one machine)"
            )
    return out
