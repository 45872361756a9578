"""The GPU variants' CPU side (spec, oracle, workloads that catch each wrong control) and how
the library says what this machine can run; the C entry's spec rules."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import numpy as np
import pytest

from optarena.cli import main
from optarena.errors import SpecError
from optarena.judge.correctness import load_request
from optarena.tasks import BUILTIN_DIR, Task, cuda_available, load_task, resolve_task

CUDA_TASKS = ["rmsnorm-cuda", "softmax-cuda"]
no_gpu = pytest.mark.skipif(cuda_available(), reason="this machine has a GPU")


@pytest.mark.parametrize("tid", CUDA_TASKS)
def test_cuda_tasks_declare_the_device_and_torch(tid: str) -> None:
    task = resolve_task(tid)
    req = task.spec.requirements
    assert req.device == "cuda" and any(p.startswith("torch") for p in req.packages)
    assert load_request(task.spec, 60.0)["device"] == "cuda"
    assert {w.role for w in task.spec.workloads} == {"timed", "check", "edge"}
    task.check_workloads()  # every workload's params work with its generator


@no_gpu
def test_tasks_lists_every_task_and_why_not(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["tasks", "--json"]) == 0
    rows = {r["id"]: r for r in json.loads(capsys.readouterr().out)}
    assert {"gemm-c", *CUDA_TASKS} <= set(rows)
    for tid in CUDA_TASKS:
        assert rows[tid]["runnable"] is False
        assert rows[tid]["unmet"][0].startswith("needs a CUDA device: ")
    assert rows["gemm-c"]["runnable"] is (shutil.which("cc") is not None)


@no_gpu
@pytest.mark.parametrize("tid", CUDA_TASKS)
def test_judging_a_cuda_task_here_is_refused(tid: str, capsys: pytest.CaptureFixture[str]) -> None:
    baseline = str(BUILTIN_DIR / tid / "baseline")
    assert main(["judge", tid, baseline]) == 2
    err = capsys.readouterr().err
    assert "needs a CUDA device: " in err and "Traceback" not in err


def test_a_missing_compiler_is_named(monkeypatch: pytest.MonkeyPatch) -> None:
    # private: monkeypatched (the GPU probe)
    import optarena.tasks._requirements as requirements

    real = shutil.which
    monkeypatch.setattr(requirements.shutil, "which", lambda p: None if p == "cc" else real(p))
    unmet = requirements.unmet_requirements(resolve_task("gemm-c").spec.requirements)
    assert unmet == ["needs cc (the C compiler): not found on PATH"]


def _inputs(task: Task, workload: str, seed: int) -> tuple[list[np.ndarray], dict[str, float]]:
    args, kwargs = task.generator(task.spec.workload(workload), seed)
    return args, kwargs


def _worst(task: Task, out: np.ndarray, ref: np.ndarray) -> float:
    tol = task.spec.tolerance
    with np.errstate(all="ignore"):
        r = np.abs(out.astype(np.float64) - ref) / (tol.atol + tol.rtol * np.abs(ref))
    return float(np.max(np.where(np.isfinite(r), r, np.inf)))


def _rms(x: np.ndarray, w: np.ndarray, eps: float, axis: int = -1) -> np.ndarray:
    return x / np.sqrt(np.mean(x * x, axis=axis, keepdims=True) + eps) * w


# NumPy translations of each wrong control (the controls are PyTorch and cannot run here):
# the workload named beside each must catch it by a wide margin on every seed.
RMS_WRONG = {
    "missing-eps": ("large-eps", lambda x, w, eps: _rms(x, w, 0.0)),
    "missing-weight": ("decode", lambda x, w, eps: _rms(x, np.float32(1.0), eps)),
    "wrong-axis": ("decode", lambda x, w, eps: _rms(x, w, eps, axis=0)),
    "float16": (
        "decode",
        lambda x, w, eps: _rms(x.astype(np.float16), w.astype(np.float16), eps).astype(np.float32),
    ),
}


@pytest.mark.parametrize("control", sorted(RMS_WRONG))
def test_rmsnorm_cuda_workloads_catch_each_wrong_control(control: str) -> None:
    task = resolve_task("rmsnorm-cuda")
    workload, wrong = RMS_WRONG[control]
    for seed in range(2):
        (x, w), kw = _inputs(task, workload, seed)
        ref = task.oracle(x, w, **kw)
        assert _worst(task, _rms(x, w, kw["eps"]).astype(np.float32), ref) < 0.5
        with np.errstate(all="ignore"):
            assert _worst(task, wrong(x, w, kw["eps"]), ref) > 10.0, (control, seed)


def _softmax(x: np.ndarray, axis: int = -1, shift: bool = True) -> np.ndarray:
    e = np.exp(x - np.max(x, axis=axis, keepdims=True) if shift else x)
    return e / np.sum(e, axis=axis, keepdims=True)


SOFTMAX_WRONG = {
    "no-max-subtraction": ("large-logits", lambda x: _softmax(x, shift=False)),
    "wrong-axis": ("decode", lambda x: _softmax(x, axis=0)),
    "zeros": ("decode", np.zeros_like),
}


@pytest.mark.parametrize("control", sorted(SOFTMAX_WRONG))
def test_softmax_cuda_workloads_catch_each_wrong_control(control: str) -> None:
    task = resolve_task("softmax-cuda")
    workload, wrong = SOFTMAX_WRONG[control]
    for seed in range(2):
        (x,), _ = _inputs(task, workload, seed)
        ref = task.oracle(x)
        assert _worst(task, _softmax(x).astype(np.float32), ref) < 0.5
        with np.errstate(all="ignore"):
            assert _worst(task, wrong(x), ref) > 10.0, (control, seed)


def test_cuda_oracles_are_float64_and_agree_with_the_cpu_tasks() -> None:
    for tid, cpu in (("rmsnorm-cuda", "rmsnorm"), ("softmax-cuda", "softmax")):
        gpu_task, cpu_task = resolve_task(tid), resolve_task(cpu)
        for w in gpu_task.spec.workloads:
            args, kwargs = gpu_task.generator(w, 7)
            ref = gpu_task.oracle(*args, **kwargs)
            assert ref.dtype == np.float64 and np.all(np.isfinite(ref)), (tid, w.name)
            np.testing.assert_array_equal(ref, cpu_task.oracle(*args, **kwargs))


def _c_spec(tmp_path: Path, edit: tuple[str, str]) -> Path:
    root = tmp_path / "c-task"
    shutil.copytree(BUILTIN_DIR / "gemm-c", root, ignore=shutil.ignore_patterns("__pycache__"))
    toml = root / "task.toml"
    toml.write_text(toml.read_text().replace(*edit))
    return root


@pytest.mark.parametrize(
    ("edit", "says"),
    [
        (('programs = ["cc"]', "programs = []"), "a C entry needs programs = ['cc']"),
        (('output = "c"\n', 'output = "d"\n'), "must name each input, size and the output"),
        (('m = "a.0"', 'm = "x.0"'), "must be 'input.axis'"),
        (('output_shape = ["m", "n"]', 'output_shape = ["m", "q"]'), "'q', which is not a size"),
        (('language = "c"\n', ""), "[entry.c] is only for language = 'c'"),
    ],
)
def test_a_bad_c_binding_is_a_spec_error(tmp_path: Path, edit: tuple[str, str], says: str) -> None:
    with pytest.raises(SpecError, match=None) as e:
        load_task(_c_spec(tmp_path, edit))
    assert says in str(e.value)
