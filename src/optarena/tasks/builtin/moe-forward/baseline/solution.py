import numpy as np


def silu(a: np.ndarray) -> np.ndarray:
    return a / (1.0 + np.exp(-a))


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
    """A mixture-of-experts feed-forward layer: route each token to its top_k experts, weigh them
    with the renormalised router probabilities, and add the shared expert that every token goes
    through. Written densely: every expert runs on every token, and a (tokens, experts) combine
    matrix, zero outside each token's top_k, keeps only the chosen outputs."""
    logits = x @ router_w
    probs = np.exp(logits - np.max(logits, axis=-1, keepdims=True))
    probs = probs / np.sum(probs, axis=-1, keepdims=True)
    # A stable sort of -probs keeps equal probabilities in index order: ties go to the lower index.
    chosen = np.argsort(-probs, axis=-1, kind="stable")[:, :top_k]
    weights = np.take_along_axis(probs, chosen, axis=-1)
    weights = weights / np.sum(weights, axis=-1, keepdims=True)
    combine = np.zeros_like(probs)
    np.put_along_axis(combine, chosen, weights, axis=-1)

    out = (silu(x @ shared_gate) * (x @ shared_up)) @ shared_down
    for e in range(router_w.shape[1]):
        expert_out = (silu(x @ w_gate[e]) * (x @ w_up[e])) @ w_down[e]
        out += combine[:, e : e + 1] * expert_out
    return out
