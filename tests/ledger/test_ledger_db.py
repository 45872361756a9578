"""The SQLite ledger: rows, transactions, immutability, crash reconciliation, lookups."""

from __future__ import annotations

import sqlite3
import subprocess
from collections.abc import Callable
from pathlib import Path

import pytest

from optarena.errors import LedgerError
from optarena.ledger import SCHEMA_VERSION, Ledger, utc_now
from optarena.records import Judgement, TrialRecord

MakeRecord = Callable[..., TrialRecord]


@pytest.fixture
def ledger(tmp_path: Path) -> Ledger:
    return Ledger(tmp_path / "L")


def judgement(trial_id: str, verdict: str = "accepted", kind: str = "trial") -> Judgement:
    return Judgement.model_validate(
        {
            "trial_id": trial_id,
            "kind": kind,
            "created_at": utc_now(),
            "verdict": verdict,
            "reason_codes": [] if verdict == "accepted" else ["out_of_tolerance"],
            "settings": {"measure": False},
        }
    )


def completed(record: TrialRecord, **update: object) -> TrialRecord:
    fields: dict[str, object] = {
        "state": "complete",
        "finished_at": utc_now(),
        "agent_status": "completed",
        "verdict": "accepted",
    }
    fields.update(update)
    return record.model_copy(update=fields)


def test_new_ledger_is_wal_and_at_the_current_schema(ledger: Ledger) -> None:
    conn = sqlite3.connect(ledger.db_path)
    assert conn.execute("PRAGMA journal_mode").fetchone()[0] == "wal"
    assert conn.execute("PRAGMA user_version").fetchone()[0] == SCHEMA_VERSION
    names = [r[0] for r in conn.execute("SELECT name FROM schema_migrations ORDER BY version")]
    assert len(names) == SCHEMA_VERSION
    assert ledger.schema_version == SCHEMA_VERSION


def test_running_then_complete_in_one_row(ledger: Ledger, make_record: MakeRecord) -> None:
    rec = make_record("t1")
    ledger.begin_trial(rec)
    assert ledger.get("t1").state == "running"
    sha = ledger.store.put_text("log line\n")
    done = completed(rec, artifacts={"stdout": sha})
    ledger.finish_trial(done, judgement("t1"))
    got = ledger.get("t1")
    assert got == done
    assert [j.verdict for j in ledger.judgements("t1")] == ["accepted"]
    row = ledger._conn.execute("SELECT * FROM trial_artifacts WHERE trial_id = 't1'").fetchone()
    assert (row["name"], row["sha256"], row["size"]) == ("stdout", sha, len("log line\n"))


def test_finished_rows_cannot_be_changed_or_deleted(
    ledger: Ledger, make_record: MakeRecord
) -> None:
    rec = make_record("t1")
    ledger.begin_trial(rec)
    ledger.finish_trial(completed(rec), judgement("t1"))
    with pytest.raises(sqlite3.IntegrityError, match="never changed"):
        ledger._conn.execute("UPDATE trials SET verdict = 'rejected' WHERE id = 't1'")
    with pytest.raises(sqlite3.IntegrityError, match="never changed"):
        ledger._conn.execute("DELETE FROM trials")
    with pytest.raises(sqlite3.IntegrityError, match="never changed"):
        ledger._conn.execute("UPDATE judgements SET verdict = 'rejected'")
    with pytest.raises(LedgerError, match="not a running trial"):
        ledger.finish_trial(completed(rec, verdict="rejected"))
    assert ledger.get("t1").verdict == "accepted"


def test_a_failure_inside_finish_leaves_the_row_running_untouched(
    ledger: Ledger, make_record: MakeRecord
) -> None:
    rec = make_record("t1")
    ledger.begin_trial(rec)
    bad = judgement("no-such-trial")  # foreign key violation after the UPDATE succeeded
    with pytest.raises(sqlite3.IntegrityError):
        ledger.finish_trial(completed(rec), bad)
    assert ledger.get("t1") == rec
    assert ledger.judgements("t1") == []


