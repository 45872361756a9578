"""The default-deny root's planner and the toolchain it shows, on trees built in tmp_path."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

# private: the private root's planner and its builder (run in a forked child), on literal trees
from optarena.sandbox import _linux
from optarena.sandbox._mounts import device_paths, opened_for, private_root, toolchain_paths
from optarena.sandbox._root import RootEntry, enter_root, leave_old_root, plan_root, resolve


def _kinds(plan_entries: tuple[RootEntry, ...]) -> list[tuple[str, str]]:
    return [(e.kind, e.path) for e in plan_entries]


def test_links_on_the_way_are_recreated_and_their_targets_bound(tmp_path: Path) -> None:
    (tmp_path / "real" / "bin").mkdir(parents=True)
    (tmp_path / "alias").symlink_to("real")  # relative, as /bin -> usr/bin
    links: dict[str, str] = {}
    assert resolve(str(tmp_path / "alias" / "bin"), links) == str(tmp_path / "real" / "bin")
    assert links == {str(tmp_path / "alias"): "real"}
    plan = plan_root(read=[str(tmp_path / "alias" / "bin")])
    assert _kinds(plan.entries) == [
        ("link", str(tmp_path / "alias")),
        ("bind", str(tmp_path / "real" / "bin")),
    ]
    assert plan.entries[0].source == "real"


def test_a_link_loop_or_a_missing_path_is_left_out(tmp_path: Path) -> None:
    (tmp_path / "a").symlink_to("b")
    (tmp_path / "b").symlink_to("a")
    assert resolve(str(tmp_path / "a" / "x")) is None
    assert plan_root(read=[str(tmp_path / "a"), str(tmp_path / "missing")]).entries == ()


def test_hidden_inside_a_bound_tree_is_emptied_and_needed_paths_inside_it_come_back(
    tmp_path: Path,
) -> None:
    prefix = tmp_path / "prefix"
    (prefix / "ledger" / "venv").mkdir(parents=True)
    (prefix / "ledger" / "ledger.db").write_text("rows")
    (prefix / "token").write_text("t")
    plan = plan_root(
        read=[str(prefix), str(prefix / "ledger" / "venv")],
        hide=[str(prefix / "ledger"), str(prefix / "token"), str(tmp_path / "elsewhere")],
    )
    assert _kinds(plan.entries) == [
        ("bind", str(prefix)),
        ("empty", str(prefix / "ledger")),
        ("null", str(prefix / "token")),
        ("bind", str(prefix / "ledger" / "venv")),  # after the mask that would hide it
    ]


def test_write_wins_over_read_and_scratch_over_both(tmp_path: Path) -> None:
    for d in ("ws", "ws/sub", "tmp", "tmp/ledger", "ro", "ro/inner"):
        (tmp_path / d).mkdir()
    plan = plan_root(
        read=[str(tmp_path / "ws"), str(tmp_path / "ro"), str(tmp_path / "ro" / "inner")],
        write=[
            str(tmp_path / "ws"),
            str(tmp_path / "ws" / "sub"),
            str(tmp_path / "tmp" / "ledger"),
        ],
        scratch=[str(tmp_path / "tmp")],
    )
    by_path = {e.path: e for e in plan.entries}
    assert by_path[str(tmp_path / "ws")].writable
    assert str(tmp_path / "ws" / "sub") not in by_path  # inside a writable bind already
    assert str(tmp_path / "ro" / "inner") not in by_path  # inside a read-only bind already
    assert by_path[str(tmp_path / "tmp")].kind == "scratch"
    order = [e.path for e in plan.entries]  # a bind inside scratch comes after the tmpfs
    assert order.index(str(tmp_path / "tmp")) < order.index(str(tmp_path / "tmp" / "ledger"))


def test_the_root_itself_is_never_bound(tmp_path: Path) -> None:
    assert plan_root(read=["/", "/."], write=[]).entries == ()


def test_toolchain_shows_prefix_libraries_but_never_a_whole_home(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    home = tmp_path / "home"
    venv = tmp_path / "venv"
    for d in (home / "bin", home / ".local" / "share" / "optarena", venv / "bin", venv / "lib"):
        d.mkdir(parents=True)
    (venv / "pyvenv.cfg").write_text("home = /usr/bin\n")
    (venv / "share").mkdir()
    monkeypatch.setenv("HOME", str(home))
    path_env = f"{home / 'bin'}:relative/bin::{venv / 'bin'}:/"
    shown = toolchain_paths(path_env)
    assert shown == [
        str(home / "bin"),  # its prefix is a home: nothing more of it
        str(venv / "bin"),
        str(venv / "lib"),
        str(venv / "pyvenv.cfg"),
    ]


def test_toolchain_follows_a_cli_linked_from_a_path_directory(tmp_path: Path) -> None:
    """`~/.local/bin/claude -> ../share/claude/versions/1/claude`: the version directory is
    shown, and for an npm CLI the whole node_modules tree it lives in."""
    bin_dir = tmp_path / "local" / "bin"
    bin_dir.mkdir(parents=True)
    native = tmp_path / "local" / "share" / "claude" / "versions" / "1"
    npm = tmp_path / "npm" / "lib" / "node_modules" / "@openai" / "codex" / "bin"
    for d in (native, npm):
        d.mkdir(parents=True)
        (d / "cli").write_text("#!/bin/sh\n")
    (bin_dir / "claude").symlink_to(native / "cli")
    (bin_dir / "codex").symlink_to(npm / "cli")
    shown = toolchain_paths(str(bin_dir))
    assert str(native) in shown and str(tmp_path / "npm" / "lib" / "node_modules") in shown
    assert str(tmp_path / "local" / "share") not in shown


def test_only_named_devices_and_gpus_are_shown_from_dev(tmp_path: Path) -> None:
    """A /dev of the sandbox's own: the usual devices and a GPU's nodes, never the rest (a
    socket, a FIFO, kmsg), whatever else the host's /dev holds."""
    import socket

    for name in ("null", "urandom", "kmsg", "nvidia0", "nvidia-uvm", "loop0", "fuse"):
        (tmp_path / name).write_text("")
    (tmp_path / "nvidia-caps").mkdir()
    (tmp_path / "pts").mkdir()
    os.mkfifo(tmp_path / "initctl")
    s = socket.socket(socket.AF_UNIX)
    try:
        s.bind(str(tmp_path / "log"))
        shown = [os.path.basename(p) for p in device_paths(str(tmp_path))]
    finally:
        s.close()
    assert shown == ["null", "urandom", "pts", "nvidia-caps", "nvidia-uvm", "nvidia0"]


