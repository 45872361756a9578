import math

import numpy as np


def attention(q: np.ndarray, k: np.ndarray, v: np.ndarray, *, causal: bool) -> np.ndarray:
    """Normalises over the queries (axis -2) instead of the keys."""
    q_len, kv_len, dim = q.shape[-2], k.shape[-2], q.shape[-1]
    scores = q @ np.swapaxes(k, -1, -2) / math.sqrt(dim)
    if causal:
        visible = np.arange(kv_len)[None, :] <= np.arange(q_len)[:, None] + (kv_len - q_len)
        scores = np.where(visible, scores, -np.inf)
    weights = np.exp(scores - np.max(scores, axis=-2, keepdims=True))
    return weights / np.sum(weights, axis=-2, keepdims=True) @ v