def test_interrupt_keeps_the_start_record_and_adds_the_error(
    ledger: Ledger, make_record: MakeRecord
) -> None:
    rec = make_record("t1")
    ledger.begin_trial(rec)
    assert ledger.mark_interrupted("t1", "KeyboardInterrupt during agent")
    got = ledger.get("t1")
    assert got.state == "interrupted"
    assert got.error == "KeyboardInterrupt during agent"
    assert got.verdict is None and got.agent_status is None
    assert got.task == rec.task and got.agent == rec.agent
    assert not ledger.mark_interrupted("t1", "again")  # frozen now
    assert ledger.get("t1").error == "KeyboardInterrupt during agent"


def test_reconcile_marks_rows_of_dead_processes_interrupted(
    ledger: Ledger, make_record: MakeRecord
) -> None:
    dead = subprocess.Popen(["true"])
    dead.wait()
    ledger.begin_trial(make_record("gone", pid=dead.pid))
    ledger.begin_trial(make_record("alive"))  # this test process: still running
    assert ledger.reconcile() == ["gone"]
    assert ledger.get("gone").state == "interrupted"
    assert "ended without finishing" in (ledger.get("gone").error or "")
    assert ledger.get("alive").state == "running"


def test_trial_ids_resolve_by_unique_prefix(ledger: Ledger, make_record: MakeRecord) -> None:
    for tid in ("20260101-000000-aaaaaa", "20260101-000000-aabbbb", "20260102-000000-cccccc"):
        ledger.begin_trial(make_record(tid))
    assert ledger.resolve_id("20260102") == "20260102-000000-cccccc"
    with pytest.raises(LedgerError, match="ambiguous"):
        ledger.resolve_id("20260101-000000-aa")
    with pytest.raises(LedgerError, match="no trial 'zzz'"):
        ledger.get("zzz")
    with pytest.raises(LedgerError, match="no trial"):
        ledger.resolve_id("2026%")  # LIKE wildcards are literal


def test_filters_and_newest_first(ledger: Ledger, make_record: MakeRecord) -> None:
    for i, (task, verdict) in enumerate([("rmsnorm", "accepted"), ("softmax", "rejected")]):
        rec = make_record(f"t{i}", task=task)
        ledger.begin_trial(rec)
        ledger.finish_trial(completed(rec, verdict=verdict), judgement(f"t{i}", verdict))
    ledger.begin_trial(make_record("t9"))
    assert [r.id for r in ledger.trials()] == ["t9", "t1", "t0"]
    assert [r.id for r in ledger.trials(task="softmax")] == ["t1"]
    assert [r.id for r in ledger.trials(verdict="accepted")] == ["t0"]
    assert [r.id for r in ledger.trials(status="running")] == ["t9"]
    assert [r.id for r in ledger.trials(status="completed")] == ["t1", "t0"]
    assert ledger.trials(agent="codex") == []


def test_rejudge_adds_a_judgement_and_keeps_the_first(
    ledger: Ledger, make_record: MakeRecord
) -> None:
    rec = make_record("t1")
    ledger.begin_trial(rec)
    ledger.finish_trial(completed(rec), judgement("t1"))
    new_id = ledger.add_judgement(judgement("t1", "rejected", kind="rejudge"))
    js = ledger.judgements("t1")
    assert [(j.kind, j.verdict) for j in js] == [("trial", "accepted"), ("rejudge", "rejected")]
    assert js[1].id == new_id
    assert ledger.get("t1").verdict == "accepted"  # the trial row itself is unchanged
    with pytest.raises(LedgerError, match="no trial"):
        ledger.add_judgement(judgement("nope", kind="rejudge"))


def test_a_second_connection_sees_committed_rows(ledger: Ledger, make_record: MakeRecord) -> None:
    ledger.begin_trial(make_record("t1"))
    with Ledger(ledger.home) as other:
        assert other.get("t1").state == "running"
