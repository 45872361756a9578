"""Input generator for layernorm: (workload, seed) -> (args, kwargs). Runs in the judge only.

Everything the contract leaves open is drawn from the seed (see `optarena.tasks.inputs`):
shapes within the declared ranges, eps, the distribution of x and a per-row offset (so that a
missing mean subtraction shows), the weight and bias patterns, and, where a workload says
`layouts = true`, the memory layout of x, weight and bias.

A row whose spread is far below its magnitude is ill-conditioned in float32: centring it loses
the digits that matter whatever the implementation, so no float32 code could meet a float64
reference there. Such rows (only likely at hidden sizes of 2 to 8) get an alternating +-scale
added, which gives them a spread of about `scale`.
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
    n = shape[-1]
    if p.get("kind") == "zeros":
        x = np.zeros(shape, dtype=dtype)
    else:
        scale = inputs.log_uniform_param(rng, p.get("scale", 1.0))
        lo, hi = p.get("offset", [-3.0, 3.0])
        row_offset = rng.uniform(float(lo), float(hi), (*shape[:-1], 1)) * scale
        x64 = inputs.values(rng, shape, scale) + row_offset
        if n >= 2:
            thin = np.std(x64, axis=-1, keepdims=True) < 0.1 * scale
            alternating = np.where(np.arange(n) % 2 == 0, scale, -scale)
            x64 = np.where(thin, x64 + alternating, x64)
        x = x64.astype(dtype)
    weight = inputs.weights(rng, n).astype(dtype)
    bias = (rng.choice([-1.0, 1.0]) * inputs.weights(rng, n)).astype(dtype)
    if p.get("layouts"):
        x, weight, bias = (inputs.relayout(rng, a) for a in (x, weight, bias))
    return [x, weight, bias], {"eps": eps}
