"""Input generator for gemm-c: (workload, seed) -> ([a, b], {}). Runs in the judge only.

m, n and k are fixed or drawn from a range per call; values are uniform in [-scale, scale],
the scale drawn log-uniformly when a range is given. Both arrays are float32, C-contiguous
(the C convention of the task).
"""

from typing import Any

import numpy as np

from optarena.tasks import inputs


def _dim(rng: np.random.Generator, value: Any) -> int:
    if isinstance(value, list):
        return int(rng.integers(int(value[0]), int(value[1]) + 1))
    return int(value)


def generate(workload: Any, seed: int) -> tuple[list[Any], dict[str, Any]]:
    p = workload.params
    rng = np.random.default_rng(seed)
    m, n, k = (_dim(rng, p[name]) for name in ("m", "n", "k"))
    scale = inputs.log_uniform_param(rng, p.get("scale", 1.0))
    a = (rng.uniform(-1.0, 1.0, (m, k)) * scale).astype(np.float32)
    b = (rng.uniform(-1.0, 1.0, (k, n)) * scale).astype(np.float32)
    return [a, b], {}
