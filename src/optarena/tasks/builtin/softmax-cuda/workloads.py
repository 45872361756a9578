"""Input generator for softmax: (workload, seed) -> (args, kwargs). Runs in the judge only.

Shapes within the declared ranges, the distribution and magnitude of the logits, an offset and,
where a workload says `layouts = true`, the memory layout are drawn from the seed (see
`optarena.tasks.inputs`).
"""

from typing import Any

import numpy as np

from optarena.tasks import inputs


def generate(workload: Any, seed: int) -> tuple[list[Any], dict[str, Any]]:
    p = workload.params
    rng = np.random.default_rng(seed)
    shape = inputs.draw_shape(rng, p)
    dtype = np.dtype(p.get("dtype", "float32"))
    if p.get("kind") == "zeros":
        x = np.zeros(shape, dtype=dtype)
    else:
        scale = inputs.log_uniform_param(rng, p.get("scale", 1.0))
        offset = p.get("offset", 0.0)
        if isinstance(offset, list):
            offset = rng.uniform(float(offset[0]), float(offset[1]))
        x = (inputs.values(rng, shape, scale) + float(offset)).astype(dtype)
    if p.get("layouts"):
        x = inputs.relayout(rng, x)
    return [x], {}
