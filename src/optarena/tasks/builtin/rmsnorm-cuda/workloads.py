"""Input generator for rmsnorm: (workload, seed) -> (args, kwargs). Runs in the judge only.

Everything the contract leaves open is drawn from the seed (see `optarena.tasks.inputs`):
shapes within the declared ranges, eps, the distribution of x, the weight pattern, and, where a
workload says `layouts = true`, the memory layout of x and weight.
"""

from typing import Any

import numpy as np

from optarena.tasks import inputs


def generate(workload: Any, seed: int) -> tuple[list[Any], dict[str, Any]]:
    p = workload.params
    rng = np.random.default_rng(seed)
    shape = inputs.draw_shape(rng, p)
    dtype = np.dtype(p.get("dtype", "float32"))
    eps = inputs.log_uniform_param(rng, p["eps"])
    if p.get("kind") == "zeros":
        x = np.zeros(shape, dtype=dtype)
    else:
        scale = inputs.log_uniform_param(rng, p.get("scale", 1.0))
        x = inputs.values(rng, shape, scale).astype(dtype)
    weight = inputs.weights(rng, shape[-1]).astype(dtype)
    if p.get("layouts"):
        x, weight = inputs.relayout(rng, x), inputs.relayout(rng, weight)
    return [x, weight], {"eps": eps}
