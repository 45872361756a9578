"""The ledger: an SQLite database (WAL) plus a content-addressed artifact store.

Location: one directory, `--ledger DIR`, else `$OPTARENA_LEDGER`, else
`$XDG_DATA_HOME/optarena` (`~/.local/share/optarena`). It holds `ledger.db`, `artifacts/` and
`work/` (trial workspaces, kept).

Tables (schema version in `PRAGMA user_version`, migrations in `_schema.MIGRATIONS`):
- `trials`: one row per trial; indexed columns (task, agent, state, verdict, usage totals, ...)
  derived from `record`, the full `TrialRecord` JSON. Inserted as `running` when the trial
  starts; completed or marked `interrupted` once, in one transaction; frozen after that by
  triggers (no UPDATE, no DELETE).
- `judgements`: one row per judgement of a trial (`trial`, then any `rejudge`); never changed.
- `trial_artifacts`: trial id, artifact name (`stdout`, `diff`, `candidate`, `judge`,
  `logs/...`), sha256, size.
- `api_calls`: one row per model call a trial's metering proxy saw (`CallRecord`).

The ledger is the only writer of its database. What it stores are records
(`optarena.records`), read back through their migrations, so a ledger written by an older
optarena stays readable.

API for other parts of optarena:
- `Ledger.open(home)`; `begin_trial(record)`, `finish_trial(record, judgement, calls)`,
  `mark_interrupted(id, error)` (takes in the calls of the trial's `api_calls.jsonl`),
  `add_judgement(j)`, `get(id_or_prefix)`, `trials(...)`, `judgements(id)`, `calls(id)`;
  `store` (`ArtifactStore`: `put_bytes/put_file/put_tree`, `read_bytes`, `path`,
  `materialize_tree`).
- `Ledger.transaction()` yields the connection inside `BEGIN IMMEDIATE ... COMMIT` for an
  extension's own table; append a `Migration` to `_schema.MIGRATIONS` to add one.
"""

from optarena.ledger._ledger import Ledger, utc_now
from optarena.ledger._paths import DB_NAME, resolve_home
from optarena.ledger._schema import SCHEMA_VERSION, Migration
from optarena.ledger._store import ArtifactStore, TreeManifest

__all__ = [
    "DB_NAME",
    "SCHEMA_VERSION",
    "ArtifactStore",
    "Ledger",
    "Migration",
    "TreeManifest",
    "resolve_home",
    "utc_now",
]
