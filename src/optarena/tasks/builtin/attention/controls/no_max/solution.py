import math

import numpy as np


def attention(q: np.ndarray, k: np.ndarray, v: np.ndarray, *, causal: bool) -> np.ndarray:
    """Exponentiates the raw scores: overflows (inf / inf) once a score passes about 88."""
    q_len, kv_len, dim = q.shape[-2], k.shape[-2], q.shape[-1]
    scores = q @ np.swapaxes(k, -1, -2) / math.sqrt(dim)
    if causal:
        visible = np.arange(kv_len)[None, :] <= np.arange(q_len)[:, None] + (kv_len - q_len)
        scores = np.where(visible, scores, -np.inf)
    weights = np.exp(scores)
    return weights / np.sum(weights, axis=-1, keepdims=True) @ v
