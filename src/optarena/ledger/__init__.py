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

API for other parts of optarena:
- `Ledger.open(home)`; `begin_trial(record)`, `finish_trial(record, judgement)`,
  `mark_interrupted(id, error)`, `add_judgement(j)`, `get(id_or_prefix)`, `trials(...)`,
  `judgements(id)`; `store` (`ArtifactStore`: `put_bytes/put_file/put_tree`, `read_bytes`,
  `path`, `materialize_tree`).
- `Ledger.transaction()` yields the connection inside `BEGIN IMMEDIATE ... COMMIT` for an
  extension's own table. To add one (e.g. `api_calls(trial_id REFERENCES trials(id), ...)` for
  a metering proxy), append a `Migration` to `_schema.MIGRATIONS`; a runner reaches the ledger
  and its trial id through `RunContext` (`optarena.agents.RunContext`: `ledger`, `trial_id`,
  `env`), which the trial lifecycle passes to `AgentRunner.prepare` before `run`. A trial
  hook (`optarena.runs.TrialHook`) can start a proxy before the agent (putting its URL in
  `context.env`) and fold metered usage into the outcome after it.
"""

from optarena.ledger._ledger import Ledger, utc_now
from optarena.ledger._models import (
    TRIAL_RECORD_VERSION,
    AgentInfo,
    ChangedFile,
    Judgement,
    JudgeSettings,
    TaskInfo,
    TrialRecord,
    TrialState,
    Verdict,
)
from optarena.ledger._paths import ENV_VAR, default_home, resolve_home
from optarena.ledger._schema import MIGRATIONS, SCHEMA_VERSION, Migration
from optarena.ledger._store import ArtifactStore, TreeManifest

__all__ = [
    "ENV_VAR",
    "MIGRATIONS",
    "SCHEMA_VERSION",
    "TRIAL_RECORD_VERSION",
    "AgentInfo",
    "ArtifactStore",
    "ChangedFile",
    "JudgeSettings",
    "Judgement",
    "Ledger",
    "Migration",
    "TaskInfo",
    "TreeManifest",
    "TrialRecord",
    "TrialState",
    "Verdict",
    "default_home",
    "resolve_home",
    "utc_now",
]
