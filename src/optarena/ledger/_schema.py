"""The ledger's SQL schema as an ordered list of migrations.

The schema version is SQLite's `user_version`; `schema_migrations` also names every applied
migration and when. Opening a ledger applies the missing migrations in order, each in its own
transaction; a ledger whose version is newer than this optarena knows is refused (an older
optarena must not write rows it does not understand).

To add a table (e.g. `api_calls(trial_id, ...)` for a metering proxy), append a `Migration`
with the next version to `MIGRATIONS`. Migrations are additive: never edit or reorder a
released one, since ledgers in the wild have already applied it.
"""

from __future__ import annotations

import sqlite3
from dataclasses import dataclass
from datetime import UTC, datetime

from optarena.errors import LedgerError


@dataclass(frozen=True)
class Migration:
    version: int
    name: str
    statements: tuple[str, ...]


_IMMUTABLE = "BEGIN SELECT RAISE(ABORT, 'ledger rows are never changed or deleted'); END"

_V1 = (
    """CREATE TABLE trials (
        id TEXT PRIMARY KEY,
        state TEXT NOT NULL CHECK (state IN ('running', 'complete', 'interrupted')),
        created_at TEXT NOT NULL,
        finished_at TEXT,
        task_id TEXT NOT NULL,
        task_version TEXT NOT NULL,
        task_sha256 TEXT NOT NULL,
        agent_name TEXT NOT NULL,
        agent_label TEXT NOT NULL,
        is_agent INTEGER NOT NULL,
        agent_version TEXT,
        agent_model TEXT,
        labels TEXT NOT NULL,
        judge_sha256 TEXT NOT NULL,
        runtime_sha256 TEXT NOT NULL,
        agent_status TEXT,
        verdict TEXT,
        reason_codes TEXT,
        candidate_sha256 TEXT,
        agent_wall_s REAL,
        agent_cpu_s REAL,
        cost_usd REAL,
        input_tokens INTEGER,
        output_tokens INTEGER,
        record TEXT NOT NULL
    )""",
    "CREATE INDEX trials_task ON trials (task_id, created_at)",
    "CREATE INDEX trials_agent ON trials (agent_name, created_at)",
    "CREATE INDEX trials_state ON trials (state)",
    # A running row may be completed or interrupted once; then it is frozen.
    "CREATE TRIGGER trials_frozen BEFORE UPDATE ON trials "
    "WHEN OLD.state <> 'running' OR NEW.id <> OLD.id " + _IMMUTABLE,
    "CREATE TRIGGER trials_kept BEFORE DELETE ON trials " + _IMMUTABLE,
    """CREATE TABLE judgements (
        id INTEGER PRIMARY KEY AUTOINCREMENT,
        trial_id TEXT NOT NULL REFERENCES trials (id),
        kind TEXT NOT NULL CHECK (kind IN ('trial', 'rejudge')),
        created_at TEXT NOT NULL,
        verdict TEXT NOT NULL CHECK (verdict IN ('accepted', 'rejected')),
        reason_codes TEXT NOT NULL,
        judge_sha256 TEXT,
        runtime_sha256 TEXT,
        task_sha256 TEXT,
        candidate_sha256 TEXT,
        judge_json TEXT,
        record TEXT NOT NULL
    )""",
    "CREATE INDEX judgements_trial ON judgements (trial_id, id)",
    "CREATE TRIGGER judgements_frozen BEFORE UPDATE ON judgements " + _IMMUTABLE,
    "CREATE TRIGGER judgements_kept BEFORE DELETE ON judgements " + _IMMUTABLE,
    """CREATE TABLE trial_artifacts (
        trial_id TEXT NOT NULL REFERENCES trials (id),
        name TEXT NOT NULL,
        sha256 TEXT NOT NULL,
        size INTEGER NOT NULL,
        PRIMARY KEY (trial_id, name)
    )""",
    "CREATE TRIGGER trial_artifacts_frozen BEFORE UPDATE ON trial_artifacts " + _IMMUTABLE,
    "CREATE TRIGGER trial_artifacts_kept BEFORE DELETE ON trial_artifacts " + _IMMUTABLE,
)

