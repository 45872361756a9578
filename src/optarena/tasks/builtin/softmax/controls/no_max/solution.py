import numpy as np


def softmax(x: np.ndarray) -> np.ndarray:
    e = np.exp(x)
    return e / np.sum(e, axis=-1, keepdims=True)
