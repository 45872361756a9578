import numpy as np


def silu(a: np.ndarray) -> np.ndarray:
    return np.maximum(a, 0.0)


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
    """Uses relu where the experts use silu."""
    logits = x @ router_w
    probs = np.exp(logits - np.max(logits, axis=-1, keepdims=True))
    probs = probs / np.sum(probs, axis=-1, keepdims=True)
    # A stable sort of -probs keeps equal probabilities in index order: ties go to the lower index.
    chosen = np.argsort(-probs, axis=-1, kind="stable")[:, :top_k]
    weights = np.take_along_axis(probs, chosen, axis=-1)
    weights = weights / np.sum(weights, axis=-1, keepdims=True)

    out = (silu(x @ shared_gate) * (x @ shared_up)) @ shared_down
    for e in range(router_w.shape[1]):
        tokens, slots = np.nonzero(chosen == e)
        if tokens.size == 0:
            continue
        xe = x[tokens]
        ye = (silu(xe @ w_gate[e]) * (xe @ w_up[e])) @ w_down[e]
        out[tokens] += weights[tokens, slots][:, None] * ye
    return out
