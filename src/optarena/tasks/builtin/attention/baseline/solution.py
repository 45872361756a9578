import math

import numpy as np


def attention(q: np.ndarray, k: np.ndarray, v: np.ndarray, *, causal: bool) -> np.ndarray:
    """Scaled dot-product attention. With `causal`, query i sees keys j <= i + (kv_len - q_len):
    the queries are the last q_len positions of the sequence the keys cover."""
    q_len, kv_len, dim = q.shape[-2], k.shape[-2], q.shape[-1]
    scores = q @ np.swapaxes(k, -1, -2) / math.sqrt(dim)
    if causal:
        rows = np.arange(q_len)[:, None] + (kv_len - q_len)
        visible = np.arange(kv_len)[None, :] <= rows
        scores = np.where(visible, scores, -np.inf)
    scores = scores - np.max(scores, axis=-1, keepdims=True)
    weights = np.exp(scores)
    weights = weights / np.sum(weights, axis=-1, keepdims=True)
    return weights @ v
