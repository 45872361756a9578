import numpy as np


def layernorm(x: np.ndarray, weight: np.ndarray, bias: np.ndarray, *, eps: float) -> np.ndarray:
    """Saves an allocation by centring x in place: the caller's input is destroyed."""
    x -= np.mean(x, axis=-1, keepdims=True)
    x /= np.sqrt(np.mean(x**2, axis=-1, keepdims=True) + eps)
    return x * weight + bias
