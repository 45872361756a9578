"""Shared fixtures: copies of built-in tasks that tests may edit, candidate directories."""

from __future__ import annotations

import os
import shutil
import subprocess
import textwrap
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from optarena.tasks import BUILTIN_DIR, Task, load_task


def pytest_configure(config: pytest.Config) -> None:
    """OpenBLAS's pool threads, after each product on more than one thread, spin for about
    0.1 s before they sleep. The judge's products while a worker runs calls are on one thread
    (`one_blas_thread`); the others in the xdist workers (the tests' own, SciPy's pool too) ran
    on the default pools, which spun for about 50 s of CPU a run (3.9% of the suite's samples
    in `blas_thread_server`) on a 2-CPU machine the suite shares. Set in the controller before
    the xdist workers start, so they and every process a test starts inherit it; the
    candidates' workers do not (`worker_env` passes on no such variable). With `-n 0` NumPy is
    loaded in this process before this runs: only the processes the tests start get it."""
    os.environ.setdefault("OPENBLAS_THREAD_TIMEOUT", "4")  # 2**4 cycles: no spinning


@pytest.fixture(autouse=True)
def _private_ledger(
    tmp_path_factory: pytest.TempPathFactory, monkeypatch: pytest.MonkeyPatch
) -> None:
    """No test writes to the user's ledger: OPTARENA_LEDGER points into a temporary directory."""
    monkeypatch.setenv("OPTARENA_LEDGER", str(tmp_path_factory.mktemp("ledger")))


@pytest.fixture
def task_copy(tmp_path: Path) -> Callable[..., Task]:
    """Copy a built-in task into tmp_path, optionally appending TOML (e.g. a [limits] table)."""

    def make(task_id: str = "rmsnorm", extra_toml: str = "") -> Task:
        root = tmp_path / f"task-{task_id}"
        shutil.copytree(BUILTIN_DIR / task_id, root, ignore=shutil.ignore_patterns("__pycache__"))
        if extra_toml:
            with (root / "task.toml").open("a") as f:
                f.write("\n" + textwrap.dedent(extra_toml))
        return load_task(root)

    return make


@pytest.fixture
def candidate(tmp_path: Path) -> Callable[[str], Path]:
    """A candidate directory holding one `solution.py` with the given source."""
    counter = iter(range(10_000))

    def make(source: str, filename: str = "solution.py") -> Path:
        d = tmp_path / f"cand-{next(counter)}"
        d.mkdir()
        (d / filename).write_text(textwrap.dedent(source))
        return d

    return make


@pytest.fixture
def tmpfs(tmp_path: Path) -> Iterator[Callable[[str], Path]]:
    """`tmpfs("size=24m")`: a fresh directory with a tmpfs of those mount options on it (a
    small or read-only filesystem); the test is skipped where mounting needs a root it lacks."""
    mounted: list[Path] = []

    def mount(options: str) -> Path:
        where = tmp_path / f"tmpfs-{len(mounted)}"
        where.mkdir()
        if os.geteuid() != 0:
            pytest.skip("mounting a filesystem needs root")
        if subprocess.run(["mount", "-t", "tmpfs", "-o", options, "tmpfs", str(where)]).returncode:
            pytest.skip("cannot mount a tmpfs here")
        mounted.append(where)
        return where

    yield mount
    for where in mounted:
        subprocess.run(["umount", "-l", str(where)], check=False)
