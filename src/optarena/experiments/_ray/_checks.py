"""What every node must be before a trial runs on it: the same optarena, the same task packages
and condition files as the lock, and able to contain what it runs.

A node is a machine the driver never sees. Were its optarena, a task package or an agent script
different, its trials would be labelled with the lock's cell hash yet mean something else; were
its sandbox unable to isolate the network, an agent (or a candidate) could reach Ray's
unauthenticated RPC and run code anywhere in the cluster, the driver's ledger included. So each
node is checked against what the driver expects (`Expectation`) before its first trial, by a
probe at the start of a run and again by every worker process before its first trial (a node
may join later), and a node that fails is refused with the reasons: never run on as it is.
"""

from __future__ import annotations

import hashlib
import json
import os
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from optarena import __version__
from optarena.errors import OptarenaError
from optarena.experiments._identity import condition_identity
from optarena.experiments._plan import LoadedPlan
from optarena.experiments._schedule import artifacts_sha256, plan_identity
from optarena.identity import judge_sha256
from optarena.records import Condition
from optarena.sandbox import probe
from optarena.tasks import Task, load_task
from optarena.tasks.external import FrozenExternal, load_frozen
from optarena.trials import trial_task

# The private scratch both sandboxes give their processes: a path under one of these is not
# reachable from inside (Ray's sockets and its object store's files must be).
SCRATCH = ("/tmp", "/var/tmp", "/dev/shm")


@dataclass(frozen=True)
class TaskPath:
    """A task as a node loads it: from the same path, to the same hash."""

    kind: str  # "package" | "external"
    path: str
    sha256: str

    def load(self) -> Task | FrozenExternal:
        path = Path(self.path)
        return load_task(path) if self.kind == "package" else load_frozen(path)


@dataclass(frozen=True)
class Expectation:
    """What the driver expects of every node, from the plan as frozen."""

    version: str
    judge_sha256: str
    plan_path: str
    tasks: dict[str, TaskPath]
    conditions: dict[str, tuple[int, Condition, dict[str, Any]]]  # name -> index, c, identity
    artifacts: dict[str, tuple[str, str] | None]  # condition -> (path, sha256)
    digest: str = field(default="", compare=False)


def expectation(plan: LoadedPlan) -> Expectation:
    """The driver's side: its optarena, the plan's tasks and conditions (as frozen: a run
    starts only when the plan does not differ from its lock)."""
    ident = plan_identity(plan)
    tasks = {
        tid: TaskPath(
            "external" if isinstance(t, FrozenExternal) else "package",
            t.path if isinstance(t, FrozenExternal) else str(t.root),
            ident.tasks[tid]["sha256"],
        )
        for tid, t in plan.tasks.items()
    }
    conditions = {
        c.name: (i, c, ident.conditions[c.name]) for i, c in enumerate(plan.plan.conditions)
    }
    artifacts = {
        name: None if path is None else (str(path), artifacts_sha256(path) or "")
        for name, path in plan.artifacts.items()
    }
    expect = Expectation(__version__, judge_sha256(), str(plan.path), tasks, conditions, artifacts)
    blob = json.dumps(
        [expect.version, expect.judge_sha256, expect.plan_path, sorted(tasks.items())],
        default=str,
        sort_keys=True,
    ) + json.dumps({k: v[2] for k, v in conditions.items()}, sort_keys=True, default=str)
    digest = hashlib.sha256(blob.encode()).hexdigest()
    return replace(expect, digest=digest)


def containment_problems(ray_session_dir: str | None) -> list[str]:
    """Why this node cannot contain an agent or a candidate, if it cannot: both sandboxes
    need a network namespace (else Ray's ports are reachable) and a mount namespace whose
    private scratch covers Ray's session directory (its Unix sockets and object store)."""
    caps = probe()
    out = []
    if caps.netns is not None:
        out.append(f"no network namespace for the sandboxes ({caps.netns})")
    if caps.mountns is not None:
        out.append(f"no mount namespace for the sandboxes ({caps.mountns})")
    if ray_session_dir is not None:
        real = os.path.realpath(ray_session_dir)
        if not any(real == d or real.startswith(d + "/") for d in SCRATCH):
            out.append(
                f"Ray's session directory {real} is outside {', '.join(SCRATCH)}: its sockets "
                "would be reachable from the sandboxes (start Ray with its default --temp-dir)"
            )
    return out


def deployment_problems(expect: Expectation, *, agents: bool) -> list[str]:
    """What differs on this node from what the driver expects (empty: none). `agents`: the
    node runs agents, so the conditions' files and artifacts must be here too."""
    out = []
    if __version__ != expect.version:
        out.append(f"optarena {__version__} here, {expect.version} on the driver")
    if judge_sha256() != expect.judge_sha256:
        out.append("optarena's judging code differs from the driver's (another install)")
    for tid, ref in sorted(expect.tasks.items()):
        try:
            sha = trial_task(ref.load()).info.sha256
        except OptarenaError as e:
            out.append(f"task {tid}: cannot be loaded from {ref.path}: {e}")
            continue
        if sha != ref.sha256:
            out.append(f"task {tid}: {ref.path} differs from the driver's (hash {sha[:12]})")
    if agents:
        out += _condition_problems(expect)
    return out


def _condition_problems(expect: Expectation) -> list[str]:
    out = []
    plan_path = Path(expect.plan_path)
    for name, (index, c, frozen) in sorted(expect.conditions.items()):
        try:
            here = condition_identity(plan_path, index, c)
        except OptarenaError as e:
            out.append(f"condition {name}: {e}")
            continue
        for key, value in here.items():
            if frozen.get(key) != value:
                out.append(f"condition {name}: its {key} differ from the lock's")
        art = expect.artifacts.get(name)
        if art is not None and artifacts_sha256(Path(art[0])) != art[1]:
            out.append(f"condition {name}: artifacts {art[0]} differ from the driver's")
    return out


_PASSED: set[tuple[str, bool]] = set()  # expectations this process has met (a probe's cost once)


def node_problems(expect: Expectation, *, agents: bool, ray_session_dir: str | None) -> list[str]:
    """Everything that refuses this node, checked once per process and expectation."""
    if (expect.digest, agents) in _PASSED:
        return []
    out = containment_problems(ray_session_dir) + deployment_problems(expect, agents=agents)
    if not out:
        _PASSED.add((expect.digest, agents))
    return out
