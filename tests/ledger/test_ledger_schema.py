"""Schema versioning: migrations apply in order, a newer ledger is refused."""

from __future__ import annotations

import sqlite3
from collections.abc import Callable
from pathlib import Path

import pytest

from optarena.errors import LedgerError
from optarena.ledger import SCHEMA_VERSION, Ledger, Migration, resolve_home

# private: monkeypatched (a migration that fails, one more migration)
from optarena.ledger import _schema as schema
from optarena.records import TrialRecord


def test_a_newer_ledger_is_refused(tmp_path: Path) -> None:
    Ledger(tmp_path).close()
    conn = sqlite3.connect(tmp_path / "ledger.db")
    conn.execute(f"PRAGMA user_version = {SCHEMA_VERSION + 1}")
    conn.close()
    with pytest.raises(LedgerError, match="newer than this optarena"):
        Ledger(tmp_path)


def test_a_file_that_is_not_sqlite_is_a_clear_error(tmp_path: Path) -> None:
    (tmp_path / "ledger.db").write_bytes(b"this is not a database" * 100)
    with pytest.raises(LedgerError, match="not a usable ledger"):
        Ledger(tmp_path)


def test_an_added_migration_upgrades_an_existing_ledger(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, make_record: Callable[..., TrialRecord]
) -> None:
    with Ledger(tmp_path) as ledger:
        ledger.begin_trial(make_record("t1"))
    extra = Migration(
        SCHEMA_VERSION + 1,
        "extension_rows",
        ("CREATE TABLE extension_rows (trial_id TEXT NOT NULL REFERENCES trials (id), n INT)",),
    )
    monkeypatch.setattr(schema, "MIGRATIONS", (*schema.MIGRATIONS, extra))
    monkeypatch.setattr(schema, "SCHEMA_VERSION", extra.version)
    with Ledger(tmp_path) as ledger:
        assert ledger.schema_version == extra.version
        with ledger.transaction() as c:
            c.execute("INSERT INTO extension_rows VALUES ('t1', 12)")
        assert ledger.get("t1").id == "t1"  # old rows intact
        names = [r[0] for r in ledger._conn.execute("SELECT name FROM schema_migrations")]
        assert names[-1] == "extension_rows"


def test_a_failing_migration_changes_nothing(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    Ledger(tmp_path).close()
    original = SCHEMA_VERSION
    broken = Migration(SCHEMA_VERSION + 1, "broken", ("CREATE TABLE t2 (x)", "NOT SQL"))
    monkeypatch.setattr(schema, "MIGRATIONS", (*schema.MIGRATIONS, broken))
    monkeypatch.setattr(schema, "SCHEMA_VERSION", broken.version)
    with pytest.raises(LedgerError, match=r"migration \d+ \(broken\) failed"):
        Ledger(tmp_path)
    conn = sqlite3.connect(tmp_path / "ledger.db")
    assert conn.execute("PRAGMA user_version").fetchone()[0] == original
    tables = {r[0] for r in conn.execute("SELECT name FROM sqlite_master WHERE type='table'")}
    assert "t2" not in tables


def test_location_flag_then_env_then_xdg(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OPTARENA_LEDGER", str(tmp_path / "env"))
    monkeypatch.setenv("XDG_DATA_HOME", str(tmp_path / "xdg"))
    assert resolve_home(tmp_path / "flag") == (tmp_path / "flag").resolve()
    assert resolve_home() == (tmp_path / "env").resolve()
    monkeypatch.delenv("OPTARENA_LEDGER")
    assert resolve_home() == (tmp_path / "xdg" / "optarena").resolve()
    monkeypatch.delenv("XDG_DATA_HOME")
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    assert resolve_home() == (tmp_path / "home" / ".local/share/optarena").resolve()
