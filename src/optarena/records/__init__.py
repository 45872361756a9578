"""Records: the data optarena passes between its parts and keeps on disk, and nothing else.

Pydantic models only, no behaviour, importing no other optarena package, so that every package
(agents, proxy, ledger, runs, cli) can share them without importing each other. Each on-disk
format carries a `schema_version`; `load_trial`, `load_judgement` and `load_call` read any
version this optarena knows, migrating older ones step by step (`_migrate.MIGRATIONS`), and
refuse newer ones with a clear error.

- agent runs: `AgentLimits`, `AgentStatus`, `Usage`, `AgentOutcome`
- metered model calls: `CallRecord` (a line of `api_calls.jsonl`, a row of `api_calls`)
- MCP tool-call telemetry: `ToolCallRecord` (a line of `tool_calls.jsonl` or
  `harness_tool_calls.jsonl`)
- where a trial keeps its files: `TrialPaths`
- speed metrics: `Metrics` (builtin tasks' paired calls: `Comparison`, `AAControl`, ...),
  `ExternalMetrics` (an external project's benchmark), `AnyMetrics` (either, by `kind`)
- experiments: `ExperimentPlan` (and its sections, `Condition`), `ExperimentComparison` (and
  `ConditionSummary`, `TreatmentComparison`, `TrialRow`, `Total`)
- trials: `TrialRecord` and its parts (`TaskInfo`, `AgentInfo`, `ChangedFile`,
  `JudgeSettings`), `Judgement`
- changing one: `evolve(record, field=value, ...)`, a copy validated like a new record (an
  unknown field name or a wrong type is refused); never `model_copy(update=...)`, which checks
  neither
"""

from optarena.records._agent import AgentLimits, AgentOutcome, AgentStatus, Usage
from optarena.records._calls import CALL_RECORD_VERSION, CallRecord
from optarena.records._evolve import evolve
from optarena.records._experiment import (
    COMPARISON_SCHEMA_VERSION,
    MAX_TRIALS,
    PLAN_SCHEMA_VERSION,
    CompareSection,
    Condition,
    ConditionSummary,
    ExperimentComparison,
    ExperimentPlan,
    ExperimentSection,
    JudgeSection,
    LimitsSection,
    Total,
    TreatmentComparison,
    TrialRow,
)
from optarena.records._metrics import (
    EXTERNAL_METRICS_VERSION,
    LEGACY_NOTE,
    METRICS_SCHEMA_VERSION,
    AAControl,
    AnyMetrics,
    BenchmarkRound,
    BenchmarkStop,
    BenchmarkStopReason,
    Clock,
    Comparison,
    ExternalMetrics,
    Instructions,
    Integrity,
    LegacyMetrics,
    Metrics,
    OsCheck,
    OsOutcome,
    PairSamples,
    ScaleRuns,
    SpeedProtocol,
    Stop,
    StopReason,
    Summary,
    VerdictName,
    WorkloadMetrics,
)
from optarena.records._migrate import (
    MIGRATIONS,
    RecordKind,
    RecordMigration,
    load_call,
    load_judgement,
    load_tool_call,
    load_trial,
    migrate_values,
)
from optarena.records._paths import TrialPaths
from optarena.records._tool_calls import (
    NO_END,
    NO_REPLY,
    RESULT_EXCERPT,
    TELEMETRY_SCHEMA_VERSION,
    ToolCallRecord,
    ToolCallStatus,
    arguments_sha256,
    calls_of,
)
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
    "COMPARISON_SCHEMA_VERSION",
    "EXTERNAL_METRICS_VERSION",
    "LEGACY_NOTE",
    "MAX_TRIALS",
    "METRICS_SCHEMA_VERSION",
    "MIGRATIONS",
    "NO_END",
    "NO_REPLY",
    "PLAN_SCHEMA_VERSION",
    "RESULT_EXCERPT",
    "TELEMETRY_SCHEMA_VERSION",
    "TRIAL_RECORD_VERSION",
    "AAControl",
    "AgentInfo",
    "AgentLimits",
    "AgentOutcome",
    "AgentStatus",
    "AnyMetrics",
    "BenchmarkRound",
    "BenchmarkStop",
    "BenchmarkStopReason",
    "CallRecord",
    "ChangeKind",
    "ChangedFile",
    "Clock",
    "CompareSection",
    "Comparison",
    "Condition",
    "ConditionSummary",
    "ExperimentComparison",
    "ExperimentPlan",
    "ExperimentSection",
    "ExternalMetrics",
    "Instructions",
    "Integrity",
    "JudgeSection",
    "JudgeSettings",
    "Judgement",
    "JudgementKind",
    "LegacyMetrics",
    "LimitsSection",
    "Metrics",
    "OsCheck",
    "OsOutcome",
    "PairSamples",
    "RecordKind",
    "RecordMigration",
    "ScaleRuns",
    "SpeedProtocol",
    "Stop",
    "StopReason",
    "Summary",
    "TaskInfo",
    "ToolCallRecord",
    "ToolCallStatus",
    "Total",
    "TreatmentComparison",
    "TrialPaths",
    "TrialRecord",
    "TrialRow",
    "TrialState",
    "TrialVerdict",
    "Usage",
    "VerdictName",
    "WorkloadMetrics",
    "arguments_sha256",
    "calls_of",
    "evolve",
    "load_call",
    "load_judgement",
    "load_tool_call",
    "load_trial",
    "migrate_values",
]
