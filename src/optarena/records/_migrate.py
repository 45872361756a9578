"""Reading records written by older optarena versions: one explicit migration per version step.

Every stored record carries `schema_version`. Reading one goes through `migrate_values`, which
applies, in order, the migrations from the version found up to the current one, each a pure
function on the record's plain JSON data; only then is the data validated against today's
model (`extra="forbid"` would otherwise refuse a field an older version had). A record newer
than this optarena is refused: guessing at fields it does not know could misreport a trial.

To change a stored format: bump its `*_VERSION`, and append a `RecordMigration` from the old
version that rewrites old data into the new shape (rename, retype, default what is missing).
Never edit a released migration; ledgers in the wild hold records of every version. The test
fixture `tests/ledger/data/ledger-v2.db` (trial record 1) must stay readable.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, Literal, TypeVar, get_args

from pydantic import BaseModel, ValidationError

from optarena.errors import RecordError
from optarena.records._calls import CALL_RECORD_VERSION, CallRecord
from optarena.records._experiment import COMPARISON_SCHEMA_VERSION, PLAN_SCHEMA_VERSION
from optarena.records._metrics import Summary, VerdictName
from optarena.records._tool_calls import (
    NO_REPLY,
    TELEMETRY_SCHEMA_VERSION,
    ToolCallRecord,
    arguments_sha256,
)
from optarena.records._trial import TRIAL_RECORD_VERSION, Judgement, TrialRecord

# Formats whose models live in the package that owns them (task packages, external specs,
# task-tool telemetry, experiment locks, the harness registry and run) pass their version as
# `current`; they read through the same steps.
RecordKind = Literal[
    "trial", "judgement", "call", "plan", "comparison", "task", "external_task", "tool_call",
    "lock", "registry", "harness_run",
]  # fmt: skip
M = TypeVar("M", bound=BaseModel)


@dataclass(frozen=True)
class RecordMigration:
    """One step: data of `kind` at `from_version` -> `from_version + 1`."""

    kind: RecordKind
    from_version: int
    why: str  # what changed, for the reader of the code and of errors
    apply: Callable[[dict[str, Any]], dict[str, Any]]


def _typed_metrics(data: dict[str, Any]) -> dict[str, Any]:
    """Trial/judgement v1 -> v2: `metrics` became a typed model told apart by `kind`.
    v1 stored the builtin judge's metrics (format version 2) or, from `optarena judge` of an
    external task, its benchmark's dict, which has `rounds` and no `workloads`. Metrics of
    format version 1 (the first release's, before the judge-side clocks) become
    `LegacyMetrics`: kept and shown, never compared with today's (this step refused them once,
    and the ledger could not be listed)."""
    m = data.get("metrics")
    if isinstance(m, dict) and "kind" not in m:
        m = dict(m)
        if "rounds" in m and "workloads" not in m:
            m["kind"] = "external_benchmark"
            m.setdefault("schema_version", 1)
        elif m.get("schema_version", 1) != 2:
            m = _legacy_metrics(m)
        else:
            m["kind"] = "paired_calls"
            m["schema_version"] = 3
        data["metrics"] = m
    return data


def _legacy_metrics(m: dict[str, Any]) -> dict[str, Any]:
    """Metrics of an older protocol, verbatim, with what can be read of their verdict."""
    version = m.get("schema_version", 1)
    overall = m.get("overall")
    try:
        summary = Summary.model_validate(overall).model_dump() if overall is not None else None
    except ValidationError:
        summary = None
    verdict = m.get("verdict")
    return {
        "kind": "legacy_protocol",
        "protocol_version": version if isinstance(version, int) else 1,
        "verdict": verdict if verdict in get_args(VerdictName) else None,
        "overall": summary,
        "data": m,
    }


def _rounds_floor(data: dict[str, Any]) -> dict[str, Any]:
    """External spec v1 -> v2: a verdict needs at least 4 rounds (default 6). A v1 spec that
    asks for fewer is refused, not rewritten: its frozen protocol would change unseen."""
    m = data.get("measurement")
    rounds = m.get("min_rounds") if isinstance(m, dict) else None
    if isinstance(rounds, int) and rounds < 4:
        raise RecordError(
            f"measurement.min_rounds = {rounds}: a verdict over fewer than 4 rounds is no longer "
            "given (its interval covers far less than it claims); set min_rounds to 4 or more "
            "(or drop it: 6) and freeze the spec again"
        )
    return data


def _unchanged(data: dict[str, Any]) -> dict[str, Any]:
    """A step that only added optional fields: older data reads as it is (the bump keeps
    an older optarena from misreading the newer records)."""
    return data


def _relayed_call(data: dict[str, Any]) -> dict[str, Any]:
    """A harness relay's version 1 line (`RelayedCall`: server, arguments, result, status
    `no_reply`, no digest) as a tool-call record; a task tools' version 1 line as it is."""
    if "arguments_sha256" in data or "server" not in data:
        return data
    out = dict(data)
    out["arguments_sha256"] = arguments_sha256(out.get("arguments"))
    if out.get("status") == "no_reply":
        out |= {"status": "cut_off", "error": NO_REPLY}
    return out


