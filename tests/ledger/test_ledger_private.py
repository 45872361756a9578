"""The ledger is its owner's alone, and reading it changes nothing.

Private: the directory 0700, the database 0600, stored artifacts 0400, for a new ledger and for
one an older optarena left world-readable; another uid (an agent's or a candidate's, without
the sandbox's mounts) cannot read a trial's files. Read-only: `trials` and `trial show` leave a
row a killed optarena left `running`, the processes its agent left and the bridge's sockets as
they are; `reconcile` (the first step of `run`) is what recovers them.
"""

from __future__ import annotations

import os
import shutil
import stat
import subprocess
import sys
import tempfile
from collections.abc import Callable
from pathlib import Path

import pytest

from optarena import sandbox
from optarena.cli import main
from optarena.ledger import Ledger
from optarena.records import TrialRecord
from optarena.sandbox import probe

CAPS = probe()
MakeRecord = Callable[..., TrialRecord]


def _mode(path: Path) -> int:
    return stat.S_IMODE(path.lstat().st_mode)


def test_a_new_ledger_is_private(tmp_path: Path) -> None:
    with Ledger.open(tmp_path / "L") as ledger:
        sha = ledger.store.put_text("a prompt")
        home = ledger.home
        assert _mode(home) == 0o700
        assert _mode(ledger.db_path) == 0o600
        for extra in ("ledger.db-wal", "ledger.db-shm"):
            if (home / extra).exists():
                assert _mode(home / extra) == 0o600
        assert _mode(ledger.store.path(sha)) == 0o400
        assert _mode(home / "artifacts") == 0o700


def test_an_older_world_readable_ledger_is_tightened_when_opened(
    tmp_path: Path, make_record: MakeRecord
) -> None:
    home = tmp_path / "L"
    with Ledger(home) as ledger:
        ledger.begin_trial(make_record("t1"))
    for path, mode in ((home, 0o755), (home / "ledger.db", 0o644), (home / "artifacts", 0o755)):
        path.chmod(mode)  # what a version before private ledgers left
    outside = tmp_path / "outside"
    outside.mkdir(mode=0o755)
    outside.chmod(0o755)
    (home / "work").rmdir()
    (home / "work").symlink_to(outside)  # a link is never followed to tighten
    with Ledger.open(home) as ledger:
        assert ledger.get("t1").state == "running"
    assert (_mode(home), _mode(home / "ledger.db"), _mode(home / "artifacts")) == (
        0o700,
        0o600,
        0o700,
    )
    assert _mode(outside) == 0o755


@pytest.mark.skipif(not CAPS.root, reason="reading as another uid needs root")
def test_another_uid_cannot_read_a_trials_files() -> None:
    where = Path(tempfile.mkdtemp())
    where.chmod(0o755)  # a ledger's parent anyone may pass (pytest's tmp_path is private)
    with Ledger.open(where / "L") as ledger:
        prompt = ledger.work_dir("t1") / "logs" / "prompt.md"
        prompt.parent.mkdir(parents=True)
        prompt.write_text("the task and its hints")
        prompt.chmod(0o644)
        db = ledger.db_path
    uid = 1_500_000 + 4093  # in the sandbox range, never leased for this

    def drop() -> None:
        os.setgroups([])
        os.setgid(uid)
        os.setuid(uid)

    try:
        for path in (prompt, db):
            r = subprocess.run(["cat", str(path)], preexec_fn=drop, capture_output=True)
            assert r.returncode != 0 and b"Permission denied" in r.stderr, (path, r)
    finally:
        shutil.rmtree(where)


def test_reading_the_ledger_recovers_nothing_and_kills_nothing(
    tmp_path: Path, make_record: MakeRecord, monkeypatch: pytest.MonkeyPatch
) -> None:
    """After a `kill -9`: a row left `running` (and, on the machine, what its agent left).
    `trials` and `trial show` change none of it; `reconcile` (what `run` does first) does."""
    dead = subprocess.Popen(["true"])
    dead.wait()
    home = tmp_path / "L"
    with Ledger(home) as ledger:
        ledger.begin_trial(make_record("gone", pid=dead.pid))
    sweeps: list[int] = []
    monkeypatch.setattr(sandbox, "sweep_agent_leftovers", lambda: sweeps.append(1) or 0)
    for argv in (["trials"], ["trial", "show", "gone"]):
        assert main([*argv, "--ledger", str(home)]) == 0
    with Ledger.open(home) as ledger:
        assert ledger.get("gone").state == "running" and sweeps == []
        assert ledger.reconcile() == ["gone"]
        assert ledger.get("gone").state == "interrupted" and sweeps == [1]


_TRY_WRITE = """
import sqlite3, sys
c = sqlite3.connect(sys.argv[1], timeout=0, isolation_level=None)
try:
    c.execute("BEGIN IMMEDIATE")
except sqlite3.OperationalError as e:
    print(e)
else:
    print("got the write lock")
"""


def test_opening_the_ledger_again_keeps_this_process_locks(tmp_path: Path) -> None:
    """POSIX locks are the process's: closing any descriptor of a file drops every lock the
    process holds on it. Making the database private must not open and close its files while
    a connection of this process holds their locks (the driver of an experiment writes while
    a status or a second ledger of the same process opens it), or another process writes
    into the same pages at once and the ledger is corrupt."""
    with Ledger.open(tmp_path / "L") as first:
        first._conn.execute("BEGIN IMMEDIATE")  # this process holds the write lock
        try:
            with Ledger.open(tmp_path / "L"):  # a second opening in the same process
                pass
            other = subprocess.run(
                [sys.executable, "-c", _TRY_WRITE, str(first.db_path)],
                capture_output=True, text=True, timeout=60,
            )  # fmt: skip
            assert other.stdout.strip() == "database is locked", other.stdout + other.stderr
        finally:
            first._conn.execute("ROLLBACK")
