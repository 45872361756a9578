import numpy as np


def rmsnorm(x: np.ndarray, weight: np.ndarray, *, eps: float) -> np.ndarray:
    """Saves an allocation by normalising x in place: the caller's input is destroyed."""
    x /= np.sqrt(np.mean(x**2, axis=-1, keepdims=True) + eps)
    return x * weight
