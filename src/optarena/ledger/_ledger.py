"""`Ledger`: the SQLite database and artifact store behind every trial.

The ledger is the only writer of its database: runners and the metering proxy return records
(`AgentOutcome.calls`), and the trial's finish writes the trial row, its judgement, its artifact
references and its model calls in one transaction. Every write is one transaction
(`BEGIN IMMEDIATE ... COMMIT`); WAL mode lets readers run while a trial writes, and a busy
timeout lets several optarena processes share one ledger.

What a trial spent is never lost with the process: the proxy appends each call to the trial's
`logs/api_calls.jsonl` as it happens, and marking a trial interrupted (Ctrl-C, or a reconcile
after `kill -9`) takes the calls from that log into `api_calls`.

Opening a ledger changes nothing but its permissions: reading it (`trials`, `trial show`)
never marks a row or kills a process. Recovery after a `kill -9` (`reconcile`) is an explicit
step of the commands that run trials.

The directory is private to its owner (0700, the database 0600, stored artifacts 0400): it
holds every trial's workspace, logs and prompts, and an agent or candidate running as another
user must not read them. A ledger made by an older optarena is tightened when opened.
"""

from __future__ import annotations

import contextlib
import json
import os
import socket
import sqlite3
import stat
from collections.abc import Iterable, Iterator
from datetime import UTC, datetime
from pathlib import Path
from types import TracebackType

from optarena.errors import LedgerError
from optarena.ledger._paths import ARTIFACTS_DIR, DB_NAME, WORK_DIR, resolve_home
from optarena.ledger._schema import current_version, migrate
from optarena.ledger._store import ArtifactStore
from optarena.processes import start_ticks
from optarena.records import (
    CallRecord,
    Judgement,
    TrialPaths,
    TrialRecord,
    evolve,
    load_call,
    load_judgement,
    load_trial,
)

# The `api_calls` columns: every CallRecord field but its version (one copy, here).
CALL_COLUMNS = tuple(f for f in CallRecord.model_fields if f != "schema_version")


def utc_now() -> str:
    return datetime.now(UTC).isoformat(timespec="milliseconds")


def _process_alive(pid: int, start: int | None) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        pass  # exists, owned by someone else
    return start is None or start_ticks(pid) in (None, start)


# What `_make_private` tightens: the directory itself and what optarena creates in it.
_PRIVATE_DIRS = (ARTIFACTS_DIR, WORK_DIR)
_PRIVATE_FILES = (DB_NAME, f"{DB_NAME}-wal", f"{DB_NAME}-shm", f"{DB_NAME}-journal")


def _make_private(home: Path) -> None:
    """The ledger directory 0700 and its database 0600, where this user owns them (one it does
    not own is left as it is: its owner decides). Entries are reached through `O_PATH`
    descriptors that refuse links, so a link planted in the directory changes nothing
    elsewhere; and only `O_PATH`: closing any other descriptor of the database's files would
    drop every POSIX lock this process holds on them (a connection's, mid-transaction), and
    another process would write the same pages at once (a corrupt ledger)."""
    fd = os.open(home, os.O_PATH | os.O_DIRECTORY | os.O_NOFOLLOW)
    try:
        _tighten(fd, 0o700)
        wanted = [*((d, 0o700) for d in _PRIVATE_DIRS), *((f, 0o600) for f in _PRIVATE_FILES)]
        for name, mode in wanted:
            try:
                entry = os.open(name, os.O_PATH | os.O_NOFOLLOW, dir_fd=fd)
            except OSError:
                continue  # not there (yet)
            try:
                _tighten(entry, mode)
            finally:
                os.close(entry)
    finally:
        os.close(fd)


def _tighten(fd: int, mode: int) -> None:
    """`fd` is an `O_PATH` descriptor (no fchmod on those): chmod through its /proc link,
    which names the very inode fstat saw; a link (O_NOFOLLOW gives the link itself) is not
    ours to tighten."""
    st = os.fstat(fd)
    if stat.S_ISLNK(st.st_mode) or not (stat.S_ISREG(st.st_mode) or stat.S_ISDIR(st.st_mode)):
        return
    if st.st_uid == os.geteuid() and stat.S_IMODE(st.st_mode) & ~mode:
        os.chmod(f"/proc/self/fd/{fd}", stat.S_IMODE(st.st_mode) & mode)


