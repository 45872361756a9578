import numpy as np


def softmax(x: np.ndarray) -> np.ndarray:
    return np.zeros_like(x)
