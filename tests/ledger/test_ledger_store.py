"""The content-addressed artifact store: write once, read-only, verified on read."""

from __future__ import annotations

import hashlib
import os
import stat
from pathlib import Path

import pytest

from optarena.errors import LedgerError
from optarena.ledger import ArtifactStore


def test_bytes_are_named_by_their_sha256_and_stored_once(tmp_path: Path) -> None:
    store = ArtifactStore(tmp_path)
    sha = store.put_bytes(b"hello")
    assert sha == hashlib.sha256(b"hello").hexdigest()
    assert store.put_text("hello") == sha
    path = store.path(sha)
    assert path.read_bytes() == b"hello"
    assert not stat.S_IMODE(path.stat().st_mode) & 0o222  # read-only
    assert list((tmp_path / "tmp").iterdir()) == []  # no temporary files left behind


def test_put_file_streams_and_matches_put_bytes(tmp_path: Path) -> None:
    src = tmp_path / "big.log"
    src.write_bytes(os.urandom(3 * (1 << 20) + 7))
    store = ArtifactStore(tmp_path / "store")
    sha = store.put_file(src)
    assert sha == hashlib.sha256(src.read_bytes()).hexdigest()
    assert store.read_bytes(sha) == src.read_bytes()


def test_a_damaged_artifact_is_detected(tmp_path: Path) -> None:
    store = ArtifactStore(tmp_path)
    sha = store.put_bytes(b"original")
    path = store.path(sha)
    path.chmod(0o644)
    path.write_bytes(b"tampered")
    with pytest.raises(LedgerError, match="does not match its sha256"):
        store.read_bytes(sha)
    with pytest.raises(LedgerError, match="missing"):
        store.read_bytes("0" * 64)
    with pytest.raises(LedgerError, match="not a sha256"):
        store.path("../etc/passwd")


def test_trees_round_trip_and_identical_trees_share_a_name(tmp_path: Path) -> None:
    a = tmp_path / "a"
    (a / "pkg").mkdir(parents=True)
    (a / "solution.py").write_text("x = 1\n")
    (a / "pkg" / "util.py").write_text("y = 2\n")
    store = ArtifactStore(tmp_path / "store")
    sha = store.put_tree(a, ["solution.py", "pkg/util.py"])
    assert store.put_tree(a, ["pkg/util.py", "solution.py"]) == sha
    out = tmp_path / "out"
    assert store.materialize_tree(sha, out) == ["pkg/util.py", "solution.py"]
    assert (out / "pkg" / "util.py").read_text() == "y = 2\n"
    assert os.access(out / "solution.py", os.W_OK)  # materialized copies are ordinary files
    assert set(store.tree(sha).files) == {"solution.py", "pkg/util.py"}


def test_an_artifact_replaced_by_a_link_or_fifo_is_refused_not_followed(tmp_path: Path) -> None:
    """A link planted under an artifact's name is never read through (even to a file with
    the right bytes), and a FIFO there does not hang the reader."""
    store = ArtifactStore(tmp_path / "store")
    sha = store.put_bytes(b"log text")
    same = tmp_path / "same.txt"
    same.write_bytes(b"log text")
    path = store.path(sha)
    path.unlink()
    path.symlink_to(same)
    with pytest.raises(LedgerError, match="symbolic link"):
        store.read_bytes(sha)
    path.unlink()
    os.mkfifo(path)
    with pytest.raises(LedgerError, match="FIFO"):
        store.read_bytes(sha)


def test_an_agents_logs_are_stored_without_following_what_it_made(tmp_path: Path) -> None:
    """What a command agent left in its logs directory: its plain files are stored; a link
    to a root-only file, a FIFO, a hard link to another's file and a directory link are
    left out, each named with why; an undecodable name is stored under a name a record holds."""
    secret = tmp_path / "secret"
    secret.write_text("SECRET\n")
    secret.chmod(0o600)
    logs = tmp_path / "logs"
    (logs / "sub").mkdir(parents=True)
    (logs / "stdout.log").write_text("out\n")
    (logs / "sub" / "notes.txt").write_text("notes\n")
    (logs / "stderr.log").symlink_to(secret)
    os.mkfifo(logs / "prompt.md")
    os.link(secret, logs / "usage.json")
    (logs / "dirlink").symlink_to(tmp_path)
    (logs / os.fsdecode(b"odd\xff.log")).write_text("odd\n")
    store = ArtifactStore(tmp_path / "store")
    stored, left_out = store.put_untrusted_tree(logs)
    assert sorted(stored) == ["odd\\xff.log", "stdout.log", "sub/notes.txt"]
    assert store.read_text(stored["sub/notes.txt"]) == "notes\n"
    assert sorted(left_out) == [
        "dirlink: a symbolic link",
        "prompt.md: a FIFO",
        "stderr.log: a symbolic link",
        "usage.json: a hard link (2 names) to a file others may not read",
    ]
    everything = b"".join(p.read_bytes() for p in (tmp_path / "store").rglob("*") if p.is_file())
    assert b"SECRET" not in everything


def test_a_logs_directory_of_many_files_is_stored_up_to_a_limit(tmp_path: Path) -> None:
    logs = tmp_path / "logs"
    logs.mkdir()
    for i in range(30):
        (logs / f"{i:02}.log").write_text(f"{i}\n")
    stored, left_out = ArtifactStore(tmp_path / "store").put_untrusted_tree(logs, max_entries=20)
    assert len(stored) == 20 and left_out == ["more than 20 entries: the rest not looked at"]