MIGRATIONS: tuple[RecordMigration, ...] = (
    RecordMigration("trial", 1, "metrics typed, with a kind", _typed_metrics),
    RecordMigration(
        "tool_call",
        1,
        "a line per start and end, tied by call_id (a v1 line is a whole call); a harness "
        "relay's v1 line (RelayedCall) read as one",
        _relayed_call,
    ),
    RecordMigration("judgement", 1, "metrics typed, with a kind", _typed_metrics),
    RecordMigration("external_task", 1, "at least 4 rounds before a verdict", _rounds_floor),
    RecordMigration("trial", 2, "usage: lower bounds of unknown counts", _unchanged),
    RecordMigration("judgement", 2, "(shares the trial record's version)", _unchanged),
    RecordMigration("call", 1, "lower bounds and a note for unknown counts", _unchanged),
    RecordMigration("tool_call", 2, "server, arguments, result: a relay's calls", _unchanged),
)

CURRENT: dict[RecordKind, int] = {
    "trial": TRIAL_RECORD_VERSION,
    "judgement": TRIAL_RECORD_VERSION,
    "call": CALL_RECORD_VERSION,
    "plan": PLAN_SCHEMA_VERSION,
    "comparison": COMPARISON_SCHEMA_VERSION,
    "tool_call": TELEMETRY_SCHEMA_VERSION,
}


def migrate_values(
    kind: RecordKind,
    data: dict[str, Any],
    *,
    current: int | None = None,
    migrations: Sequence[RecordMigration] = MIGRATIONS,
    where: str = "record",
) -> dict[str, Any]:
    """`data` brought to the current version of `kind` (a new dict; `data` is not changed).
    A record without `schema_version` is version 1, as every first version was."""
    if current is None and kind not in CURRENT:
        raise TypeError(f"the current version of {kind} records must be passed as `current`")
    target = CURRENT[kind] if current is None else current
    version = data.get("schema_version", 1)
    if not isinstance(version, int) or version < 1:
        raise RecordError(f"{where}: schema_version must be a positive integer, not {version!r}")
    if version > target:
        raise RecordError(
            f"{where}: {kind} record version {version} is newer than this optarena reads "
            f"({target}); upgrade optarena"
        )
    steps = {m.from_version: m for m in migrations if m.kind == kind}
    out = dict(data)
    while version < target:
        step = steps.get(version)
        if step is None:
            raise RecordError(f"{where}: no migration of {kind} records from version {version}")
        try:
            out = step.apply(dict(out))
        except RecordError as e:
            raise RecordError(f"{where}: {e}") from None
        version += 1
        out["schema_version"] = version
    return out


def _load(model: type[M], kind: RecordKind, raw: str | bytes, where: str) -> M:
    try:
        data = json.loads(raw)
    except ValueError as e:
        raise RecordError(f"{where}: not JSON ({e})") from None
    if not isinstance(data, dict):
        raise RecordError(f"{where}: a {kind} record must be a JSON object")
    try:
        return model.model_validate(migrate_values(kind, data, where=where))
    except ValidationError as e:
        first = e.errors()[0]
        field = ".".join(str(p) for p in first["loc"])
        raise RecordError(f"{where}: field '{field}': {first['msg']}") from None


def load_trial(raw: str | bytes, where: str = "trial record") -> TrialRecord:
    """A `TrialRecord` from its stored JSON, of this or any older version."""
    return _load(TrialRecord, "trial", raw, where)


def load_judgement(raw: str | bytes, where: str = "judgement record") -> Judgement:
    """A `Judgement` from its stored JSON, of this or any older version."""
    return _load(Judgement, "judgement", raw, where)


def load_call(raw: str | bytes, where: str = "call record") -> CallRecord:
    """A `CallRecord` from a line of `api_calls.jsonl`, of this or any older version."""
    return _load(CallRecord, "call", raw, where)


def load_tool_call(raw: str | bytes, where: str = "tool call record") -> ToolCallRecord:
    """A `ToolCallRecord` from a line of `tool_calls.jsonl` or `harness_tool_calls.jsonl`, of
    this or any older version (a relay's `RelayedCall` lines included)."""
    return _load(ToolCallRecord, "tool_call", raw, where)
