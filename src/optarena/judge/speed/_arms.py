"""The arms' files as each pair sees them: private copies of the editable files only."""

from __future__ import annotations

import shutil
from pathlib import Path

from optarena.tasks import Task


def copy_arm(task: Task, source: Path, dest: Path) -> Path:
    """A private copy of an arm's editable files (the candidate proper, nothing else)."""
    dest.mkdir(parents=True, exist_ok=True)
    for rel in task.editable_files(source):
        (dest / rel).parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(source / rel, dest / rel)
    return dest


def pair_dirs(task: Task, sources: tuple[Path, Path], root: Path) -> tuple[Path, Path, Path]:
    """Fresh working directories for one pair: copies of both arms' files and an empty one for
    the null arm, at paths of equal length. Nothing an arm wrote in one pair is there in the
    next (an attack counted its pairs in a file of a shared working directory and played
    honest in the first, which hid its effect from a rule that needed every pair)."""
    a = copy_arm(task, sources[0], root / "a")
    b = copy_arm(task, sources[1], root / "b")
    n = root / "n"
    n.mkdir(parents=True, exist_ok=True)
    return a, b, n
