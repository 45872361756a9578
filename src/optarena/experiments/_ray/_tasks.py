"""The Ray tasks: a node's probe, an agent's attempt (a streaming generator) and a judgement.

Imported only once Ray is known to be installed (`_cluster.import_ray`). No task is ever
retried by Ray (`max_retries=0`): an agent's run costs money and is not a pure function, so a
lost attempt is recorded as interrupted and its key run again by the driver, on record.
"""

from __future__ import annotations

import contextlib
import os
import socket
from collections.abc import Iterator
from functools import partial
from typing import Any

import ray

from optarena.experiments._ray._checks import Expectation, node_problems
from optarena.experiments._ray._judge import JudgeReply, JudgeRequest, judge_here
from optarena.experiments._ray._transfer import Message
from optarena.experiments._ray._worker import AgentJob, run_job


def node_name() -> str:
    """`host/node-id-prefix`: several nodes may share a machine (and its host name)."""
    return f"{socket.gethostname()}/{ray.get_runtime_context().get_node_id()[:8]}"


def session_dir() -> str | None:
    """Ray's session directory on this node (its sockets and object store files)."""
    node = getattr(ray._private.worker.global_worker, "node", None)
    return None if node is None else str(node.get_session_dir_path())


@contextlib.contextmanager
def node_environment() -> Iterator[None]:
    """The node's environment as `ray start` had it: Ray sets OMP_NUM_THREADS in a worker
    unless the node's environment does, which would show in the runtime fingerprint (and reach
    the agent) as a difference between machines that is only Ray's. Restored afterwards."""
    try:
        with open(f"/proc/{os.getppid()}/environ", "rb") as f:
            parent = {e.split(b"=", 1)[0] for e in f.read().split(b"\0") if b"=" in e}
    except OSError:
        parent = None
    added = os.environ.get("OMP_NUM_THREADS")
    drop = parent is not None and added is not None and b"OMP_NUM_THREADS" not in parent
    if drop:
        del os.environ["OMP_NUM_THREADS"]
    try:
        yield
    finally:
        if drop and added is not None:
            os.environ["OMP_NUM_THREADS"] = added


@ray.remote(num_cpus=0, max_retries=0)
def probe_node(expect: Expectation, agents: bool) -> tuple[str, list[str]]:
    with node_environment():
        return node_name(), node_problems(expect, agents=agents, ray_session_dir=session_dir())


@ray.remote(max_retries=0)
def judge_task(request: JudgeRequest, expect: Expectation) -> JudgeReply:
    with node_environment():
        problems = node_problems(expect, agents=False, ray_session_dir=session_dir())
        if problems:
            raise RuntimeError(f"judge node {node_name()} refused: {'; '.join(problems)}")
        return judge_here(request, node_name())


def _judge_remotely(
    options: dict[str, Any], expect: Expectation, request: JudgeRequest
) -> JudgeReply:
    ref = judge_task.options(**options).remote(request, expect)
    reply: JudgeReply = ray.get(ref)
    return reply


@ray.remote(max_retries=0, num_returns="streaming")
def agent_task(job: AgentJob, judge_options: dict[str, Any]) -> Iterator[Message]:
    with node_environment():
        send = partial(_judge_remotely, judge_options, job.expect)
        yield from run_job(job, node_name(), session_dir(), send)
