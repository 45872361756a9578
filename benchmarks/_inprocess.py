"""In-process timing of two arms of a task, the reference `fidelity.py` holds the judge against.

Run as a fresh process: `python benchmarks/_inprocess.py TASK_DIR A_DIR B_DIR SECONDS SEED CPU
[INPUTS]`. Both entries are loaded into this one interpreter (a C entry compiled with the
judge's flags) and called the way pyperf or timeit would time them: on the process CPU clock
around each call, nothing else in between, in interleaved blocks (ABBA/BAAB, alternating) on
the same fresh inputs for both arms (drawn from the task's generator per block, before the
block is timed). INPUTS `drawn` (the default) passes them where the generator left them;
`written` copies each call's arrays, untimed, into one buffer per argument just before the
call, as the judge writes them into its input area (`Written`).
Prints one JSON object: per timed workload the ratio sum(b) / sum(a) and the calls behind it.
The allocator is as the caller's environment sets it (`fidelity.py`: as in the judge's
workers).
"""

from __future__ import annotations

import importlib.util
import json
import math
import os
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

if __name__ == "__main__":  # the fresh process it runs as; an importer's environment is its own
    for var in ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS"):
        os.environ.setdefault(var, "1")  # as in the judge's workers (before NumPy is imported)

import numpy as np

from optarena.judge.correctness._native import BUILD_FLAGS, BUILD_LIBS, compiler
from optarena.tasks import Task, load_task


def _native() -> Any:
    path = Path(__file__).resolve().parents[1] / "src/optarena/judge/worker/_native.py"
    spec = importlib.util.spec_from_file_location("_fidelity_native", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def load_entry(task: Task, arm_dir: Path, build_dir: Path, label: str) -> Any:
    entry = task.spec.entry
    path = arm_dir / entry.file
    if entry.language == "c":
        assert entry.c is not None
        native = _native()
        cc, _ = compiler()
        build = {"cc": cc, "flags": list(BUILD_FLAGS), "libs": list(BUILD_LIBS), "timeout_s": 60}
        work = build_dir / arm_dir.name
        work.mkdir(parents=True, exist_ok=True)
        src = work / path.name
        src.write_bytes(path.read_bytes())
        cwd = os.getcwd()
        os.chdir(work)
        try:
            library, _ = native.compile_c(str(src), build)
        finally:
            os.chdir(cwd)
        return native.CEntry(library, entry.function, entry.c.model_dump())
    spec = importlib.util.spec_from_file_location(f"arm_{label}", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return getattr(module, entry.function)


class Written:
    """Each call's arrays copied, untimed, into one buffer per argument just before the call:
    the input arrives as the judge hands it (written into its input area, in this CPU's cache)
    rather than from where the generator left it."""

    def __init__(self, probe: tuple[list[Any], dict[str, Any]]) -> None:
        args, kwargs = probe
        self.args = {i: np.empty_like(a) for i, a in enumerate(args) if _is_array(a)}
        self.kwargs = {k: np.empty_like(a) for k, a in kwargs.items() if _is_array(a)}

    def __call__(self, args: list[Any], kwargs: dict[str, Any]) -> tuple[list[Any], dict]:
        args, kwargs = list(args), dict(kwargs)
        for i, buf in self.args.items():
            np.copyto(buf, args[i])
            args[i] = buf
        for k, buf in self.kwargs.items():
            np.copyto(buf, kwargs[k])
            kwargs[k] = buf
        return args, kwargs


def _is_array(a: Any) -> bool:
    return isinstance(a, np.ndarray) and a.flags.c_contiguous


def _time(
    fn: Any, calls: list[tuple[list[Any], dict[str, Any]]], written: Written | None = None
) -> int:
    clock = time.process_time_ns
    total = 0
    for args, kwargs in calls:
        if written is not None:
            args, kwargs = written(args, kwargs)
        t0 = clock()
        fn(*args, **kwargs)
        total += clock() - t0
    return total


def measure(
    task: Task, fns: dict[str, Any], seconds: float, seed: int, inputs: str = "drawn"
) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for wi, w in enumerate(task.spec.workloads):
        if w.role != "timed":
            continue
        sums = {"a": 0, "b": 0}
        calls_done, block = 0, 0
        probe = [task.generator(w, seed * 1000 + wi)]
        written = Written(probe[0]) if inputs == "written" else None
        per_call = max(_time(fns["a"], probe), 1) / 1e9
        k = max(2, min(32, math.ceil(0.002 / per_call)))
        for arm in "ab":  # warm-up: input-independent work, as the judge's warm-up calls
            _time(fns[arm], probe * 2)
        deadline = time.monotonic() + seconds
        while block < 8 or time.monotonic() < deadline:
            base = (seed << 20) + (wi << 16) + block * 64
            calls = [task.generator(w, base + c) for c in range(k)]
            order = "abba" if block % 2 == 0 else "baab"
            for arm in order:
                sums[arm] += _time(fns[arm], calls, written)
            calls_done += 2 * k
            block += 1
        out[w.name] = {"ratio": sums["b"] / sums["a"], "calls": calls_done, "blocks": block}
    return out


def main(argv: list[str]) -> int:
    task_dir, a_dir, b_dir, seconds, seed, cpu = argv[1:7]
    inputs = argv[7] if len(argv) > 7 else "drawn"
    if int(cpu) >= 0:
        os.sched_setaffinity(0, [int(cpu)])
    task = load_task(Path(task_dir))
    with tempfile.TemporaryDirectory(prefix="optarena-inprocess-") as tmp:
        fns = {
            "a": load_entry(task, Path(a_dir), Path(tmp) / "a", "a"),
            "b": load_entry(task, Path(b_dir), Path(tmp) / "b", "b"),
        }
        result = measure(task, fns, float(seconds), int(seed), inputs)
    print(json.dumps(result))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
