"""Independent reference: float64, explicit key positions, weights as exp(score - logsumexp).
Not the baseline, and never seen by a candidate."""

from typing import Any

import numpy as np


def reference(q: Any, k: Any, v: Any, *, causal: bool) -> np.ndarray:
    q64, k64, v64 = (np.asarray(a, dtype=np.float64) for a in (q, k, v))
    q_len, kv_len, dim = q64.shape[-2], k64.shape[-2], q64.shape[-1]
    scores = np.matmul(q64, np.swapaxes(k64, -1, -2)) / np.sqrt(float(dim))
    if causal:
        # The queries are positions kv_len - q_len .. kv_len - 1 of the keys' sequence.
        query_pos = np.arange(kv_len - q_len, kv_len)
        key_pos = np.arange(kv_len)
        scores = scores + np.where(key_pos[None, :] > query_pos[:, None], -np.inf, 0.0)
    top = np.max(scores, axis=-1, keepdims=True)
    lse = top + np.log(np.sum(np.exp(scores - top), axis=-1, keepdims=True))
    return np.matmul(np.exp(scores - lse), v64)