def _trial_columns(r: TrialRecord) -> dict[str, object]:
    """The indexed columns, all derived from the record (the record is the source of truth)."""
    return {
        "id": r.id,
        "state": r.state,
        "created_at": r.created_at,
        "finished_at": r.finished_at,
        "task_id": r.task.id,
        "task_version": r.task.version,
        "task_sha256": r.task.sha256,
        "agent_name": r.agent.name,
        "agent_label": r.agent.label,
        "is_agent": int(r.agent.is_agent),
        "agent_version": r.agent.version,
        "agent_model": r.agent.model,
        "labels": json.dumps(r.labels, sort_keys=True),
        "judge_sha256": r.judge_sha256,
        "runtime_sha256": str(r.runtime.get("sha256", "")),
        "agent_status": r.agent_status,
        "verdict": r.verdict,
        "reason_codes": json.dumps(r.reason_codes),
        "candidate_sha256": r.candidate_sha256,
        "agent_wall_s": r.agent_wall_s,
        "agent_cpu_s": r.agent_cpu_s,
        "cost_usd": r.usage.cost_usd,
        "input_tokens": r.usage.input_tokens,
        "output_tokens": r.usage.output_tokens,
        "record": r.model_dump_json(),
    }


class Ledger:
    """One ledger directory: `ledger.db`, `artifacts/`, `work/` (see `optarena.ledger`)."""

    def __init__(self, home: Path) -> None:
        self.home = Path(home).absolute()
        self.db_path = self.home / DB_NAME
        self.swept = 0  # processes of dead agents killed by the last reconcile
        try:
            self.home.mkdir(mode=0o700, parents=True, exist_ok=True)
            for sub in _PRIVATE_DIRS:
                (self.home / sub).mkdir(mode=0o700, exist_ok=True)
            _make_private(self.home)
            self.store = ArtifactStore(self.home / ARTIFACTS_DIR)
            self._conn = sqlite3.connect(self.db_path, timeout=30.0, isolation_level=None)
        except (OSError, sqlite3.Error) as e:
            why = "exists and is not a directory" if self.home.is_file() else str(e)
            raise LedgerError(f"ledger directory {self.home}: {why}") from None
        self._conn.row_factory = sqlite3.Row
        try:
            self._conn.execute("PRAGMA journal_mode = WAL")
            self._conn.execute("PRAGMA foreign_keys = ON")
            self._conn.execute("PRAGMA synchronous = NORMAL")
            migrate(self._conn, str(self.db_path))
            _make_private(self.home)  # the database's files, now that they exist
        except sqlite3.DatabaseError as e:
            self._conn.close()
            raise LedgerError(f"{self.db_path}: not a usable ledger database ({e})") from None
        except BaseException:
            self._conn.close()
            raise

    @classmethod
    def open(cls, home: Path | str | None = None) -> Ledger:
        """The ledger at `home` (else $OPTARENA_LEDGER, else the default), as it is: rows left
        `running` by a killed optarena stay so until a command that runs trials `reconcile`s."""
        return cls(resolve_home(home))

    def close(self) -> None:
        self._conn.close()

    def __enter__(self) -> Ledger:
        return self

    def __exit__(
        self, t: type[BaseException] | None, e: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.close()

    @property
    def schema_version(self) -> int:
        return current_version(self._conn)

    @contextlib.contextmanager
    def transaction(self) -> Iterator[sqlite3.Connection]:
        """One write transaction; all or nothing. Extensions use it for their own tables."""
        self._conn.execute("BEGIN IMMEDIATE")
        try:
            yield self._conn
        except BaseException:
            self._conn.execute("ROLLBACK")
            raise
        self._conn.execute("COMMIT")

    def work_dir(self, trial_id: str) -> Path:
        """Scratch for one trial (workspace, logs, snapshots), kept after it ends."""
        return self.home / WORK_DIR / trial_id

    # --- trials -------------------------------------------------------------------------

    def begin_trial(self, record: TrialRecord) -> None:
        """Insert the trial's row as `running` before anything of the trial happens."""
        if record.state != "running":
            raise LedgerError(f"trial {record.id}: a new trial row must be 'running'")
        cols = _trial_columns(record)
        names = ", ".join(cols)
        marks = ", ".join(f":{k}" for k in cols)
        try:
            with self.transaction() as c:
                c.execute(f"INSERT INTO trials ({names}) VALUES ({marks})", cols)
        except sqlite3.IntegrityError as e:
            raise LedgerError(f"trial {record.id} cannot be recorded: {e}") from None

    def finish_trial(
        self,
        record: TrialRecord,
        judgement: Judgement | None = None,
        calls: Iterable[CallRecord] = (),
    ) -> None:
        """Complete (or interrupt) a running row, with its judgement, artifact references and
        metered model calls, in one transaction: the row is either still `running` or
        entirely finished."""
        if record.state == "running":
            raise LedgerError(f"trial {record.id}: finish with 'complete' or 'interrupted'")
        cols = _trial_columns(record)
        sets = ", ".join(f"{k} = :{k}" for k in cols if k != "id")
        with self.transaction() as c:
            cur = c.execute(f"UPDATE trials SET {sets} WHERE id = :id AND state = 'running'", cols)
            if cur.rowcount != 1:
                raise LedgerError(f"trial {record.id} is not a running trial of this ledger")
            for name, sha in sorted(record.artifacts.items()):
                size = self.store.path(sha).stat().st_size if self.store.has(sha) else 0
                c.execute(
                    "INSERT INTO trial_artifacts (trial_id, name, sha256, size) "
                    "VALUES (?, ?, ?, ?)",
                    (record.id, name, sha, size),
                )
            if judgement is not None:
                self._insert_judgement(c, judgement)
            self._insert_calls(c, record.id, calls)

    def mark_interrupted(self, trial_id: str, error: str) -> bool:
        """Mark a running trial interrupted (start record kept, plus the error), taking in the
        model calls its proxy logged so far. False when it was not running (already finished:
        nothing is changed)."""
        row = self._conn.execute(
            "SELECT record FROM trials WHERE id = ? AND state = 'running'", (trial_id,)
        ).fetchone()
        if row is None:
            return False
        record = load_trial(row["record"], f"trial {trial_id}")
        calls, notes = self.logged_calls(trial_id)
        if notes:
            error = "; ".join([error, *notes])
        record = evolve(record, state="interrupted", finished_at=utc_now(), error=error)
        try:
            self.finish_trial(record, calls=calls)
        except LedgerError:
            return False  # finished concurrently
        return True

    def reconcile(self) -> list[str]:
        """Recovery, the first step of every command that runs trials: mark `running` rows of
        this host whose optarena process is gone as interrupted (a crash or kill -9 left
        them), kill what their agents left running (processes in the cgroup or under the uid
        of a dead optarena's agent sandbox) and remove their bridge sockets; returns the ids.
        Never part of opening: a reader must not kill processes."""
        from optarena.sandbox import sweep_agent_leftovers

        self.swept = sweep_agent_leftovers()
        host = socket.gethostname()
        fixed = []
        rows = self._conn.execute("SELECT record FROM trials WHERE state = 'running'").fetchall()
        for row in rows:
            r = load_trial(row["record"], f"{self.db_path}: a running trial")
            if r.host == host and not _process_alive(r.pid, r.pid_start):
                msg = f"the optarena process {r.pid} ended without finishing the trial"
                if self.mark_interrupted(r.id, msg):
                    fixed.append(r.id)
        return fixed

    def logged_calls(self, trial_id: str) -> tuple[list[CallRecord], list[str]]:
        """The calls in a trial's `api_calls.jsonl` log, and notes on lines that could not be
        read (a process killed mid-write leaves at most its last line cut)."""
        path = TrialPaths.of(self.work_dir(trial_id)).calls_log
        if not path.is_file():
            return [], []
        calls, notes = [], []
        for n, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
            if not line.strip():
                continue
            try:
                calls.append(load_call(line, f"{path}:{n}"))
            except LedgerError as e:
                notes.append(f"call log line not recorded: {e}")
        return calls, notes

    def calls(self, trial_id: str) -> list[CallRecord]:
        """A trial's metered model calls, in arrival order."""
        rows = self._conn.execute(
            f"SELECT {', '.join(CALL_COLUMNS)} FROM api_calls WHERE trial_id = ? ORDER BY seq",
            (trial_id,),
        ).fetchall()
        return [
            CallRecord.model_validate(dict(zip(CALL_COLUMNS, tuple(r), strict=True))) for r in rows
        ]

    def workspaces(self) -> list[Path]:
        """Every trial's workspace directory (what an agent must not see of other trials)."""
        rows = self._conn.execute(
            "SELECT DISTINCT json_extract(record, '$.workspace') AS ws FROM trials"
        ).fetchall()
        return [Path(r["ws"]) for r in rows if r["ws"]]

    def resolve_id(self, ref: str) -> str:
        """A full trial id from an id or a unique prefix of one."""
        rows = self._conn.execute(
            "SELECT id FROM trials WHERE id LIKE ? ESCAPE '\\' ORDER BY id LIMIT 11",
            (ref.replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_") + "%",),
        ).fetchall()
        ids = [r["id"] for r in rows]
        if ref in ids:
            return ref
        if not ids:
            raise LedgerError(f"no trial '{ref}' in {self.db_path}; see `optarena trials`")
        if len(ids) > 1:
            raise LedgerError(f"trial id '{ref}' is ambiguous: {', '.join(ids[:10])}, ...")
        return str(ids[0])

    def get(self, ref: str) -> TrialRecord:
        trial_id = self.resolve_id(ref)
        row = self._conn.execute("SELECT record FROM trials WHERE id = ?", (trial_id,)).fetchone()
        return load_trial(row["record"], f"trial {trial_id}")

    def trials(
        self,
        *,
        task: str | None = None,
        agent: str | None = None,
        status: str | None = None,
        verdict: str | None = None,
        limit: int | None = 50,
    ) -> list[TrialRecord]:
        """Newest first. `status` matches the agent's status or the trial's state."""
        where, args = [], []
        for col, val in (("task_id", task), ("agent_name", agent), ("verdict", verdict)):
            if val is not None:
                where.append(f"{col} = ?")
                args.append(val)
        if status is not None:
            where.append("(agent_status = ? OR state = ?)")
            args += [status, status]
        sql = "SELECT record FROM trials"
        if where:
            sql += " WHERE " + " AND ".join(where)
        sql += " ORDER BY created_at DESC, id DESC"
        if limit is not None:
            sql += f" LIMIT {int(limit)}"
        rows = self._conn.execute(sql, args).fetchall()
        return [load_trial(r["record"], f"{self.db_path}: a trial") for r in rows]

    # --- judgements ---------------------------------------------------------------------

    def add_judgement(self, judgement: Judgement) -> int:
        """Record another judgement of a finished trial (a rejudge); earlier ones are kept."""
        with self.transaction() as c:
            state = c.execute(
                "SELECT state FROM trials WHERE id = ?", (judgement.trial_id,)
            ).fetchone()
            if state is None:
                raise LedgerError(f"no trial '{judgement.trial_id}' in {self.db_path}")
            return self._insert_judgement(c, judgement)

    def judgements(self, trial_id: str) -> list[Judgement]:
        rows = self._conn.execute(
            "SELECT id, record FROM judgements WHERE trial_id = ? ORDER BY id", (trial_id,)
        ).fetchall()
        return [
            evolve(load_judgement(r["record"], f"judgement {r['id']}"), id=r["id"]) for r in rows
        ]

    @staticmethod
    def _insert_calls(c: sqlite3.Connection, trial_id: str, calls: Iterable[CallRecord]) -> None:
        names = ", ".join(("trial_id", *CALL_COLUMNS))
        marks = ", ".join("?" for _ in range(len(CALL_COLUMNS) + 1))
        rows = [(trial_id, *(getattr(call, k) for k in CALL_COLUMNS)) for call in calls]
        c.executemany(f"INSERT INTO api_calls ({names}) VALUES ({marks})", rows)

    @staticmethod
    def _insert_judgement(c: sqlite3.Connection, j: Judgement) -> int:
        cur = c.execute(
            "INSERT INTO judgements (trial_id, kind, created_at, verdict, reason_codes, "
            "judge_sha256, runtime_sha256, task_sha256, candidate_sha256, judge_json, record) "
            "VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
            (
                j.trial_id,
                j.kind,
                j.created_at,
                j.verdict,
                json.dumps(j.reason_codes),
                j.judge_sha256,
                j.runtime_sha256,
                j.task_sha256,
                j.candidate_sha256,
                j.judge_json,
                j.model_dump_json(),
            ),
        )
        return int(cur.lastrowid or 0)
