"""Records: the data optarena passes between its parts and keeps on disk, and nothing else.

Pydantic models only, no behaviour, importing no other optarena package, so that every package
(agents, proxy, ledger, runs, cli) can share them without importing each other. Each on-disk
format carries a `schema_version`; `load_trial`, `load_judgement` and `load_call` read any
version this optarena knows, migrating older ones step by step (`_migrate.MIGRATIONS`), and
refuse newer ones with a clear error.

- agent runs: `AgentLimits`, `AgentStatus`, `Usage`, `AgentOutcome`
- metered model calls: `CallRecord` (a line of `api_calls.jsonl`, a row of `api_calls`)
- where a trial keeps its files: `TrialPaths`
- trials: `TrialRecord` and its parts (`TaskInfo`, `AgentInfo`, `ChangedFile`,
  `JudgeSettings`), `Judgement`
"""

from optarena.records._agent import AgentLimits, AgentOutcome, AgentStatus, Usage
from optarena.records._calls import CALL_RECORD_VERSION, CallRecord
from optarena.records._migrate import (
    MIGRATIONS,
    RecordMigration,
    load_call,
    load_judgement,
    load_trial,
    migrate_values,
)
from optarena.records._paths import TrialPaths
from optarena.records._trial import (
    TRIAL_RECORD_VERSION,
    AgentInfo,
    ChangedFile,
    ChangeKind,
    Judgement,
    JudgementKind,
    JudgeSettings,
    TaskInfo,
    TrialRecord,
    TrialState,
    TrialVerdict,
)

__all__ = [
    "CALL_RECORD_VERSION",
    "MIGRATIONS",
    "TRIAL_RECORD_VERSION",
    "AgentInfo",
    "AgentLimits",
    "AgentOutcome",
    "AgentStatus",
    "CallRecord",
    "ChangeKind",
    "ChangedFile",
    "JudgeSettings",
    "Judgement",
    "JudgementKind",
    "RecordMigration",
    "TaskInfo",
    "TrialPaths",
    "TrialRecord",
    "TrialState",
    "TrialVerdict",
    "Usage",
    "load_call",
    "load_judgement",
    "load_trial",
    "migrate_values",
]
