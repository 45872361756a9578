"""What an agent made, read by optarena as its own user: plain files only, never through a
link, even one swapped in between the look and the read (the task tools copy a running agent's
workspace), never a FIFO, socket, device or another's file hard-linked in; trees surveyed before
they are read, handed back and removed at any depth; names shown as one line of text."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import threading
from pathlib import Path
from typing import Any

import pytest

# private: `_untrusted` is monkeypatched (a swap between stat and open)
from optarena.files import (
    _untrusted,
    copy_untrusted,
    lchown_tree,
    name_line,
    open_untrusted,
    printable,
    read_untrusted,
    remove_tree,
    survey,
)


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


def test_a_copy_stops_at_its_byte_limit(tmp_path: Path) -> None:
    src = tmp_path / "ws"
    src.mkdir()
    with open(src / "solution.py", "wb") as f:
        f.truncate(1 << 40)  # a terabyte of holes
    with pytest.raises(_untrusted.UntrustedFileError, match="more than 4096 bytes"):
        copy_untrusted(src, tmp_path / "out", max_bytes=4096)
    assert (tmp_path / "out" / "solution.py").stat().st_size <= 4096


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


# ---- reading one file: open_untrusted / read_untrusted ----------------------------------


def _agent_dir(tmp_path: Path) -> Path:
    d = tmp_path / "logs"
    d.mkdir()
    (d / "plain.log").write_text("plain\n")
    return d


@pytest.mark.parametrize(
    ("make", "why"),
    [
        (lambda d, s: (d / "x").symlink_to(s), "a symbolic link"),
        (lambda d, s: os.mkfifo(d / "x"), "a FIFO"),  # an open for reading would block
        (lambda d, s: (d / "x").mkdir(), "a directory"),
        (lambda d, s: os.link(s, d / "x"), "a hard link"),  # another name of a 0600 file
    ],
    ids=["symlink", "fifo", "directory", "hard-link"],
)
def test_open_untrusted_refuses_what_is_not_the_agents_plain_file(
    tmp_path: Path, secret: Path, make: Any, why: str
) -> None:
    d = _agent_dir(tmp_path)
    make(d, secret)
    with pytest.raises(_untrusted.UntrustedFileError, match=why):
        open_untrusted(d / "x").close()
    with open_untrusted(d / "plain.log") as f:
        assert f.read() == b"plain\n"


def test_a_socket_and_a_link_on_the_way_are_refused_too(tmp_path: Path, secret: Path) -> None:
    """Below the directory optarena chose, no component is followed: a directory link
    (`sub -> /root`) is refused like a file link."""
    d = _agent_dir(tmp_path)
    with socket.socket(socket.AF_UNIX) as s:
        s.bind(str(d / "sock"))
        with pytest.raises(_untrusted.UntrustedFileError, match="a socket"):
            open_untrusted(d / "sock")
    (d / "sub").symlink_to(secret.parent)
    with pytest.raises(_untrusted.UntrustedFileError, match="sub is a symbolic link"):
        open_untrusted(d / "sub" / secret.name, base=d)


def test_a_world_readable_hard_link_is_read(tmp_path: Path) -> None:
    """A package manager's hard links (uv, pnpm) name files anyone may read: reading one
    through the link tells nothing the agent could not read itself."""
    d = _agent_dir(tmp_path)
    shared = tmp_path / "cache.py"
    shared.write_text("shared\n")
    shared.chmod(0o644)
    os.link(shared, d / "linked.py")
    with open_untrusted(d / "linked.py") as f:
        assert f.read() == b"shared\n"


def test_read_untrusted_stops_at_its_limit(tmp_path: Path) -> None:
    d = _agent_dir(tmp_path)
    with open(d / "big", "wb") as f:
        f.truncate(1 << 30)  # sparse: costs nothing to make, 1 GiB to read whole
    with pytest.raises(_untrusted.UntrustedFileError, match="larger than 1024 bytes"):
        read_untrusted(d / "big", 1024)
    assert read_untrusted(d / "plain.log", 1024) == b"plain\n"


# ---- surveying a tree before anything reads it --------------------------------------------


def test_survey_names_every_entry_optarena_will_not_read(tmp_path: Path, secret: Path) -> None:
    ws = tmp_path / "ws"
    (ws / "pkg").mkdir(parents=True)
    (ws / "solution.py").write_text("x = 1\n")
    os.mkfifo(ws / "fifo.py")
    os.link(secret, ws / "pkg" / "hard.txt")
    (ws / "ok-link").symlink_to(secret)  # a link is data (git stores it as a link): no finding
    bad_dir = os.fsdecode(b"dir\xff")
    os.mkdir(ws / bad_dir)
    (ws / bad_dir / "inner.py").write_text("y = 2\n")
    (ws / ".git").mkdir()
    os.mkfifo(ws / ".git" / "skipped")
    found = survey(ws, skip=(".git",), max_entries=1000)
    assert {(f.rel, f.problem) for f in found.findings} == {
        ("fifo.py", "special_file"),
        ("pkg/hard.txt", "hard_link"),
        ("dir\\xff", "undecodable_name"),
    }
    assert not found.truncated and found.entries == 7


def test_survey_counts_sparse_files_in_full_and_stops_at_the_entry_limit(tmp_path: Path) -> None:
    ws = tmp_path / "ws"
    ws.mkdir()
    with open(ws / "sparse.bin", "wb") as f:
        f.truncate(3 << 30)
    (ws / "real.bin").write_bytes(os.urandom(1 << 20))
    found = survey(ws, max_entries=10)
    assert found.apparent_bytes == (3 << 30) + (1 << 20)
    assert (1 << 20) <= found.disk_bytes < (2 << 20)  # the sparse file holds (almost) no blocks
    for i in range(50):
        (ws / f"f{i}").touch()
    cut = survey(ws, max_entries=10)
    assert cut.truncated and cut.entries == 10


def _nest(root: Path, depth: int, name: str = "d" * 100) -> None:
    """`depth` directories under `root`, through descriptors (the path passes PATH_MAX), and a
    file owned by uid 4321 at the bottom when run as root."""
    fd = os.open(root, os.O_RDONLY | os.O_DIRECTORY)
    try:
        for _ in range(depth):
            os.mkdir(name, dir_fd=fd)
            nxt = os.open(name, os.O_RDONLY | os.O_DIRECTORY, dir_fd=fd)
            os.close(fd)
            fd = nxt
        leaf = os.open("leaf", os.O_WRONLY | os.O_CREAT, 0o644, dir_fd=fd)
        os.close(leaf)
        if os.geteuid() == 0:
            os.chown("leaf", 4321, 4321, dir_fd=fd)
    finally:
        os.close(fd)


def _owners(root: Path) -> set[int]:
    """The owners of everything under `root`, however deep (found with `find`, not optarena)."""
    out = subprocess.run(
        ["find", str(root), "-printf", "%U\n"], capture_output=True, text=True, check=True
    )
    return {int(u) for u in out.stdout.split()}


def test_survey_names_a_tree_nested_too_deep_or_past_path_max(tmp_path: Path) -> None:
    ws = tmp_path / "ws"
    ws.mkdir()
    _nest(ws, 50)  # 50 levels of 100-byte names: a 5,000-byte path
    found = survey(ws, max_entries=1000)
    assert [f.problem for f in found.findings] == ["nested_too_deep"]
    assert "longer than 4096 bytes" in found.findings[0].why
    deep = tmp_path / "deep"
    deep.mkdir()
    _nest(deep, _untrusted.MAX_DEPTH + 5, name="d")
    assert [f.why for f in survey(deep, max_entries=1000).findings] == [
        f"a directory nested deeper than {_untrusted.MAX_DEPTH}"
    ]


@pytest.mark.skipif(os.geteuid() != 0, reason="chown needs root")
def test_a_tree_nested_past_path_max_is_handed_back_whole(tmp_path: Path) -> None:
    """The hand-back chown used paths: past PATH_MAX it failed, and files stayed owned by a
    uid that returns to the pool (the next agent with that uid could change them)."""
    root = tmp_path / "ws"
    root.mkdir()
    try:
        _nest(root, 2000)  # 200 KB of path
        lchown_tree(root, 4321, 4321)
        assert _owners(root) == {4321}
        lchown_tree(root, 0, 0, owner=4321)
        assert _owners(root) == {0}
        remove_tree(root)
        assert not root.exists()
    finally:  # pytest's own clean-up of old temporary directories recurses
        subprocess.run(["rm", "-rf", str(root)], check=True)


@pytest.mark.skipif(os.geteuid() != 0, reason="chown needs root")
def test_handing_back_takes_only_what_the_agents_uid_owns(tmp_path: Path) -> None:
    """A file the agent hard-linked from someone else (where the kernel allows it) keeps its
    owner: handing the workspace back must not make optarena its owner."""
    victim = tmp_path / "victim.txt"
    victim.write_text("someone else's\n")
    os.chown(victim, 4444, 4444)
    ws = tmp_path / "ws"
    ws.mkdir()
    (ws / "mine.py").write_text("x = 1\n")
    os.chown(ws / "mine.py", 4321, 4321)
    os.link(victim, ws / "linked.txt")
    lchown_tree(ws, 0, 0, owner=4321)
    assert (ws / "mine.py").stat().st_uid == 0
    assert victim.stat().st_uid == 4444


# ---- names as text -----------------------------------------------------------------------


@pytest.mark.parametrize(
    ("name", "shown"),
    [
        ("solution.py", "solution.py"),
        ("x\nverdict   accepted", "x\\x0averdict   accepted"),
        ("evil\u202eyp.py", "evil\\u202eyp.py"),
        ("esc\x1b[1A\x1b[2K.py", "esc\\x1b[1A\\x1b[2K.py"),
        ("zero\u200bwidth", "zero\\u200bwidth"),
        ("line\u2028sep", "line\\u2028sep"),
        (os.fsdecode(b"bad\xffname"), "bad\\xffname"),
        ("back\\x0a", "back\\\\x0a"),  # a real backslash: doubled, never read as an escape
        ("naïve-日本.py", "naïve-日本.py"),
    ],
)
def test_a_name_is_one_line_of_storable_text(name: str, shown: str) -> None:
    assert name_line(name) == shown
    shown.encode("utf-8")  # storable
    assert "\n" not in shown


def test_printable_keeps_lines_and_escapes_the_rest() -> None:
    assert printable("a\n\tb\x1b[2K\u202ec\udcff") == "a\n\tb\\x1b[2K\\u202ec\\xff"
