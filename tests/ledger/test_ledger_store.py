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
