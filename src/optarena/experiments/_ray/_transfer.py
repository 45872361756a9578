"""How a trial travels from the node that ran it to the driver's ledger: messages through Ray's
object store (never a shared filesystem), artifacts in chunks under a size limit, and one
idempotent write on arrival.

A worker runs its trial into a staging ledger on its own node (`optarena.trials.run_trial`, the
same lifecycle as a local trial), then streams back, as the items of one Ray generator task:
`Begun` (the row the driver inserts as `running`), then `Shipment` (the record, its judgement,
its metered calls, the artifacts' names and sizes) and one `Chunk` per piece of each artifact.
The driver stores each artifact only once its bytes hash to its name, then finishes the row
in one transaction (`import_trial`). Arriving twice changes nothing; a different record for a
finished row is an error, never an overwrite.
"""

from __future__ import annotations

import hashlib
import tempfile
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import IO

from optarena.errors import LedgerError, OptarenaError
from optarena.ledger import ArtifactStore, Ledger
from optarena.records import (
    CallRecord,
    Judgement,
    TrialRecord,
    evolve,
    load_call,
    load_judgement,
    load_trial,
)

CHUNK_BYTES = 4 << 20  # one object in Ray's store per piece: small enough to stream
MAX_TRANSFER_MB = 2048  # per trial; logs beyond it stay on the node (the delivery never does)
_TREES = ("candidate",)  # artifacts stored as a TreeManifest: their files travel too


class TransferError(OptarenaError):
    """What arrived is not what was announced (a damaged or forged transfer)."""


@dataclass(frozen=True)
class Begun:
    """The trial's row began on `node`: the driver records it as running there."""

    node: str
    record: str  # TrialRecord JSON, state running


@dataclass(frozen=True)
class Refused:
    """The node refused to run the trial (why, in words); nothing was recorded."""

    node: str
    reason: str


@dataclass(frozen=True)
class Lost:
    """The trial raised before its staging row existed; its error."""

    node: str
    error: str


@dataclass(frozen=True)
class Shipment:
    """A finished (complete or interrupted) trial as its node recorded it."""

    node: str
    record: str  # TrialRecord JSON
    judgements: tuple[str, ...]  # Judgement JSON
    calls: tuple[str, ...]  # CallRecord JSON, in arrival order
    artifacts: tuple[tuple[str, int], ...]  # (sha256, size), in the order the chunks follow


@dataclass(frozen=True)
class Chunk:
    sha: str
    data: bytes


Message = Begun | Refused | Lost | Shipment | Chunk


# --- the worker's side ---------------------------------------------------------------------


def _size(store: ArtifactStore, sha: str) -> int:
    return store.path(sha).stat().st_size


def _wanted(record: TrialRecord, judgements: list[Judgement], store: ArtifactStore) -> list[str]:
    """Every artifact the record and its judgements name (tree members included), logs last."""
    named = sorted(record.artifacts.items(), key=lambda kv: (kv[0].startswith("logs/"), kv[0]))
    out: list[str] = []
    for name, sha in named:
        out.append(sha)
        if name in _TREES:
            out += sorted(store.tree(sha).files.values())
    out += [j.judge_json for j in judgements if j.judge_json]
    return list(dict.fromkeys(out))


def pack(
    ledger: Ledger, trial_id: str, node: str, update: dict[str, object], limit_mb: float
) -> tuple[Shipment, Iterator[Chunk]]:
    """The staging ledger's row of `trial_id` (with `update` applied) and its artifacts' chunks.
    Logs past `limit_mb` are left on the node, named in the record; a delivery past it raises
    TransferError (the trial is then recorded interrupted with that reason)."""
    record = evolve(ledger.get(trial_id), **update)
    judgements = ledger.judgements(trial_id)
    calls = ledger.calls(trial_id)
    store = ledger.store
    limit = int(limit_mb * (1 << 20))
    logs = {sha for name, sha in record.artifacts.items() if name.startswith("logs/")}
    chosen, total, left_out = [], 0, []
    for sha in _wanted(record, judgements, store):
        size = _size(store, sha)
        if total + size > limit and sha in logs:
            left_out += [n for n, s in record.artifacts.items() if s == sha]
            continue
        if total + size > limit:
            raise TransferError(
                f"the trial's delivery exceeds the transfer limit of {limit_mb:g} MiB; it stays "
                f"on node {node} in {ledger.home}"
            )
        chosen.append((sha, size))
        total += size
    if left_out:
        note = (
            f"not transferred (over {limit_mb:g} MiB): {', '.join(sorted(left_out))}; kept on "
            f"node {node} in {ledger.work_dir(trial_id)}"
        )
        kept = {n: s for n, s in record.artifacts.items() if n not in left_out}
        detail = "; ".join(filter(None, [record.agent_detail, note]))
        record = evolve(record, artifacts=kept, agent_detail=detail)
    shipment = Shipment(
        node=node,
        record=record.model_dump_json(),  # validated by evolve
        judgements=tuple(j.model_dump_json() for j in judgements),
        calls=tuple(c.model_dump_json() for c in calls),
        artifacts=tuple(chosen),
    )
    return shipment, _chunks(store, [sha for sha, _ in chosen])


