"""`evolve`: the one way records are changed. It refuses a name that is not a field and a value
the field refuses, where `model_copy(update=...)` takes both silently (the negative controls
below show that it does, so the checks are evolve's own), and keeps everything else as it was:
unchanged fields, nested models as models, which fields were set, private attributes."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest
from pydantic import BaseModel, ConfigDict, Field, PrivateAttr, ValidationError

from optarena.ledger import Ledger
from optarena.records import (
    AgentInfo,
    AgentLimits,
    Condition,
    JudgeSettings,
    Metrics,
    TaskInfo,
    TrialRecord,
    Usage,
    evolve,
)

FIXTURE = Path(__file__).parents[1] / "ledger" / "data" / "ledger-v2.db"


def _record() -> TrialRecord:
    return TrialRecord(
        id="t1",
        state="running",
        created_at="2025-01-01T00:00:00Z",
        host="h",
        pid=1,
        task=TaskInfo(id="rmsnorm", version="1.0.0", sha256="t" * 64, root="/tasks/rmsnorm"),
        agent=AgentInfo(name="command", label="command", is_agent=True, runner="m:C"),
        limits=AgentLimits(wall_s=10),
        judge_settings=JudgeSettings(measure=False),
        runtime={"sha256": "r" * 64},
        judge_sha256="j" * 64,
        workspace="/ws",
    )


def _measured(tmp_path: Path) -> TrialRecord:
    """A real trial with speed metrics, from an older release's ledger."""
    home = tmp_path / "ledger"
    home.mkdir()
    shutil.copyfile(FIXTURE, home / "ledger.db")
    with Ledger(home) as ledger:
        (measured,) = (t for t in ledger.trials(limit=None) if t.metrics is not None)
    return measured


def test_a_misspelled_field_is_refused_by_name() -> None:
    record = _record()
    with pytest.raises(TypeError, match=r"TrialRecord has no field 'stat' \(did you mean 'state'"):
        evolve(record, stat="complete")
    with pytest.raises(TypeError, match=r"no field 'nonsense'; 'verdikt' \(did you mean"):
        evolve(record, state="complete", nonsense=1, verdikt="accepted")
    assert evolve(record, state="complete").state == "complete"  # the right name passes


def test_negative_control_model_copy_takes_a_misspelled_field_silently() -> None:
    copy = _record().model_copy(update={"stat": "complete"})
    assert copy.state == "running"  # nothing refused it, and the field is unchanged
    assert copy.__dict__["stat"] == "complete"  # the typo rides along in the copy


def test_a_wrong_type_or_value_is_refused() -> None:
    record = _record()
    with pytest.raises(ValidationError, match="pid"):
        evolve(record, pid="not a number")
    with pytest.raises(ValidationError, match="state"):
        evolve(record, state="finished")  # not a TrialState
    with pytest.raises(ValidationError, match="usage"):
        evolve(record, usage={"input_tokens": 1, "typo_tokens": 2})  # extra="forbid" inside
    assert evolve(record, pid=7).pid == 7  # the control: a right value passes


def test_negative_control_model_copy_keeps_a_wrong_type() -> None:
    copy = _record().model_copy(update={"pid": "not a number"})
    assert copy.pid == "not a number"


def test_field_and_model_constraints_run_frozen_models_included() -> None:
    limits = AgentLimits(wall_s=10, max_calls=3)
    with pytest.raises(ValidationError, match="greater than 0"):
        evolve(limits, wall_s=0)
    longer = evolve(limits, wall_s=20)
    assert (longer.wall_s, longer.max_calls, limits.wall_s) == (20, 3, 10)
    with pytest.raises(ValidationError, match="letters, digits"):  # a field_validator
        evolve(Condition(name="a", agent="command"), name="a b")


def test_unchanged_fields_keep_their_values_and_the_original_is_untouched() -> None:
    record = _record()
    before = record.model_dump()
    done = evolve(record, state="complete", verdict="accepted")
    assert record.model_dump() == before
    assert done.model_dump() == {**before, "state": "complete", "verdict": "accepted"}
    assert evolve(record) == record


def test_nested_models_stay_models(tmp_path: Path) -> None:
    measured = _measured(tmp_path)
    assert isinstance(measured.metrics, Metrics)
    done = evolve(measured, error="x")
    assert isinstance(done.metrics, Metrics) and done.metrics == measured.metrics
    assert isinstance(done.task, TaskInfo) and done.task == measured.task
    assert done.model_dump() == {**measured.model_dump(), "error": "x"}
    # a plain dict given for a nested model becomes that model
    changed = evolve(measured, usage={"input_tokens": 5, "output_tokens": 6})
    assert isinstance(changed.usage, Usage) and changed.usage.total_tokens() == 11
    # and a JSON round trip of the result reads back equal
    assert TrialRecord.model_validate_json(done.model_dump_json()) == done


def test_which_fields_were_set_is_kept_as_model_copy_keeps_it() -> None:
    record = _record()
    done = evolve(record, verdict="accepted")
    assert done.model_fields_set == record.model_fields_set | {"verdict"}
    assert done.model_dump(exclude_unset=True) == record.model_copy(
        update={"verdict": "accepted"}
    ).model_dump(exclude_unset=True)


class _Aliased(BaseModel):
    model_config = ConfigDict(extra="forbid")

    json_path: str = Field(alias="json")
    hidden: str = Field(default="", exclude=True)
    _cache: dict[str, int] = PrivateAttr(default_factory=dict)


def test_aliases_excluded_fields_and_private_attributes_survive() -> None:
    m = _Aliased.model_validate({"json": "a.b", "hidden": "kept"})
    m._cache["n"] = 1
    out = evolve(m, json_path="c.d")  # changes are given by field name, as the attribute reads
    assert (out.json_path, out.hidden, out._cache) == ("c.d", "kept", {"n": 1})
    assert evolve(m, hidden="new").json_path == "a.b"
    with pytest.raises(TypeError, match="no field 'json'"):  # the alias is not a field name
        evolve(m, json="x")
