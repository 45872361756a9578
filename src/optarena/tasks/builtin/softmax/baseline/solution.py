import numpy as np


def softmax(x: np.ndarray) -> np.ndarray:
    """Softmax over the last axis; subtracting the row maximum keeps exp from overflowing."""
    shifted = x - np.max(x, axis=-1, keepdims=True)
    e = np.exp(shifted)
    return e / np.sum(e, axis=-1, keepdims=True)
