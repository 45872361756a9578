"""Input generator for softmax: (workload, seed) -> (args, kwargs). Runs in the judge only."""

from typing import Any

import numpy as np


def generate(workload: Any, seed: int) -> tuple[list[Any], dict[str, Any]]:
    p = workload.params
    rng = np.random.default_rng(seed)
    shape = tuple(int(s) for s in p["shape"])
    dtype = np.dtype(p.get("dtype", "float32"))
    if p.get("kind") == "zeros":
        x = np.zeros(shape, dtype=dtype)
    else:
        raw = rng.standard_normal(shape) * float(p.get("scale", 1.0)) + float(p.get("offset", 0.0))
        x = raw.astype(dtype)
    return [x], {}
