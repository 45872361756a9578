import numpy as np


def layernorm(x: np.ndarray, weight: np.ndarray, bias: np.ndarray, *, eps: float) -> np.ndarray:
    return np.zeros_like(x)
