"""Independent reference: float64 throughout. A (tokens, experts) combine matrix, zero outside
each token's top_k, holds the renormalised weights; the top_k is chosen by a lexicographic sort
on (-probability, expert index), which states the tie rule directly; silu is written with tanh.
Each expert runs on the rows its column weighs (running it on every token would give the same
numbers at experts/top_k times the cost, on every checked call). Not the baseline, and never
seen by a candidate."""

from typing import Any

import numpy as np


def _swiglu(x: np.ndarray, gate: np.ndarray, up: np.ndarray, down: np.ndarray) -> np.ndarray:
    g = x @ gate
    return (g * 0.5 * (1.0 + np.tanh(0.5 * g)) * (x @ up)) @ down  # silu(g) = g * sigmoid(g)


def reference(
    x: Any,
    router_w: Any,
    w_gate: Any,
    w_up: Any,
    w_down: Any,
    shared_gate: Any,
    shared_up: Any,
    shared_down: Any,
    *,
    top_k: int,
) -> np.ndarray:
    x64, r64, g64, u64, d64, sg, su, sd = (
        np.asarray(a, dtype=np.float64)
        for a in (x, router_w, w_gate, w_up, w_down, shared_gate, shared_up, shared_down)
    )
    tokens, experts = x64.shape[0], r64.shape[1]
    logits = x64 @ r64
    lse = np.log(np.sum(np.exp(logits - logits.max(axis=1, keepdims=True)), axis=1))
    probs = np.exp(logits - logits.max(axis=1, keepdims=True) - lse[:, None])
    combine = np.zeros((tokens, experts))
    index = np.arange(experts)
    for t in range(tokens):
        best = np.lexsort((index, -probs[t]))[:top_k]  # last key first: -p, then the index
        combine[t, best] = probs[t, best] / probs[t, best].sum()
    out = _swiglu(x64, sg, su, sd)
    for e in range(experts):
        rows = np.flatnonzero(combine[:, e])
        out[rows] += combine[rows, e, None] * _swiglu(x64[rows], g64[e], u64[e], d64[e])
    return out
