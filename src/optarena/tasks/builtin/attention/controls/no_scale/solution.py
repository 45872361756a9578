import numpy as np


def attention(q: np.ndarray, k: np.ndarray, v: np.ndarray, *, causal: bool) -> np.ndarray:
    """Forgets the 1/sqrt(dim) scale."""
    q_len, kv_len = q.shape[-2], k.shape[-2]
    scores = q @ np.swapaxes(k, -1, -2)
    if causal:
        visible = np.arange(kv_len)[None, :] <= np.arange(q_len)[:, None] + (kv_len - q_len)
        scores = np.where(visible, scores, -np.inf)
    weights = np.exp(scores - np.max(scores, axis=-1, keepdims=True))
    return weights / np.sum(weights, axis=-1, keepdims=True) @ v
