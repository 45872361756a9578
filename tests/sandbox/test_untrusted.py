"""Copying a tree an agent can still change: plain files only, never read through a link, even
one swapped in between the look and the read (the task tools copy a running agent's workspace
as optarena's own user)."""

from __future__ import annotations

import os
import sys
import threading
from pathlib import Path
from typing import Any

import pytest

from optarena.sandbox import _untrusted, copy_untrusted


@pytest.fixture
def secret(tmp_path: Path) -> Path:
    s = tmp_path / "secret.key"
    s.write_text("SECRET-KEY-BYTES\n")
    s.chmod(0o600)
    return s


def _texts(root: Path) -> str:
    return "".join(p.read_text() for p in root.rglob("*") if p.is_file())


def test_plain_files_are_copied_links_and_fifos_left_out(tmp_path: Path, secret: Path) -> None:
    src = tmp_path / "ws"
    (src / "pkg").mkdir(parents=True)
    (src / "solution.py").write_text("x = 1\n")
    (src / "pkg" / "helper.py").write_text("y = 2\n")
    (src / "run.sh").write_text("#!/bin/sh\n")
    (src / "run.sh").chmod(0o4755)  # setuid: not carried over
    (src / ".git").mkdir()
    (src / ".git" / "config").write_text("[core]\n")
    (src / "linked.py").symlink_to(secret)
    (src / "alldir").symlink_to(tmp_path)  # a directory link
    os.mkfifo(src / "pipe")  # opening it for reading would block a plain copy
    dest = tmp_path / "out"
    copied = copy_untrusted(src, dest, skip=(".git",))
    assert copied == ["pkg/helper.py", "run.sh", "solution.py"]
    assert (dest / "pkg" / "helper.py").read_text() == "y = 2\n"
    assert (dest / "run.sh").stat().st_mode & 0o7777 == 0o755
    assert "SECRET" not in _texts(dest) and not (dest / ".git").exists()
    only = copy_untrusted(src, tmp_path / "only", want=lambda rel: rel.endswith("solution.py"))
    assert only == ["solution.py"]


def test_a_link_swapped_in_after_the_look_is_not_read(
    tmp_path: Path, secret: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The agent renames a link over the file between optarena's stat and its open: the
    open (no follow, through the directory's descriptor) fails and the file is left out."""
    src = tmp_path / "ws"
    (src / "pkg").mkdir(parents=True)
    (src / "solution.py").write_text("x = 1\n")
    (src / "pkg" / "helper.py").write_text("y = 2\n")
    real_stat = os.stat

    def stat_then_swap(path: Any, *args: Any, **kwargs: Any) -> os.stat_result:
        st = real_stat(path, *args, **kwargs)
        if path in ("solution.py", "pkg"):  # looked at: now swap in a link
            victim = src / path
            link = tmp_path / f"{path}.link"
            link.symlink_to(secret if path == "solution.py" else tmp_path)
            if victim.is_dir():
                victim.rename(tmp_path / "pkg.moved")
            link.rename(victim)
        return st

    monkeypatch.setattr(_untrusted.os, "stat", stat_then_swap)
    dest = tmp_path / "out"
    assert copy_untrusted(src, dest) == []
    assert "SECRET" not in _texts(dest) and not (dest / "pkg").exists()


def test_a_swapping_agent_never_gets_a_link_read(tmp_path: Path, secret: Path) -> None:
    """The same race, for real: another thread keeps renaming a link and a file over one
    another while the tree is copied again and again."""
    src = tmp_path / "ws"
    src.mkdir()
    target = src / "solution.py"
    target.write_text("x = 1\n")
    stop = threading.Event()

    def swap() -> None:
        link, plain = tmp_path / "l", tmp_path / "p"
        while not stop.is_set():
            link.symlink_to(secret)
            os.rename(link, target)
            plain.write_text("x = 1\n")
            os.rename(plain, target)

    # Threads switch often, so the swaps land inside copies: with this interval a plain
    # `shutil.copytree(..., symlinks=True)` read the secret in 58 of 300 copies.
    interval = sys.getswitchinterval()
    sys.setswitchinterval(1e-5)
    t = threading.Thread(target=swap, daemon=True)
    t.start()
    try:
        for i in range(300):
            dest = tmp_path / f"out{i}"
            copy_untrusted(src, dest)
            assert "SECRET" not in _texts(dest)
    finally:
        stop.set()
        t.join(timeout=5)
        sys.setswitchinterval(interval)


def test_a_tree_nested_past_the_depth_limit_is_cut_not_a_crash(tmp_path: Path) -> None:
    """An agent can nest directories thousands deep: the copy keeps what is within
    `MAX_DEPTH` and never runs out of frames or descriptors."""
    src = tmp_path / "ws"
    src.mkdir()
    (src / "solution.py").write_text("x = 1\n")
    deep = src
    for _ in range(_untrusted.MAX_DEPTH + 10):  # (far deeper would defeat rmtree itself)
        deep = deep / "d"
        os.mkdir(deep)
    (deep / "buried.py").write_text("y = 2\n")
    assert copy_untrusted(src, tmp_path / "out") == ["solution.py"]
