import numpy as np


def layernorm(x: np.ndarray, weight: np.ndarray, bias: np.ndarray, *, eps: float) -> np.ndarray:
    """Divides by the standard deviation but never subtracts the mean."""
    variance = np.var(x, axis=-1, keepdims=True)
    return x / np.sqrt(variance + eps) * weight + bias
