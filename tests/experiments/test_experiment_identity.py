"""What a condition's trials are made of is frozen and matched by hash: the files its command
names and runs (its imports and links included) and the agent's version are in the lock, so an
edit after freeze is drift; resume matches trials on their cell's hash, so a second plan reusing
an experiment's name runs its own trials, and a renamed plan or more repetitions keep them."""

from __future__ import annotations

import os
import shutil
import time
from pathlib import Path

import pytest

from optarena.cli import main
from optarena.errors import SpecError
from optarena.experiments import drift, experiment_state, freeze, load_plan, run_experiment
from optarena.ledger import Ledger

PLAN = """
[experiment]
name = "same-name"
repetitions = 1
tasks = ["rmsnorm"]

[judge]
measure = false

[[conditions]]
name = "a"
agent = "command"
command = "python3 {plan_dir}/agent.py {workspace}"
agent_args = { meter = "false" }
"""

AGENT = """
import sys
import helper
from pkg import tools
helper.work(sys.argv[1])
"""


def _plan_dir(root: Path, text: str = PLAN) -> Path:
    root.mkdir(parents=True, exist_ok=True)
    (root / "agent.py").write_text(AGENT)
    (root / "helper.py").write_text("def work(ws):\n    pass\n")
    (root / "pkg").mkdir(exist_ok=True)
    (root / "pkg" / "__init__.py").write_text("")
    (root / "pkg" / "tools.py").write_text("X = 1\n")
    path = root / "plan.toml"
    path.write_text(text)
    freeze(load_plan(path))
    return path


def _edit(path: Path, text: str) -> None:
    """Rewrite a file so that its change is visible whatever the clock's granularity."""
    path.write_text(text)
    later = time.time() + 2
    os.utime(path, (later, later))


@pytest.mark.parametrize(
    ("edited", "shown"),
    [
        ("agent.py", "agent.py"),  # the script the command names
        ("helper.py", "helper.py"),  # a module it imports from beside it
        ("pkg/tools.py", "pkg/tools.py"),  # a module of a local package it imports
    ],
)
def test_an_edit_to_what_the_agent_runs_after_freeze_is_drift(
    tmp_path: Path, edited: str, shown: str
) -> None:
    path = _plan_dir(tmp_path)
    assert drift(load_plan(path)) == []
    _edit(tmp_path / edited, (tmp_path / edited).read_text() + "\n# changed after freeze\n")
    changed = drift(load_plan(path))
    assert any(c.startswith(f"conditions.a.files.{shown}: ") for c in changed), changed
    assert main(["experiment", "run", str(path), "--ledger", str(tmp_path / "l")]) == 2


def test_a_plan_directory_with_a_space_is_hashed_as_the_trial_expands_it(tmp_path: Path) -> None:
    plan_dir = tmp_path / "my plans"
    path = _plan_dir(plan_dir)
    _edit(plan_dir / "agent.py", AGENT + "# edited\n")
    assert any(c.startswith("conditions.a.files.agent.py: ") for c in drift(load_plan(path)))


def test_a_symlinked_script_is_followed_and_its_link_recorded(tmp_path: Path) -> None:
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    (elsewhere / "real.py").write_text("import near\n")
    (elsewhere / "near.py").write_text("Y = 1\n")  # found beside the link's target
    plan_dir = tmp_path / "plan"
    plan_dir.mkdir()
    (plan_dir / "agent.py").symlink_to(elsewhere / "real.py")
    path = plan_dir / "plan.toml"
    path.write_text(PLAN)
    freeze(load_plan(path))
    _edit(elsewhere / "near.py", "Y = 2\n")
    assert any(str(elsewhere / "near.py") in c for c in drift(load_plan(path)))
    freeze(load_plan(path))
    (elsewhere / "other.py").write_text("import near\n")
    (plan_dir / "agent.py").unlink()
    (plan_dir / "agent.py").symlink_to(elsewhere / "other.py")
    changed = drift(load_plan(path))
    assert any(c.startswith("conditions.a.files.agent.py: link -> ") for c in changed), changed


