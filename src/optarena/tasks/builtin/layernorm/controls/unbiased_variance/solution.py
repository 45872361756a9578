import numpy as np


def layernorm(x: np.ndarray, weight: np.ndarray, bias: np.ndarray, *, eps: float) -> np.ndarray:
    """Sample variance (divides by n - 1) where the contract says population variance."""
    centered = x - np.mean(x, axis=-1, keepdims=True)
    variance = np.var(x, axis=-1, ddof=1, keepdims=True)
    return centered / np.sqrt(variance + eps) * weight + bias
