"""Metered model calls in the ledger: written with the trial's finish, in one transaction;
taken in from the trial's `api_calls.jsonl` when the trial never finished (Ctrl-C, kill -9)."""

from __future__ import annotations

import json
import sqlite3
import subprocess
from collections.abc import Callable
from pathlib import Path

import pytest

from optarena.ledger import Ledger, utc_now
from optarena.records import CallRecord, TrialPaths, TrialRecord

MakeRecord = Callable[..., TrialRecord]
SECRET = "sk-test-very-secret-123"


def call(seq: int, **kw: object) -> CallRecord:
    fields: dict[str, object] = {
        "seq": seq,
        "started_at": utc_now(),
        "api": "anthropic",
        "method": "POST",
        "path": "/v1/messages",
        "model": "claude-sonnet-4-5",
        "stream": True,
        "status": 200,
        "input_tokens": 12,
        "output_tokens": 3,
        "cost_usd": 0.0001,
    }
    return CallRecord.model_validate(fields | kw)


def finished(record: TrialRecord) -> TrialRecord:
    update = {"state": "complete", "finished_at": utc_now(), "verdict": "accepted"}
    return record.model_copy(update=update)


def test_calls_are_written_with_the_finish_and_read_back(
    tmp_path: Path, make_record: MakeRecord
) -> None:
    with Ledger(tmp_path / "L") as ledger:
        rec = make_record("t1")
        ledger.begin_trial(rec)
        calls = [call(1), call(2, api="responses", path="/v1/responses", stream=False)]
        ledger.finish_trial(finished(rec), calls=calls)
        assert ledger.calls("t1") == calls
        dump = sqlite3.connect(ledger.db_path).execute("SELECT * FROM api_calls").fetchall()
        assert SECRET not in repr(dump)


def test_a_failed_finish_writes_no_call(tmp_path: Path, make_record: MakeRecord) -> None:
    with Ledger(tmp_path / "L") as ledger:
        rec = make_record("t1")
        ledger.begin_trial(rec)
        with pytest.raises(sqlite3.IntegrityError):
            ledger.finish_trial(finished(rec), calls=[call(1), call(1)])  # same seq twice
        assert ledger.get("t1").state == "running" and ledger.calls("t1") == []


def _log(ledger: Ledger, trial_id: str, lines: list[str]) -> Path:
    log = TrialPaths.of(ledger.work_dir(trial_id)).calls_log
    log.parent.mkdir(parents=True)
    log.write_text("".join(lines), encoding="utf-8")
    return log


def test_kill_9_loses_no_logged_call(tmp_path: Path, make_record: MakeRecord) -> None:
    dead = subprocess.Popen(["true"])
    dead.wait()
    home = tmp_path / "L"
    with Ledger(home) as ledger:
        ledger.begin_trial(make_record("gone", pid=dead.pid))
        good = [call(1), call(2, refused="call budget exhausted (1 of 1 calls made)")]
        cut = call(3).model_dump_json()[:40]  # the process died mid-write
        _log(ledger, "gone", [c.model_dump_json() + "\n" for c in good] + [cut])
    with Ledger.open(home) as ledger:
        ledger.reconcile()  # the recovery after the crash
        rec = ledger.get("gone")
        assert rec.state == "interrupted"
        assert ledger.calls("gone") == good
        assert rec.error is not None and "call log line not recorded" in rec.error


def test_an_interrupt_takes_in_the_calls_logged_so_far(
    tmp_path: Path, make_record: MakeRecord
) -> None:
    with Ledger(tmp_path / "L") as ledger:
        ledger.begin_trial(make_record("t1"))
        _log(ledger, "t1", [call(1).model_dump_json() + "\n"])
        assert ledger.mark_interrupted("t1", "during agent: KeyboardInterrupt")
        assert [c.seq for c in ledger.calls("t1")] == [1]
        assert ledger.get("t1").error == "during agent: KeyboardInterrupt"


def test_an_unknown_count_keeps_its_lower_bound_and_reason(
    tmp_path: Path, make_record: MakeRecord
) -> None:
    """A call cut before its final usage is stored with its counts unknown and what it did
    report as a named lower bound, in the ledger and in the log an interrupted trial takes
    in; a line an older optarena wrote (call record version 1) still reads."""
    cut = call(
        1,
        input_tokens=None,
        output_tokens=None,
        cost_usd=None,
        tokens_at_least=1201,
        cost_usd_at_least=0.0013,
        usage_note="the agent hung up before its final usage event",
    )
    with Ledger(tmp_path / "L") as ledger:
        rec = make_record("t1")
        ledger.begin_trial(rec)
        ledger.finish_trial(finished(rec), calls=[cut])
        assert ledger.calls("t1") == [cut]
        log = TrialPaths.of(ledger.work_dir("t2")).calls_log
        log.parent.mkdir(parents=True)
        old = call(1).model_dump(exclude={"tokens_at_least", "cost_usd_at_least", "usage_note"})
        old["schema_version"] = 1
        log.write_text(json.dumps(old) + "\n" + cut.model_copy(update={"seq": 2}).model_dump_json())
        calls, notes = ledger.logged_calls("t2")
        assert notes == [] and [c.tokens_at_least for c in calls] == [None, 1201]
