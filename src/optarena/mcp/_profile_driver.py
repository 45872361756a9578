"""Run inside the candidate's sandbox by the `profile` tool (a stand-alone script: stdlib only,
nothing of optarena imported). Loads the entry, makes one warm-up call, then profiles `calls`
calls with cProfile on copies of the same inputs, and prints one JSON line.

argv: ENTRY_FILE FUNCTION INPUTS_PICKLE CALLS TOP
"""

import copy
import cProfile
import importlib.util
import json
import os
import pickle
import pstats
import sys
import time


def _where(path: str, cwd: str) -> str:
    """A short place name: relative inside the candidate's directory, else the file's tail."""
    if path.startswith("~") or path.startswith("<"):
        return path
    if path.startswith(cwd + os.sep):
        return os.path.relpath(path, cwd)
    parts = path.split(os.sep)
    return os.sep.join(parts[-2:])


def main() -> None:
    entry_file, function, inputs, calls, top = sys.argv[1:6]
    cwd = os.getcwd()
    sys.path.insert(0, cwd)
    spec = importlib.util.spec_from_file_location("candidate_entry", os.path.join(cwd, entry_file))
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    fn = getattr(module, function)
    with open(inputs, "rb") as f:
        args, kwargs = pickle.load(f)
    a, k = copy.deepcopy((args, kwargs))
    fn(*a, **k)  # warm-up: imports and caches, not profiled
    prof = cProfile.Profile()
    wall = 0.0
    for _ in range(int(calls)):
        a, k = copy.deepcopy((args, kwargs))  # a call that mutates its inputs spoils no other
        t0 = time.perf_counter()
        prof.runcall(fn, *a, **k)
        wall += time.perf_counter() - t0
    stats = pstats.Stats(prof)
    rows = []
    for (path, line, name), (_cc, nc, tt, ct, _callers) in stats.stats.items():  # type: ignore[attr-defined]
        if "_lsprof.Profiler" in name:
            continue  # the profiler's own switch
        place = name if path == "~" else f"{_where(path, cwd)}:{line}({name})"
        rows.append({"function": place, "ncalls": nc, "tottime_s": tt, "cumtime_s": ct})
    rows.sort(key=lambda r: r["tottime_s"], reverse=True)
    out = {"calls": int(calls), "wall_s": wall, "rows": rows[: int(top)]}
    sys.stdout.write(json.dumps(out) + "\n")


if __name__ == "__main__":
    main()
