"""Independent reference: float64 throughout, the variance as the mean of squared deviations
(two passes). Not the baseline, and never seen by a candidate."""

from typing import Any

import numpy as np


def reference(x: Any, weight: Any, bias: Any, *, eps: float) -> np.ndarray:
    x64 = np.asarray(x, dtype=np.float64)
    n = x64.shape[-1]
    mean = np.sum(x64, axis=-1, keepdims=True) / n
    d = x64 - mean
    var = np.einsum("...i,...i->...", d, d)[..., None] / n
    return d * (1.0 / np.sqrt(var + eps)) * np.asarray(weight, np.float64) + np.asarray(
        bias, np.float64
    )