# One row per model-API call a trial's metering proxy saw (optarena.proxy: CallRecord).
_V2 = (
    """CREATE TABLE api_calls (
        trial_id TEXT NOT NULL REFERENCES trials (id),
        seq INTEGER NOT NULL,
        started_at TEXT NOT NULL,
        api TEXT NOT NULL,
        method TEXT NOT NULL,
        path TEXT NOT NULL,
        model TEXT,
        stream INTEGER NOT NULL,
        status INTEGER,
        request_id TEXT,
        reply_id TEXT,
        latency_s REAL,
        ttfb_s REAL,
        input_tokens INTEGER,
        output_tokens INTEGER,
        cache_read_tokens INTEGER,
        cache_write_tokens INTEGER,
        reasoning_tokens INTEGER,
        cost_usd REAL,
        prices_version TEXT,
        refused TEXT,
        error TEXT,
        PRIMARY KEY (trial_id, seq)
    )""",
    "CREATE TRIGGER api_calls_frozen BEFORE UPDATE ON api_calls " + _IMMUTABLE,
    "CREATE TRIGGER api_calls_kept BEFORE DELETE ON api_calls " + _IMMUTABLE,
)

# An external task without a quality gate is judged `unverified`. SQLite cannot change a CHECK
# constraint, so the table is rebuilt with its rows and ids (DROP TABLE fires no triggers).
_V3 = (
    """CREATE TABLE judgements_v3 (
        id INTEGER PRIMARY KEY AUTOINCREMENT,
        trial_id TEXT NOT NULL REFERENCES trials (id),
        kind TEXT NOT NULL CHECK (kind IN ('trial', 'rejudge')),
        created_at TEXT NOT NULL,
        verdict TEXT NOT NULL CHECK (verdict IN ('accepted', 'rejected', 'unverified')),
        reason_codes TEXT NOT NULL,
        judge_sha256 TEXT,
        runtime_sha256 TEXT,
        task_sha256 TEXT,
        candidate_sha256 TEXT,
        judge_json TEXT,
        record TEXT NOT NULL
    )""",
    "INSERT INTO judgements_v3 SELECT * FROM judgements",
    "DROP TABLE judgements",
    "ALTER TABLE judgements_v3 RENAME TO judgements",
    "CREATE INDEX judgements_trial ON judgements (trial_id, id)",
    "CREATE TRIGGER judgements_frozen BEFORE UPDATE ON judgements " + _IMMUTABLE,
    "CREATE TRIGGER judgements_kept BEFORE DELETE ON judgements " + _IMMUTABLE,
)

# A model call whose counts are unknown (a stream cut before its final usage) keeps what it did
# report as a lower bound, with the reason, never as the count.
_V4 = (
    "ALTER TABLE api_calls ADD COLUMN tokens_at_least INTEGER",
    "ALTER TABLE api_calls ADD COLUMN cost_usd_at_least REAL",
    "ALTER TABLE api_calls ADD COLUMN usage_note TEXT",
)

MIGRATIONS: tuple[Migration, ...] = (
    Migration(1, "trials, judgements, trial_artifacts", _V1),
    Migration(2, "api_calls (metering proxy)", _V2),
    Migration(3, "judgements: verdict 'unverified' (external tasks without a gate)", _V3),
    Migration(4, "api_calls: lower bounds of unknown counts", _V4),
)
SCHEMA_VERSION = MIGRATIONS[-1].version


def _now() -> str:
    return datetime.now(UTC).isoformat(timespec="milliseconds")


def current_version(conn: sqlite3.Connection) -> int:
    return int(conn.execute("PRAGMA user_version").fetchone()[0])


def migrate(conn: sqlite3.Connection, where: str) -> int:
    """Bring the database to SCHEMA_VERSION; refuse a newer one. Returns the version."""
    found = current_version(conn)
    if found > SCHEMA_VERSION:
        raise LedgerError(
            f"{where}: ledger schema version {found} is newer than this optarena understands "
            f"({SCHEMA_VERSION}); upgrade optarena or use another --ledger"
        )
    for m in MIGRATIONS:
        if m.version <= found:
            continue
        conn.execute("BEGIN IMMEDIATE")
        try:
            if current_version(conn) >= m.version:  # another process migrated meanwhile
                conn.execute("ROLLBACK")
                continue
            if m.version == 1:
                conn.execute(
                    "CREATE TABLE schema_migrations (version INTEGER PRIMARY KEY, "
                    "name TEXT NOT NULL, applied_at TEXT NOT NULL)"
                )
            for stmt in m.statements:
                conn.execute(stmt)
            conn.execute(
                "INSERT INTO schema_migrations (version, name, applied_at) VALUES (?, ?, ?)",
                (m.version, m.name, _now()),
            )
            conn.execute(f"PRAGMA user_version = {int(m.version)}")
            conn.execute("COMMIT")
        except sqlite3.Error as e:
            conn.execute("ROLLBACK")
            raise LedgerError(f"{where}: migration {m.version} ({m.name}) failed: {e}") from None
        except BaseException:
            conn.execute("ROLLBACK")
            raise
    return current_version(conn)
