"""Input generator for gemm-c: (workload, seed) -> ([a, b], {}). Runs in the judge only.

`m`, `n`, `k` are fixed or drawn from a [lo, hi] range; values are normal or uniform of unit
scale (bounded tails keep float32 rounding far inside the absolute tolerance), all positive
for `kind = "positive"` (no cancellation: the relative tolerance decides at any `scale`), or
zeros. Both arrays are C-contiguous float32: the C contract is row-major, dense.
"""

from typing import Any

import numpy as np

from optarena.tasks import inputs


def _dim(rng: np.random.Generator, value: Any) -> int:
    if isinstance(value, list | tuple):
        return int(rng.integers(int(value[0]), int(value[1]) + 1))
    return int(value)


def _values(rng: np.random.Generator, shape: tuple[int, int], kind: str, scale: float) -> Any:
    if kind == "zeros":
        return np.zeros(shape)
    if kind == "positive":
        return rng.uniform(0.5, 1.0, shape) * scale
    if rng.integers(2):
        return rng.standard_normal(shape) * scale
    return rng.uniform(-1.5, 1.5, shape) * scale


def generate(workload: Any, seed: int) -> tuple[list[Any], dict[str, Any]]:
    p = workload.params
    rng = np.random.default_rng(seed)
    m, n, k = (_dim(rng, p[d]) for d in ("m", "n", "k"))
    kind = str(p.get("kind", "signed"))
    scale = inputs.log_uniform_param(rng, p.get("scale", 1.0))
    a = np.ascontiguousarray(_values(rng, (m, k), kind, scale), dtype=np.float32)
    b = np.ascontiguousarray(_values(rng, (k, n), kind, scale), dtype=np.float32)
    return [a, b], {}
