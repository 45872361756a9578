import numpy as np


def _swiglu(xs: np.ndarray, gate: np.ndarray, up: np.ndarray, down: np.ndarray) -> np.ndarray:
    """(silu(xs @ gate) * (xs @ up)) @ down with the activation computed in place."""
    g = xs @ gate
    u = xs @ up
    s = np.negative(g)
    np.exp(s, out=s)
    s += 1.0
    g /= s
    g *= u
    return g @ down


def moe_forward(
    x: np.ndarray,
    router_w: np.ndarray,
    w_gate: np.ndarray,
    w_up: np.ndarray,
    w_down: np.ndarray,
    shared_gate: np.ndarray,
    shared_up: np.ndarray,
    shared_down: np.ndarray,
    *,
    top_k: int,
) -> np.ndarray:
    """Tokens sorted by expert once (one gather, contiguous slices), the activation in place, the
    weighted expert outputs written to one buffer and summed over the top_k slots at the end."""
    tokens, d = x.shape
    experts = router_w.shape[1]
    logits = x @ router_w
    probs = np.exp(logits - np.max(logits, axis=-1, keepdims=True))
    probs /= np.sum(probs, axis=-1, keepdims=True)
    chosen = np.argsort(-probs, axis=-1, kind="stable")[:, :top_k]
    weights = np.take_along_axis(probs, chosen, axis=-1)
    weights /= np.sum(weights, axis=-1, keepdims=True)

    flat = chosen.ravel()
    order = np.argsort(flat, kind="stable")
    bounds = np.concatenate(([0], np.cumsum(np.bincount(flat, minlength=experts))))
    xs = x[order // top_k]
    ws = weights.ravel()[order]
    ys = np.empty((tokens * top_k, d), dtype=x.dtype)
    for e in range(experts):
        lo, hi = bounds[e], bounds[e + 1]
        if lo == hi:
            continue
        y = _swiglu(xs[lo:hi], w_gate[e], w_up[e], w_down[e])
        y *= ws[lo:hi, None]
        ys[order[lo:hi]] = y
    out = _swiglu(x, shared_gate, shared_up, shared_down)
    out += ys.reshape(tokens, top_k, d).sum(axis=1)
    return out