def test_dev_is_planned_device_by_device_with_its_links_unresolved() -> None:
    plan = private_root([], [], ["/dev/shm"], fresh_proc=True, path_env="")
    assert "/dev" not in plan.paths("bind") and "/dev/null" in plan.paths("bind")
    links = {e.path: e.source for e in plan.entries if e.kind == "link"}
    assert links["/dev/fd"] == "/proc/self/fd" and links["/dev/stdout"] == "/proc/self/fd/1"
    assert "/dev/shm" in plan.paths("scratch")


@pytest.mark.skipif(os.geteuid() != 0, reason="needs root (a mount namespace)")
@pytest.mark.parametrize("kind", ["file", "directory"])
def test_a_hidden_path_gone_between_plan_and_start_leaves_nothing_to_hide(
    tmp_path: Path, kind: str
) -> None:
    """Another process removes a path the plan hides inside a read-only bind before the
    child builds the root: nothing is left to hide, and the root is still built (making a
    placeholder for it in the read-only bind failed with EROFS, and the sandbox with it)."""
    shown = tmp_path / "shown"
    shown.mkdir()
    hidden = shown / "secret"
    if kind == "file":
        hidden.write_text("x")
    else:
        hidden.mkdir()
    (shown / "kept").write_text("kept")
    plan = plan_root(read=[str(shown)], hide=[str(hidden)])
    assert [e.kind for e in plan.entries if e.path == str(hidden)] == [
        "null" if kind == "file" else "empty"
    ]
    os.unlink(hidden) if kind == "file" else hidden.rmdir()
    r, w = os.pipe()
    pid = os.fork()
    if pid == 0:  # the child: its own mount namespace, the planned root, and a look inside
        try:
            os.close(r)
            _linux.unshare(_linux.CLONE_NEWNS)
            enter_root(plan, scratch_mb=1)
            leave_old_root(plan)
            os.write(w, ",".join(sorted(os.listdir(str(shown)))).encode())
            os._exit(0)
        except BaseException as e:
            os.write(w, f"error {e!r}".encode())
            os._exit(1)
    os.close(w)
    seen = os.read(r, 4096).decode()
    os.close(r)
    _, status = os.waitpid(pid, 0)
    assert os.waitstatus_to_exitcode(status) == 0 and seen == "kept", seen


def test_a_directory_the_uid_may_not_search_is_shown_by_its_entries(tmp_path: Path) -> None:
    """A bound directory keeps its mode: a 0700 venv root (mkdtemp) would stop the sandbox's
    uid at its door, so its entries are bound instead, and its own place is a placeholder."""
    closed, opened = tmp_path / "venv", tmp_path / "open"
    for d in (closed / "bin", closed / "lib", opened / "bin"):
        d.mkdir(parents=True)
    (closed / "pyvenv.cfg").write_text("home = /usr/bin\n")
    os.chmod(closed, 0o700)
    uid = 1_500_000 if os.geteuid() == 0 else os.geteuid() + 1
    assert opened_for([str(closed), str(opened)], uid) == [
        str(closed / "bin"),
        str(closed / "lib"),
        str(closed / "pyvenv.cfg"),
        str(opened),
    ]
    assert opened_for([str(closed)], os.stat(closed).st_uid) == [str(closed)]  # its owner
