"""The mask planner on literal paths, and the traversal rule it relies on."""

from __future__ import annotations

import os
import stat
from pathlib import Path

# private: the mount planner, tested on literal trees
from optarena.sandbox._mounts import Mask, blockers, may_traverse, plan_masks


def _st(mode: int, uid: int = 0, gid: int = 0) -> os.stat_result:
    return os.stat_result((stat.S_IFDIR | mode, 0, 0, 2, uid, gid, 0, 0, 0, 0))


def test_traversal_follows_owner_group_other() -> None:
    assert may_traverse(_st(0o700, uid=5), 5, 9)
    assert not may_traverse(_st(0o700, uid=0), 5, 9)
    assert may_traverse(_st(0o710, uid=0, gid=9), 5, 9)
    assert may_traverse(_st(0o711), 5, 9)
    assert not may_traverse(_st(0o750), 5, 9)
    assert may_traverse(_st(0o700), 0, 0)  # root searches anything


def test_scratch_dirs_keep_only_the_workdir() -> None:
    masks = plan_masks(
        needed=["/tmp/j/candidate", "/usr/lib/python3"],
        hide=[],
        scratch=["/tmp", "/dev/shm"],
    )
    assert masks == [
        Mask("/tmp", ("/tmp/j/candidate",), scratch=True),
        Mask("/dev/shm", (), scratch=True),
    ]


def test_blocked_directory_keeps_the_interpreter_only() -> None:
    masks = plan_masks(
        needed=["/root/.pyenv/versions/3.11", "/root/.pyenv/versions/3.11/lib", "/work/venv"],
        hide=[],
        scratch=[],
        blocked=["/root"],
    )
    assert masks == [Mask("/root", ("/root/.pyenv/versions/3.11",))]


def test_hidden_task_inside_a_scratch_dir_needs_no_mask_of_its_own() -> None:
    masks = plan_masks(needed=["/tmp/j/cand"], hide=["/tmp/pytest/task"], scratch=["/tmp"])
    assert [m.path for m in masks] == ["/tmp"]


def test_hidden_task_inside_a_kept_path_is_masked_after_it() -> None:
    masks = plan_masks(needed=["/srv/env"], hide=["/srv/env/tasks/t"], scratch=[], blocked=["/srv"])
    assert [m.path for m in masks] == ["/srv", "/srv/env/tasks/t"]


def test_a_needed_path_is_never_hidden() -> None:
    assert plan_masks(needed=["/opt/task"], hide=["/opt/task"], scratch=[]) == []


def test_blockers_name_the_first_closed_directory(tmp_path: Path) -> None:
    closed = tmp_path / "open" / "closed"
    (closed / "inner").mkdir(parents=True)
    (tmp_path / "open").chmod(0o755)
    closed.chmod(0o700)
    target = str(closed / "inner")
    uid = 1_500_000
    found = blockers([target], uid, uid)
    assert len(found) == 1 and list(found.values()) == [[target]]
    (where,) = found
    above = [p for p in (tmp_path, *tmp_path.parents) if not os.stat(p).st_mode & stat.S_IXOTH]
    assert where == str(closed) if not above else where == str(above[-1])
    assert blockers([target], 0, 0) == {}
