"""Independent reference: float64, max-shifted. Not the baseline, never seen by a candidate."""

from typing import Any

import numpy as np


def reference(x: Any) -> np.ndarray:
    x64 = np.asarray(x, dtype=np.float64)
    shifted = x64 - np.max(x64, axis=-1, keepdims=True)
    e = np.exp(shifted)
    return e / np.sum(e, axis=-1, keepdims=True)
