"""Instruction counts (valgrind/callgrind): deterministic, beside time, honest when missing."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

# private: monkeypatched (no perf), and its parsers tested on literal output
import optarena.judge.speed._instructions as ins
from optarena.judge.speed._instructions import count_arms, parse_total
from optarena.tasks import BUILTIN_DIR, Task, load_task

SLOW_2X = """
import numpy as np


def rmsnorm(x, weight, *, eps):
    for _ in range(2):  # the whole computation twice: about twice the instructions
        out = x / np.sqrt(np.mean(x**2, axis=-1, keepdims=True) + eps) * weight
    return out
"""


def test_parse_callgrind_totals() -> None:
    assert parse_total("events: Ir\nsummary: 742084\ntotals: 742084\n") == 742084
    assert parse_total("events: Ir\n") is None


def test_missing_valgrind_is_reported_not_faked(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(ins.shutil, "which", lambda _name: None)
    task = load_task(BUILTIN_DIR / "rmsnorm")
    result = count_arms(task, (task.baseline_dir, task.baseline_dir), seed=1)
    assert result.available is False and "valgrind" in result.reason
    assert result.per_call == {} and result.ratio == {}


@pytest.fixture
def decode_only(tmp_path: Path) -> Task:
    """rmsnorm timed on its decode shape only: a short run under valgrind."""
    root = tmp_path / "rmsnorm"
    shutil.copytree(BUILTIN_DIR / "rmsnorm", root, ignore=shutil.ignore_patterns("__pycache__"))
    spec = root / "task.toml"
    old = 'name = "prefill"\nrole = "timed"'
    assert old in spec.read_text(), "the rmsnorm task changed: update this fixture"
    spec.write_text(spec.read_text().replace(old, 'name = "prefill"\nrole = "check"'))
    return load_task(root)


@pytest.mark.skipif(shutil.which("valgrind") is None, reason="valgrind is not installed")
def test_instruction_counts_are_deterministic_and_see_double_work(
    decode_only: Task, tmp_path: Path
) -> None:
    slow = tmp_path / "slow"
    slow.mkdir()
    (slow / "solution.py").write_text(SLOW_2X)
    base = decode_only.baseline_dir
    same = count_arms(decode_only, (base, base), seed=3)
    assert same.available, same.reason
    a, b = same.per_call["decode"]["a"], same.per_call["decode"]["b"]
    assert a > 10_000 and abs(b / a - 1) < 0.01  # the same code counts the same
    double = count_arms(decode_only, (base, slow), seed=3)
    assert double.available and 1.8 < double.ratio["decode"] < 2.2
