"""Processes read from /proc: one `stat` parser whatever a process calls itself, start times
that tell a reused pid apart, a tree's descendants with their start times, and signals that
reach only the processes of a snapshot that are still the same ones."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator

import pytest

from optarena.processes import (
    descendants,
    is_zombie,
    kill_tree,
    parse_stat,
    process_table,
    signal_same,
    start_ticks,
    stat_of,
)

# A command name with what once confused parsers: spaces, both parentheses, a digit field.
ODD_NAME = b"a) 1 2 (b\xff"


def _stat_line(comm: bytes) -> bytes:
    fields = ["S", "41", *["0"] * 17, "123456", *["0"] * 30]  # field 3 .. field 52
    return b"42 (" + comm + b") " + " ".join(fields).encode() + b"\n"


def test_a_stat_line_is_read_after_the_last_parenthesis() -> None:
    info = parse_stat(42, _stat_line(ODD_NAME))
    assert (info.pid, info.ppid, info.state, info.start) == (42, 41, "S", 123456)
    assert parse_stat(42, _stat_line(b"python3")).start == 123456


def test_this_process_reads_as_itself() -> None:
    me = stat_of(os.getpid())
    assert me is not None and me.ppid == os.getppid() and me.state == "R"
    assert start_ticks(os.getpid()) == me.start
    assert process_table()[os.getpid()].start == me.start
    assert stat_of(2**22 + 1) is None and start_ticks(2**22 + 1) is None  # above pid_max


@pytest.fixture
def odd_child() -> Iterator[subprocess.Popen[bytes]]:
    """A sleeping child that renamed itself `ODD_NAME`, with a child of its own."""
    code = (
        f"open('/proc/self/comm', 'wb').write({ODD_NAME!r}); import subprocess, time; "
        "subprocess.Popen(['sleep', '60']); print('ready', flush=True); time.sleep(60)"
    )
    proc = subprocess.Popen(
        [sys.executable, "-c", code], stdout=subprocess.PIPE, start_new_session=True
    )
    assert proc.stdout is not None and proc.stdout.readline() == b"ready\n"
    yield proc
    kill_tree(proc)
    proc.stdout.close()


def test_a_renamed_process_is_read_like_any_other(odd_child: subprocess.Popen[bytes]) -> None:
    with open(f"/proc/{odd_child.pid}/comm", "rb") as f:
        assert f.read().startswith(b"a) 1 2 (b")  # the kernel kept the odd name
    info = stat_of(odd_child.pid)
    assert info is not None and info.ppid == os.getpid()
    assert start_ticks(odd_child.pid) == info.start


def test_descendants_carry_their_start_times(odd_child: subprocess.Popen[bytes]) -> None:
    found = descendants([os.getpid()])
    assert odd_child.pid in found and found[odd_child.pid] == start_ticks(odd_child.pid)
    grandchildren = descendants([odd_child.pid])
    assert len(grandchildren) == 1 and set(grandchildren) <= set(found)


def test_a_snapshot_signals_only_the_same_processes(odd_child: subprocess.Popen[bytes]) -> None:
    (grandchild, start), *_ = descendants([odd_child.pid]).items()
    signal_same({grandchild: start + 1}, signal.SIGKILL)  # as if the pid had been reused
    time.sleep(0.05)
    assert not is_zombie(grandchild)
    signal_same({grandchild: start}, signal.SIGKILL)
    deadline = time.monotonic() + 5
    while not is_zombie(grandchild) and time.monotonic() < deadline:
        time.sleep(0.01)
    assert is_zombie(grandchild)


def test_kill_tree_ends_a_grandchild_that_left_the_group() -> None:
    code = (
        "import subprocess, sys, time; "
        "p = subprocess.Popen(['sleep', '60'], start_new_session=True); "
        "print(p.pid, flush=True); time.sleep(60)"
    )
    proc = subprocess.Popen(
        [sys.executable, "-c", code], stdout=subprocess.PIPE, start_new_session=True
    )
    assert proc.stdout is not None
    escaped = int(proc.stdout.readline())
    start = start_ticks(escaped)
    assert start is not None and escaped in descendants([proc.pid])
    kill_tree(proc)
    proc.stdout.close()
    assert proc.returncode is not None
    assert is_zombie(escaped) or start_ticks(escaped) != start


def test_ending_a_tree_reaped_long_ago_spares_the_group_that_took_its_id() -> None:
    """A pid is reused once its process is reaped and its group is empty. `kill_tree` on a
    Popen reaped earlier sent SIGSTOP and SIGKILL to the group of its old pid: on a busy host
    (pid_max 32768 wraps in a minute) that was another sandbox's session, killed mid-run."""
    stranger = subprocess.Popen(["sleep", "30"], start_new_session=True)
    try:
        ours = subprocess.Popen.__new__(subprocess.Popen)  # a reaped Popen whose pid was reused
        ours.pid, ours.returncode = stranger.pid, 0
        kill_tree(ours)
        time.sleep(0.1)
        assert stranger.poll() is None and stat_of(stranger.pid) is not None
        assert stat_of(stranger.pid).state != "T"  # not left stopped either
    finally:
        stranger.kill()
        stranger.wait()
