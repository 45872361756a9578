import numpy as np


def layernorm(x: np.ndarray, weight: np.ndarray, bias: np.ndarray, *, eps: float) -> np.ndarray:
    """Adds eps to the standard deviation instead of to the variance."""
    centered = x - np.mean(x, axis=-1, keepdims=True)
    variance = np.mean(centered**2, axis=-1, keepdims=True)
    return centered / (np.sqrt(variance) + eps) * weight + bias