def _chunks(store: ArtifactStore, shas: list[str]) -> Iterator[Chunk]:
    for sha in shas:
        with open(store.path(sha), "rb") as f:
            while data := f.read(CHUNK_BYTES):
                yield Chunk(sha, data)


# --- the driver's side ---------------------------------------------------------------------


@dataclass
class Receiver:
    """Stores a shipment's artifacts as their chunks arrive, each only once its bytes hash
    to its announced name and size (a partial or forged artifact is never stored)."""

    store: ArtifactStore
    shipment: Shipment
    _next: int = 0
    _got: int = 0
    _hash: hashlib._Hash = field(default_factory=hashlib.sha256)
    _spool: IO[bytes] | None = None

    def __post_init__(self) -> None:
        self._skip_empty()

    @property
    def done(self) -> bool:
        return self._next >= len(self.shipment.artifacts)

    def _skip_empty(self) -> None:
        """Empty artifacts have no chunk: stored when their turn comes."""
        while (
            self._next < len(self.shipment.artifacts)
            and self.shipment.artifacts[self._next][1] == 0
        ):
            sha = self.shipment.artifacts[self._next][0]
            if self.store.put_bytes(b"") != sha:
                raise TransferError(f"artifact {sha}: announced empty, but that is not its name")
            self._next += 1

    def add(self, chunk: Chunk) -> None:
        if self.done:
            raise TransferError(f"a chunk of {chunk.sha} arrived after the last artifact")
        sha, size = self.shipment.artifacts[self._next]
        if chunk.sha != sha or self._got + len(chunk.data) > size:
            raise TransferError(f"artifact {sha}: a chunk out of order or past its size")
        if self._spool is None:
            # closed in _finish or close(): it lives across chunks, no one `with` holds it
            self._spool = tempfile.SpooledTemporaryFile(max_size=CHUNK_BYTES * 4)  # noqa: SIM115
        self._spool.write(chunk.data)
        self._hash.update(chunk.data)
        self._got += len(chunk.data)
        if self._got == size:
            self._finish(sha)

    def _finish(self, sha: str) -> None:
        assert self._spool is not None
        if self._hash.hexdigest() != sha:
            raise TransferError(f"artifact {sha}: its bytes do not hash to its name")
        self._spool.seek(0)
        self.store.put_stream(self._spool)  # type: ignore[arg-type]
        self._spool.close()
        self._spool, self._got, self._hash = None, 0, hashlib.sha256()
        self._next += 1
        self._skip_empty()

    def close(self) -> None:
        if self._spool is not None:
            self._spool.close()


def import_trial(
    ledger: Ledger, trial_id: str, key_label: tuple[str, str], s: Shipment
) -> TrialRecord:
    """Finish the driver's row of `trial_id` with what its node shipped, in one transaction
    (artifacts are already stored). Checks that the shipment is of this trial and key; the
    same shipment again is a no-op, a different one for a finished row an error."""
    where = f"trial {trial_id} from node {s.node}"
    record = load_trial(s.record, where)
    judgements = [load_judgement(j, where) for j in s.judgements]
    calls: list[CallRecord] = [load_call(c, where) for c in s.calls]
    label, key = key_label
    if record.id != trial_id or record.labels.get(label) != key:
        raise TransferError(
            f"{where}: the shipment is of trial {record.id}, key {record.labels.get(label)}"
        )
    if record.state == "running":
        raise TransferError(f"{where}: shipped while still running")
    if any(j.trial_id != trial_id for j in judgements):
        raise TransferError(f"{where}: a judgement of another trial")
    missing = [n for n, sha in record.artifacts.items() if not ledger.store.has(sha)]
    if missing:
        raise TransferError(f"{where}: artifacts named but not transferred: {', '.join(missing)}")
    first = next((j for j in judgements if j.kind == "trial"), None)
    try:
        ledger.finish_trial(record, first, calls)
    except LedgerError:
        try:
            stored = ledger.get(trial_id)
        except LedgerError:
            raise TransferError(f"{where}: no row began for it in this ledger") from None
        if stored.model_dump() != record.model_dump():
            raise TransferError(f"{where}: the ledger's row is finished and differs") from None
    return record
