import numpy as np


def layernorm(x: np.ndarray, weight: np.ndarray, bias: np.ndarray, *, eps: float) -> np.ndarray:
    """Normalises over the first axis instead of the last."""
    centered = x - np.mean(x, axis=0, keepdims=True)
    variance = np.mean(centered**2, axis=0, keepdims=True)
    return centered / np.sqrt(variance + eps) * weight + bias
