"""An interpreter installed under /tmp (a CI clone's venv there) must keep working: the
sandbox masks /tmp with a private tmpfs, and the leftovers sweep mounts an mqueue fs in a
private namespace, neither of which may hide the interpreter itself."""

from __future__ import annotations

import os
import subprocess
import sys
import tempfile
import venv
from pathlib import Path

import pytest

SRC = Path(__file__).resolve().parents[2] / "src"


@pytest.fixture(scope="module")
def tmp_python() -> Path:
    root = Path(tempfile.mkdtemp(prefix="optarena-venv-", dir="/tmp"))
    venv.EnvBuilder(system_site_packages=True, with_pip=False).create(root)
    return root / "bin" / "python"


def _run(python: Path, code: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PYTHONPATH": str(SRC)}
    return subprocess.run(
        [str(python), "-c", code], env=env, capture_output=True, text=True, timeout=120
    )


@pytest.mark.skipif(os.geteuid() != 0, reason="the mqueue sweep mounts only as root")
def test_the_mqueue_sweep_works_with_the_interpreter_under_tmp(tmp_python: Path) -> None:
    r = _run(tmp_python, "from optarena.sandbox._leftovers import remove_mqueues_of as f; f(4242)")
    assert r.returncode == 0, r.stderr[-2000:]


def test_a_worker_starts_with_the_interpreter_under_tmp(tmp_python: Path) -> None:
    code = """
import tempfile
from pathlib import Path
from optarena.judge.client._worker import WorkerClient
from optarena.tasks import BUILTIN_DIR, load_task
task = load_task(BUILTIN_DIR / "rmsnorm")
d = Path(tempfile.mkdtemp())
w = WorkerClient(d, task.spec.limits, d.parent / (d.name + ".log"), protect=[task.root])
w.start()
print(w.request({"op": "hello"}, timeout=60)["ok"])
w.close()
"""
    r = _run(tmp_python, code)
    assert r.returncode == 0 and r.stdout.strip() == "True", r.stderr[-2000:]
    assert sys.prefix != str(tmp_python.parent.parent)  # the test's own venv is elsewhere
