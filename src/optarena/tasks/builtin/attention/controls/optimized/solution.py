import math

import numpy as np


def attention(q: np.ndarray, k: np.ndarray, v: np.ndarray, *, causal: bool) -> np.ndarray:
    """Scale q (q_len x dim) instead of the scores (q_len x kv_len), work on one scores buffer in
    place, mask only where some key is hidden, and normalise the (smaller) output instead of the
    weights."""
    q_len, kv_len, dim = q.shape[-2], k.shape[-2], q.shape[-1]
    scores = np.matmul(q * np.float32(1.0 / math.sqrt(dim)), np.swapaxes(k, -1, -2))
    shift = kv_len - q_len
    if causal and shift < kv_len - 1:
        hidden = np.arange(kv_len)[None, :] > np.arange(q_len)[:, None] + shift
        scores[..., hidden] = -np.inf
    scores -= np.max(scores, axis=-1, keepdims=True)
    np.exp(scores, out=scores)
    total = np.sum(scores, axis=-1, keepdims=True)
    out = np.matmul(scores, v)
    out /= total
    return out
