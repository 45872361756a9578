import numpy as np


def rmsnorm(x: np.ndarray, weight: np.ndarray, *, eps: float) -> np.ndarray:
    """Root-mean-square normalisation over the last axis, then a per-channel scale."""
    mean_square = np.mean(x**2, axis=-1, keepdims=True)
    return x / np.sqrt(mean_square + eps) * weight
