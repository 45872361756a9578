"""How much a gap before a call slows it, in one process: the machine's part of short calls'
dilution (docs/measurement.md, "Where attention's decode loses its effect").

The judge cannot run a workload's calls back to back: between two calls it reads the last
output, compares the last inputs and writes the next (for attention's decode, 8 MiB each way:
about 2 ms). An in-process loop has no such gap. This writes each call's inputs into one buffer
per argument (as the judge writes its input area), waits out a gap of each kind, then times the
baseline's call and the same call once more back to back, on the thread's CPU clock, pinned to
one CPU with the judge's allocator settings. On a machine where the gap costs nothing, both columns
agree; where they do not, no protocol that must reveal each call's inputs after the previous
answer can read a short call's ratio as an in-process loop does.

    python benchmarks/cold_gap.py [--task attention] [--workload decode] [--rounds 30]
"""

from __future__ import annotations

import argparse
import os
import shutil
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from optarena.judge.client._worker_env import WORKER_THREAD_ENV

if __name__ == "__main__" and any(os.environ.get(k) != v for k, v in WORKER_THREAD_ENV.items()):
    # the judge's workers' BLAS and allocator settings; glibc reads MALLOC_* only when a
    # process starts, so it starts again with them
    os.execve(sys.executable, [sys.executable, *sys.argv], {**os.environ, **WORKER_THREAD_ENV})

import numpy as np
from _inprocess import Written, load_entry

from optarena.tasks import load_task

BUILTIN = Path(__file__).resolve().parents[1] / "src/optarena/tasks/builtin"


def _gaps(seconds: float) -> dict[str, Callable[[], None]]:
    big = np.ones(1 << 20, dtype=np.float32)  # 4 MiB
    small = np.ones(16, dtype=np.float32)

    def spin() -> None:
        until = time.perf_counter() + seconds
        while time.perf_counter() < until:
            pass

    def tiny_numpy() -> None:
        until = time.perf_counter() + seconds
        while time.perf_counter() < until:
            small.sum()

    def reading() -> None:
        until = time.perf_counter() + seconds
        while time.perf_counter() < until:
            big.sum()

    return {
        "none": lambda: None,
        "python loop": spin,
        "tiny numpy calls": tiny_numpy,
        "reading 4 MiB arrays": reading,
        "sleep": lambda: time.sleep(seconds),
    }


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--task", default="attention")
    ap.add_argument("--workload", default="decode")
    ap.add_argument("--rounds", type=int, default=30)
    ap.add_argument("--gap-ms", type=float, default=2.0)
    ap.add_argument("--cpu", type=int, default=0)
    args = ap.parse_args(argv)
    os.sched_setaffinity(0, [args.cpu])
    task = load_task(BUILTIN / args.task)
    build = Path(tempfile.mkdtemp(prefix="optarena-cold-gap-"))  # a C entry is compiled here
    try:
        fn = load_entry(task, task.baseline_dir, build, "baseline")
        w = next(w for w in task.spec.workloads if w.name == args.workload)
        calls: list[Any] = [task.generator(w, seed) for seed in range(8)]
        written = Written(calls[0])  # each call's inputs copied just before it, as the judge does
        for a, k in calls[:2]:
            fn(*a, **k)  # warm-up
        clock = time.thread_time_ns
        print(f"{args.task} {args.workload}, gap {args.gap_ms} ms, {args.rounds} rounds of 8 calls")
        print(f"{'gap':24s} {'first call':>12s} {'back to back':>14s}")
        for name, gap in _gaps(args.gap_ms / 1000).items():
            first = again = 0
            for _ in range(args.rounds):
                for args_, kwargs_ in calls:
                    a, k = written(args_, kwargs_)
                    gap()
                    t0 = clock()
                    fn(*a, **k)
                    t1 = clock()
                    fn(*a, **k)
                    first += t1 - t0
                    again += clock() - t1
            n = args.rounds * len(calls) * 1000
            print(f"{name:24s} {first / n:10.0f} us {again / n:12.0f} us")
    finally:
        shutil.rmtree(build, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
