import numpy as np


def layernorm(x: np.ndarray, weight: np.ndarray, bias: np.ndarray, *, eps: float) -> np.ndarray:
    """One fresh buffer: centre into it, sum of squares by einsum, then scale and shift in place."""
    d = x.shape[-1]
    flat = x.reshape(-1, d)
    inv_d = np.float32(1.0 / d)
    mean = np.sum(flat, axis=1) * inv_d
    out = np.subtract(flat, mean[:, None])
    var = np.einsum("ij,ij->i", out, out) * inv_d
    out *= (1.0 / np.sqrt(var + np.float32(eps))).astype(np.float32)[:, None]
    out *= weight
    out += bias
    return out.reshape(x.shape)
