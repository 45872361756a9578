"""gemm-c's numbers, in-process: each control compiled with the judge's own build and called
through the worker's ctypes binding. Correct controls stay well inside the tolerance on every
workload; each wrong one misses it by a wide margin on the workload that exists to catch it."""

from __future__ import annotations

import shutil
from pathlib import Path

import numpy as np
import pytest

from optarena.judge.correctness import load_request

# private: the worker's modules are loaded by path and have no public names
from optarena.judge.worker._native import CEntry, LoadFailed, load_c
from optarena.tasks import Task, resolve_task

pytestmark = pytest.mark.skipif(shutil.which("cc") is None, reason="needs a C compiler")

SEEDS = range(4)
CORRECT_AT_MOST = 0.5
WRONG_AT_LEAST = 10.0
WRONG = [
    ("accumulate", "square"),
    ("accumulate", "zeros"),
    ("accumulate", "one-by-one"),
    ("transposed-b", "square"),
    ("transposed-b", "any-size"),
    ("k-off-by-one", "k-one"),
    ("k-off-by-one", "long-k"),
    ("k-off-by-one", "any-size"),
]


@pytest.fixture(scope="module")
def task() -> Task:
    return resolve_task("gemm-c")


@pytest.fixture(scope="module")
def entries(task: Task, tmp_path_factory: pytest.TempPathFactory) -> dict[str, CEntry]:
    """Every compilable control, built once (the compiler writes beside the source's cwd)."""
    msg = load_request(task.spec, 60.0)
    out = {}
    for c in task.spec.controls:
        if c.reason == "compile_failed":
            continue
        work = tmp_path_factory.mktemp(c.dir.replace("/", "_"))
        shutil.copyfile(task.root / c.dir / "solution.c", work / "solution.c")
        with pytest.MonkeyPatch.context() as mp:
            mp.chdir(work)
            out[c.name], _messages = load_c(str(work / "solution.c"), "gemm_f32", msg)
    return out


def worst_ratio(task: Task, fn: CEntry, workload: str, seed: int) -> float:
    args, kwargs = task.generator(task.spec.workload(workload), seed)
    ref = task.oracle(*args, **kwargs)
    out = fn(*args, **kwargs).astype(np.float64)
    assert out.shape == ref.shape
    tol = task.spec.tolerance
    with np.errstate(all="ignore"):
        ratio = np.abs(out - ref) / (tol.atol + tol.rtol * np.abs(ref))
    return float(np.max(np.where(np.isfinite(ratio), ratio, np.inf)))


@pytest.mark.parametrize("control", ["baseline", "optimized"])
def test_correct_controls_stay_well_inside(
    task: Task, entries: dict[str, CEntry], control: str
) -> None:
    for w in task.spec.workloads:
        for seed in SEEDS:
            r = worst_ratio(task, entries[control], w.name, seed)
            assert r < CORRECT_AT_MOST, (control, w.name, seed, r)


@pytest.mark.parametrize(("control", "workload"), WRONG)
def test_wrong_controls_miss_by_a_wide_margin(
    task: Task, entries: dict[str, CEntry], control: str, workload: str
) -> None:
    for seed in SEEDS:
        r = worst_ratio(task, entries[control], workload, seed)
        assert r > WRONG_AT_LEAST, (control, workload, seed, r)


def test_output_is_garbage_filled_and_inputs_checked(
    task: Task, entries: dict[str, CEntry]
) -> None:
    """The output buffer holds a large finite value before the C code runs (reading it before
    writing it is wrong by a wide margin), a new one per call; inputs must be dense float32."""
    fn = entries["baseline"]
    a = np.ones((2, 3), dtype=np.float32)
    b = np.ones((3, 4), dtype=np.float32)
    fills = set()
    for _ in range(8):
        params, out = fn.prepare([a, b], {})
        assert params[:3] == [2, 4, 3]  # m, n, k by the declared sizes
        assert np.all(out == out.flat[0]) and 1e2 <= abs(float(out.flat[0])) <= 1e4
        fills.add(float(out.flat[0]))
    assert len(fills) > 1
    with pytest.raises(TypeError, match="C-contiguous float32"):
        fn(a.T.copy().T, b)
    with pytest.raises(TypeError, match="C-contiguous float32"):
        fn(a.astype(np.float64), b)
    with pytest.raises(TypeError, match="positional arrays"):
        fn(a)


def test_a_compile_error_carries_the_compilers_message(
    task: Task, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    src = tmp_path / "solution.c"
    shutil.copyfile(task.root / "controls/compile_error/solution.c", src)
    with pytest.raises(LoadFailed) as e:
        load_c(str(src), "gemm_f32", load_request(task.spec, 60.0))
    assert e.value.code == "compile_failed"
    assert "undeclared_sum" in str(e.value) and "error" in str(e.value)
