"""What refuses a node or a cluster before any trial (`_ray._checks`, `_ray._cluster`), without
Ray: a node that cannot contain an agent, one whose optarena, task package or agent script is
not the driver's, a cluster without agent or judge slots, two judgement slots on one node, and
agents beside judging unless `--judge-nodes shared`."""

from __future__ import annotations

import dataclasses
import shutil
from pathlib import Path

import pytest

from optarena.experiments import freeze, load_plan

# private: the Ray executor's checks, cluster layout and attempt ids, tested on literal nodes
from optarena.experiments._ray import attempt_id
from optarena.experiments._ray._checks import (
    containment_problems,
    deployment_problems,
    expectation,
    node_problems,
)
from optarena.experiments._ray._cluster import RayNode, layout_problems
from optarena.sandbox import probe
from optarena.tasks import BUILTIN_DIR

PLAN = """
[experiment]
name = "checks"
repetitions = 1
tasks = ["{task}"]

[judge]
measure = false

[[conditions]]
name = "a"
agent = "command"
command = "python3 {{plan_dir}}/agent.py {{workspace}}"
"""


@pytest.fixture
def plan_path(tmp_path: Path) -> Path:
    task = tmp_path / "task"
    shutil.copytree(BUILTIN_DIR / "rmsnorm", task, ignore=shutil.ignore_patterns("__pycache__"))
    (tmp_path / "agent.py").write_text("print('an agent')\n")
    path = tmp_path / "plan.toml"
    path.write_text(PLAN.format(task=task))
    freeze(load_plan(path))
    return path


def test_a_node_without_network_or_mount_namespaces_cannot_contain(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    caps = dataclasses.replace(probe(), netns="EPERM: no user namespaces", mountns="EPERM")
    monkeypatch.setattr("optarena.experiments._ray._checks.probe", lambda: caps)
    problems = containment_problems("/tmp/ray/session_1")
    assert any("no network namespace" in p and "EPERM" in p for p in problems)
    assert any("no mount namespace" in p for p in problems)


def test_rays_sockets_outside_the_sandboxes_scratch_refuse_the_node(tmp_path: Path) -> None:
    if probe().netns is not None or probe().mountns is not None:
        pytest.skip("this machine cannot contain an agent at all")
    assert containment_problems("/tmp/ray/session_1") == []
    assert containment_problems("/var/tmp/x") == []
    outside = containment_problems("/srv/ray/session_1")
    assert len(outside) == 1 and "outside /tmp" in outside[0]


def test_the_driver_s_own_node_passes(plan_path: Path) -> None:
    expect = expectation(load_plan(plan_path))
    assert deployment_problems(expect, agents=True) == []


def test_a_node_with_another_task_package_script_or_optarena_is_refused(
    plan_path: Path,
) -> None:
    expect = expectation(load_plan(plan_path))
    (plan_path.parent / "task" / "reference.py").write_text("# another reference\n")
    (plan_path.parent / "agent.py").write_text("print('another agent')\n")
    problems = deployment_problems(expect, agents=True)
    assert any(p.startswith("task ") and "differs from the driver's" in p for p in problems)
    assert any(p.startswith("condition a: its files differ") for p in problems)
    judge_only = deployment_problems(expect, agents=False)  # a judge node runs no agent
    assert not any(p.startswith("condition") for p in judge_only)
    older = dataclasses.replace(expect, version="0.0.1")
    assert any("0.0.1 on the driver" in p for p in deployment_problems(older, agents=False))


def test_a_node_that_passed_is_not_checked_again_in_that_process(plan_path: Path) -> None:
    expect = expectation(load_plan(plan_path))
    assert node_problems(expect, agents=True, ray_session_dir=None) == []
    (plan_path.parent / "agent.py").write_text("print('changed after the check')\n")
    assert node_problems(expect, agents=True, ray_session_dir=None) == []
    changed = dataclasses.replace(expect, digest=expect.digest + "-other")
    assert node_problems(changed, agents=True, ray_session_dir=None) != []


def _node(name: str, agents: float, judges: float) -> RayNode:
    return RayNode(name * 8, "host", agents, judges)


def test_a_cluster_layout_is_refused_with_each_reason() -> None:
    assert layout_problems([_node("a", 2, 0), _node("j", 0, 1)], "dedicated") == []
    assert layout_problems([_node("s", 2, 1)], "shared") == []
    both = layout_problems([_node("s", 2, 1)], "dedicated")
    assert len(both) == 1 and "both agent and judge slots" in both[0] and "shared" in both[0]
    assert any("no node offers 'optarena_agent'" in p for p in layout_problems([], "shared"))
    assert any("no node offers a 'optarena_judge'" in p for p in layout_problems([], "shared"))
    two = layout_problems([_node("a", 1, 0), _node("j", 0, 2)], "dedicated")
    assert len(two) == 1 and "2 'optarena_judge' slots" in two[0]


def test_an_attempt_has_one_id_in_one_ledger() -> None:
    home = Path("/ledgers/a")
    first = attempt_id(home, "c" * 64, "rmsnorm/a/0", 1)
    assert first == attempt_id(home, "c" * 64, "rmsnorm/a/0", 1)
    others = {
        attempt_id(home, "c" * 64, "rmsnorm/a/0", 2),
        attempt_id(home, "c" * 64, "rmsnorm/a/1", 1),
        attempt_id(home, "d" * 64, "rmsnorm/a/0", 1),
        attempt_id(Path("/ledgers/b"), "c" * 64, "rmsnorm/a/0", 1),
    }
    assert first not in others and len(others) == 4
