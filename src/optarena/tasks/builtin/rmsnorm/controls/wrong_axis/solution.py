import numpy as np


def rmsnorm(x: np.ndarray, weight: np.ndarray, *, eps: float) -> np.ndarray:
    return x / np.sqrt(np.mean(x**2, axis=0, keepdims=True) + eps) * weight
