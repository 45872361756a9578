"""A ledger written by an earlier release stays readable: every trial, judgement and metered
call of `data/ledger-v2.db` (schema 2, trial record 1; see `data/make_ledger_v2.py`)."""

from __future__ import annotations

import shutil
import sqlite3
from pathlib import Path

import pytest

from optarena.ledger import SCHEMA_VERSION, Ledger
from optarena.records import CallRecord, Judgement, Metrics, TrialRecord

FIXTURE = Path(__file__).parent / "data" / "ledger-v2.db"


def _open_copy(tmp_path: Path) -> Ledger:
    home = tmp_path / "ledger"
    home.mkdir()
    shutil.copyfile(FIXTURE, home / "ledger.db")
    return Ledger(home)


def test_every_trial_and_judgement_of_an_older_ledger_reads(tmp_path: Path) -> None:
    with _open_copy(tmp_path) as ledger:
        assert ledger.schema_version == SCHEMA_VERSION  # migrated on open
        trials = ledger.trials(limit=None)
        assert len(trials) == 4 and all(isinstance(t, TrialRecord) for t in trials)
        assert sorted(t.state for t in trials) == [
            "complete",
            "complete",
            "complete",
            "interrupted",
        ]
        judgements = [j for t in trials for j in ledger.judgements(t.id)]
        assert len(judgements) == 4 and all(isinstance(j, Judgement) for j in judgements)
        assert sorted(j.kind for j in judgements) == ["rejudge", "trial", "trial", "trial"]
        for t in trials:
            assert ledger.get(t.id) == t
        measured = [j for j in judgements if j.metrics is not None]
        assert len(measured) == 1 and measured[0].verdict == "accepted"
        m = measured[0].metrics
        assert isinstance(m, Metrics) and m.kind == "paired_calls"  # typed on read (v1 -> v2)
        assert m.overall.verdict == m.verdict and m.workloads and m.workloads[0].pairs
        (speed_trial,) = (t for t in trials if t.metrics is not None)
        assert speed_trial.metrics == m
        verdicts = sorted(t.verdict or "-" for t in trials)
        assert verdicts == ["-", "accepted", "accepted", "rejected"]
        (interrupted,) = (t for t in trials if t.state == "interrupted")
        assert interrupted.error and "KeyboardInterrupt" in interrupted.error


def test_the_metered_calls_of_an_older_ledger_read(tmp_path: Path) -> None:
    with _open_copy(tmp_path) as ledger:
        (metered,) = (t for t in ledger.trials(limit=None) if t.agent.name == "claude")
        calls = ledger.calls(metered.id)
        assert len(calls) == 1 and isinstance(calls[0], CallRecord)
        assert (calls[0].api, calls[0].input_tokens) == ("anthropic", 12)
        assert metered.metered_usage is not None and metered.metered_usage.calls == 1


def test_the_judgements_table_rebuilt_by_migration_3_keeps_ids_and_stays_frozen(
    tmp_path: Path,
) -> None:
    with _open_copy(tmp_path) as ledger:
        trials = ledger.trials(limit=None)
        before = sorted(j.id or 0 for t in trials for j in ledger.judgements(t.id))
        assert before == [1, 2, 3, 4]
        (done,) = (t for t in trials if t.metrics is not None)
        old = ledger.judgements(done.id)[0]
        new = old.model_copy(update={"id": None, "verdict": "unverified", "metrics": None})
        assert ledger.add_judgement(new) == 5  # ids go on after the copied rows
        conn = sqlite3.connect(ledger.db_path)
        with pytest.raises(sqlite3.DatabaseError, match="never changed or deleted"):
            conn.execute("DELETE FROM judgements WHERE id = 1")
        conn.close()
