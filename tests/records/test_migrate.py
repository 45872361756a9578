"""Reading older records: migrations apply in order, newer versions are refused, bad data is
named by where it was read from and which field."""

from __future__ import annotations

from typing import Any

import pytest

from optarena.errors import RecordError
from optarena.records import (
    CALL_RECORD_VERSION,
    RecordMigration,
    load_call,
    load_judgement,
    load_tool_call,
    load_trial,
    migrate_values,
)


def _rename(old: str, new: str) -> Any:
    def apply(data: dict[str, Any]) -> dict[str, Any]:
        data[new] = data.pop(old)
        return data

    return apply


STEPS = (
    RecordMigration("trial", 1, "cost became cost_usd", _rename("cost", "cost_usd")),
    RecordMigration("trial", 2, "cost_usd became spent_usd", _rename("cost_usd", "spent_usd")),
    RecordMigration("call", 1, "not for trials", _rename("x", "y")),
)


def test_migrations_apply_in_order_up_to_the_current_version() -> None:
    old = {"schema_version": 1, "cost": 0.5}
    out = migrate_values("trial", old, current=3, migrations=STEPS)
    assert out == {"schema_version": 3, "spent_usd": 0.5}
    assert old == {"schema_version": 1, "cost": 0.5}  # the input is not changed
    # a record without a version is version 1, as every first version was
    assert migrate_values("trial", {"cost": 1}, current=2, migrations=STEPS) == {
        "schema_version": 2,
        "cost_usd": 1,
    }
    # the current version passes unchanged
    same = {"schema_version": 3, "spent_usd": 2}
    assert migrate_values("trial", same, current=3, migrations=STEPS) == same


def test_a_newer_record_or_a_missing_step_is_refused() -> None:
    with pytest.raises(RecordError, match="trial record version 4 is newer than this optarena"):
        migrate_values("trial", {"schema_version": 4}, current=3, migrations=STEPS)
    with pytest.raises(RecordError, match="no migration of judgement records from version 1"):
        migrate_values("judgement", {"schema_version": 1}, current=2, migrations=STEPS)
    with pytest.raises(RecordError, match="schema_version must be a positive integer"):
        migrate_values("trial", {"schema_version": "1"}, migrations=STEPS)


def test_loading_names_where_and_which_field() -> None:
    with pytest.raises(RecordError, match=r"trial abc: not JSON"):
        load_trial("{", "trial abc")
    with pytest.raises(RecordError, match=r"judgement 7: field 'trial_id': Field required"):
        load_judgement('{"schema_version": 1}', "judgement 7")
    newer = f'{{"schema_version": {CALL_RECORD_VERSION + 1}}}'
    with pytest.raises(RecordError, match=r"log:3: call record version \d+ is newer"):
        load_call(newer, "log:3")
    with pytest.raises(RecordError, match="must be a JSON object"):
        load_trial("[]")


def test_trial_v1_metrics_become_typed_by_kind() -> None:
    """v1 stored metrics as a plain dict: the builtin judge's (format 2) or an external
    benchmark's (`rounds`, no `workloads`); v2 tells them apart by `kind`."""
    paired = {"schema_version": 2, "verdict": "improved", "workloads": []}
    out = migrate_values("trial", {"schema_version": 1, "metrics": paired})
    assert out["metrics"] == {**paired, "schema_version": 3, "kind": "paired_calls"}
    external = {"verdict": "improved", "rounds": [], "crosscheck": []}
    out = migrate_values("judgement", {"schema_version": 1, "metrics": external})
    assert out["metrics"]["kind"] == "external_benchmark"
    assert out["metrics"]["schema_version"] == 1
    assert migrate_values("trial", {"schema_version": 1, "metrics": None})["metrics"] is None
    # the first release's metrics (format 1): kept as an older protocol, never refused
    old = migrate_values("trial", {"schema_version": 1, "metrics": {"workloads": []}})
    assert old["metrics"]["kind"] == "legacy_protocol" and old["metrics"]["protocol_version"] == 1
    assert old["metrics"]["data"] == {"workloads": []}


def test_formats_owned_by_other_packages_read_through_the_same_steps() -> None:
    """task.toml, external specs, experiment locks pass their own version; telemetry lines are
    records like calls: a newer one is refused, never guessed at."""
    assert migrate_values("task", {"id": "x"}, current=1) == {"id": "x"}
    with pytest.raises(RecordError, match=r"task\.toml: task record version 2 is newer"):
        migrate_values("task", {"schema_version": 2}, current=1, where="task.toml")
    with pytest.raises(TypeError, match="must be passed as `current`"):
        migrate_values("lock", {})
    with pytest.raises(RecordError, match=r"tools:2: tool_call record version 9 is newer"):
        load_tool_call('{"schema_version": 9}', "tools:2")


def test_an_external_spec_asking_a_verdict_over_3_rounds_is_refused_not_rewritten() -> None:
    ok = {"schema_version": 1, "measurement": {"min_rounds": 5}}
    assert migrate_values("external_task", ok, current=2)["measurement"] == {"min_rounds": 5}
    with pytest.raises(RecordError, match=r"min_rounds = 3: .* freeze the spec again"):
        migrate_values("external_task", {"measurement": {"min_rounds": 3}}, current=2)


# Lines as optarena wrote them before the task tools' and the relays' records were one (both
# files can be in a ledger's artifacts): each still reads, as the current record.
TASK_TOOLS_V2 = (
    '{"schema_version":2,"call_id":"ab12-1","tool":"measure","arguments_sha256":"00",'
    '"started_at":"2026-01-01T00:00:00.000+00:00","duration_s":1.5,"status":"ok",'
    '"result_bytes":42,"verdict":"accepted","error":null}'
)
RELAYED_V1 = (
    '{"schema_version":1,"server":"bench","tool":"probe","arguments":{"n":7},'
    '"started_at":"2026-01-01T00:00:00.000+00:00","duration_s":0.25,"status":"ok",'
    '"result_bytes":20,"result":"{\\"checked 7 rows\\"}"}'
)
RELAYED_V1_NO_REPLY = (
    '{"schema_version":1,"server":"bench","tool":"probe","arguments":null,'
    '"started_at":"2026-01-01T00:00:00.000+00:00","duration_s":null,"status":"no_reply",'
    '"result_bytes":0,"result":""}'
)


def test_older_tool_call_lines_of_either_writer_read_as_the_one_record() -> None:
    from optarena.records import NO_REPLY, TELEMETRY_SCHEMA_VERSION, arguments_sha256

    tools = load_tool_call(TASK_TOOLS_V2)
    assert (tools.server, tools.tool, tools.verdict, tools.arguments) == (
        None, "measure", "accepted", None
    )  # fmt: skip
    assert tools.schema_version == TELEMETRY_SCHEMA_VERSION
    relayed = load_tool_call(RELAYED_V1)
    assert (relayed.server, relayed.tool, relayed.status, relayed.arguments) == (
        "bench", "probe", "ok", {"n": 7}
    )  # fmt: skip
    assert relayed.arguments_sha256 == arguments_sha256({"n": 7})
    assert "checked 7 rows" in relayed.result and relayed.call_id is None
    cut = load_tool_call(RELAYED_V1_NO_REPLY)
    assert (cut.status, cut.error, cut.duration_s) == ("cut_off", NO_REPLY, None)