def test_the_agent_version_is_in_the_lock(tmp_path: Path) -> None:
    fake = tmp_path / "fake-claude"
    fake.write_text("#!/bin/sh\necho '2.0.1 (Claude Code)'\n")
    fake.chmod(0o755)
    text = PLAN.replace(
        'agent = "command"\ncommand = "python3 {plan_dir}/agent.py {workspace}"\n'
        'agent_args = { meter = "false" }',
        f'agent = "claude"\nagent_args = {{ bin = "{fake}" }}',
    )
    path = _plan_dir(tmp_path, text)
    _edit(fake, "#!/bin/sh\necho '2.0.2 (Claude Code)'\n")
    changed = drift(load_plan(path))
    assert "conditions.a.agent_version: 2.0.1 -> 2.0.2" in changed, changed


def _complete(path: Path, home: Path) -> list[str]:
    with Ledger.open(home) as led:
        state = experiment_state(load_plan(path), led)
    return sorted(r.id for s in state.schedule if (r := state.done(s.key)) is not None)


def test_a_second_plan_with_the_same_name_runs_its_own_trials(tmp_path: Path) -> None:
    home = tmp_path / "ledger"
    first = _plan_dir(tmp_path / "first")
    run_experiment(load_plan(first), home)
    second = _plan_dir(tmp_path / "second")
    _edit(tmp_path / "second" / "helper.py", "def work(ws):\n    print('another agent')\n")
    freeze(load_plan(second))
    assert _complete(second, home) == []  # not the first plan's trial
    run_experiment(load_plan(second), home)
    mine, theirs = _complete(second, home), _complete(first, home)
    assert len(mine) == 1 and len(theirs) == 1 and mine != theirs


def test_a_renamed_plan_and_more_repetitions_keep_the_trials_done(tmp_path: Path) -> None:
    home = tmp_path / "ledger"
    path = _plan_dir(tmp_path)
    run_experiment(load_plan(path), home)
    done = _complete(path, home)
    renamed = tmp_path / "renamed.toml"
    shutil.copy(path, renamed)
    freeze(load_plan(renamed))
    assert _complete(renamed, home) == done
    renamed.write_text(PLAN.replace("repetitions = 1", "repetitions = 2"))
    assert main(["experiment", "run", str(renamed), "--ledger", str(home), "--refreeze"]) == 0
    both = _complete(renamed, home)
    assert len(both) == 2 and set(done) <= set(both)  # one new trial, the first one kept


@pytest.mark.parametrize(
    ("line", "message"),
    [
        ("repetitions = 1e9", "valid integer"),  # a float: refused, not allocated
        ("repetitions = 1000000000", "less than or equal to 10000"),
        ("repetitions = 10000\ntasks = ['rmsnorm', 'softmax', 'layernorm']", "at most"),
    ],
)
def test_a_huge_schedule_is_refused_at_once(tmp_path: Path, line: str, message: str) -> None:
    path = tmp_path / "plan.toml"
    text = PLAN.replace('repetitions = 1\ntasks = ["rmsnorm"]', line + "\ntasks = ['rmsnorm']")
    if "tasks =" in line:
        text = text.replace("\ntasks = ['rmsnorm']", "", 1)
    more = "".join(f"[[conditions]]\nname='{n}'\nagent='command'\ncommand='true'\n" for n in "bcd")
    text = text.replace("[judge]", more + "[judge]")  # 3 tasks x 4 conditions x 10,000
    path.write_text(text)
    t0 = time.monotonic()
    with pytest.raises(SpecError) as e:
        load_plan(path)
    assert time.monotonic() - t0 < 10 and message in str(e.value)
    assert e.value.field == "experiment.repetitions"
    assert main(["experiment", "freeze", str(path)]) == 2
