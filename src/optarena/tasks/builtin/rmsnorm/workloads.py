"""Input generator for rmsnorm: (workload, seed) -> (args, kwargs). Runs in the judge only."""

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
        x = (rng.standard_normal(shape) * float(p.get("scale", 1.0))).astype(dtype)
    weight = (1.0 + 0.5 * rng.standard_normal(shape[-1])).astype(dtype)
    return [x, weight], {"eps": float(p["eps"])}
