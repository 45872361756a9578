"""Plans: bad input is refused before any trial, naming the file and the field; the schedule
is seeded and interleaved; the lock catches drift."""

from __future__ import annotations

from pathlib import Path

import pytest

from optarena.cli import main
from optarena.errors import OptarenaError, SpecError
from optarena.experiments import drift, freeze, load_plan, schedule

GOOD = """
[experiment]
name = "t"
seed = 3
repetitions = 2
tasks = ["rmsnorm", "softmax"]

[[conditions]]
name = "a"
agent = "command"
command = "true"

[[conditions]]
name = "b"
agent = "command"
command = "true"
artifacts = "art"

[compare]
baseline = "a"
treatments = ["b"]
"""


def _plan(tmp_path: Path, text: str = GOOD) -> Path:
    (tmp_path / "art").mkdir(exist_ok=True)
    p = tmp_path / "plan.toml"
    p.write_text(text)
    return p


@pytest.mark.parametrize(
    ("edit", "field", "message"),
    [
        (('tasks = ["rmsnorm", "softmax"]', 'tasks = ["nope"]'), "experiment.tasks.0", "unknown"),
        (('treatments = ["b"]', 'treatments = ["c"]'), "compare.treatments.0", "unknown condition"),
        (('name = "b"', 'name = "a"'), "conditions.1.name", "duplicates"),
        (("repetitions = 2", "repetitions = 0"), "experiment.repetitions", "greater than"),
        (('artifacts = "art"', 'artifacts = "missing"'), "conditions.1.artifacts", "not a dir"),
        (("seed = 3", "seed = 3\ncolour = 1"), "experiment.colour", "not a known field"),
        (('command = "true"\n\n[[conditions]]', "\n[[conditions]]"), "conditions.0.command", ""),
        (("[experiment]", "schema_version = 9\n[experiment]"), "schema_version", "is newer"),
    ],
)
def test_bad_plans_name_the_file_and_field(
    tmp_path: Path, edit: tuple[str, str], field: str, message: str
) -> None:
    old, new = edit
    assert old in GOOD
    path = _plan(tmp_path, GOOD.replace(old, new, 1))
    with pytest.raises(SpecError) as e:
        load_plan(path)
    assert e.value.field == field and str(path) in str(e.value)
    assert message in str(e.value)
    assert main(["experiment", "freeze", str(path)]) == 2


def test_the_schedule_is_seeded_and_interleaved(tmp_path: Path) -> None:
    plan = load_plan(_plan(tmp_path))
    s = schedule(plan)
    assert len(s) == 8 and len({x.key for x in s}) == 8
    assert s == schedule(load_plan(_plan(tmp_path)))
    # every repetition completes all (task, condition) cells before the next starts
    assert {x.repetition for x in s[:4]} == {0} and {x.repetition for x in s[4:]} == {1}
    other = load_plan(_plan(tmp_path, GOOD.replace("seed = 3", "seed = 4")))
    assert [x.key for x in schedule(other)] != [x.key for x in s]


def test_the_lock_reports_drift(tmp_path: Path) -> None:
    path = _plan(tmp_path)
    plan = load_plan(path)
    with pytest.raises(OptarenaError, match="no lock file"):
        drift(plan)
    freeze(plan)
    assert drift(plan) == []
    (tmp_path / "art" / "CLAUDE.md").write_text("a new hint")
    changed = drift(load_plan(path))
    assert len(changed) == 1 and changed[0].startswith("conditions.b.artifacts_sha256: ")
    path.write_text(GOOD.replace("repetitions = 2", "repetitions = 3"))
    changed = drift(load_plan(path))
    assert "plan.experiment.repetitions: 2 -> 3" in changed  # the field, not only a hash
    assert "schedule: the trial list changed" in changed
    assert main(["experiment", "run", str(path), "--ledger", str(tmp_path / "l")]) == 2
