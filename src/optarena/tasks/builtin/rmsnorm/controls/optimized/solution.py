import numpy as np


def rmsnorm(x: np.ndarray, weight: np.ndarray, *, eps: float) -> np.ndarray:
    """One read pass for the sum of squares (einsum), then two passes into a fresh buffer."""
    d = x.shape[-1]
    flat = x.reshape(-1, d)
    sum_sq = np.einsum("ij,ij->i", flat, flat)
    inv = (1.0 / np.sqrt(sum_sq * np.float32(1.0 / d) + np.float32(eps))).astype(np.float32)
    out = np.multiply(flat, inv[:, None])
    out *= weight
    return out.reshape(x.shape)
