"""Input generator for moe-forward: (workload, seed) -> (args, kwargs). Runs in the judge only.

Sizes `tokens`, `d`, `experts`, `f`, `fs` and `top_k` are fixed integers or inclusive `[lo, hi]`
ranges drawn uniformly (top_k is kept below the number of experts). `routing` shapes the router:

- `uniform`: random router columns;
- `zipf`: expert e's logit gets a bias -a*log(rank(e)) (a random permutation of ranks), so a few
  experts take most tokens;
- `one-expert`: one random expert's bias exceeds every spread: all tokens pick it first;
- `ties`: every router column equal, so every token's probabilities are exactly tied and the
  tie rule alone (lower index first) decides;
- `pair-ties`: columns 2j and 2j+1 equal, so with an odd top_k the last pick is a tie.

Selection must be exact for a correct float32 candidate to be judged fairly: two experts whose
logits differed only by rounding could be picked either way. So x lies on a grid of 1/4 in
[-2, 2] and router_w on a grid of 1/256 (of magnitude about 1/sqrt(d)): every logit is then
computed exactly in float32 whatever the summation order, distinct logits differ by at least
2**-10, and ties are exact. The biases enter through x[:, 0] = 2 and router row 0. The expert
weights are Gaussian (scale 1/sqrt(fan-in)), free of any grid.
"""

from typing import Any

import numpy as np

GRID_X, GRID_R = 4, 256


def _int(rng: np.random.Generator, value: Any) -> int:
    if isinstance(value, list | tuple):
        return int(rng.integers(int(value[0]), int(value[1]) + 1))
    return int(value)


def _router(rng: np.random.Generator, d: int, experts: int, routing: str) -> np.ndarray:
    half = max(1, round(np.sqrt(3.0) / (1.2 * np.sqrt(d)) * GRID_R))  # logit spread about 1
    r = rng.integers(-half, half + 1, (d, experts)) / GRID_R
    if routing == "ties":
        r[:] = r[:, :1]
    elif routing == "pair-ties":
        r[:, 1::2] = r[:, 0 : experts - experts % 2 : 2]
    elif routing == "zipf":
        rank = rng.permutation(experts) + 1
        r[0] = np.round(-rng.uniform(1.0, 2.0) * np.log(rank) / 2.0 * GRID_R) / GRID_R
    elif routing == "one-expert":
        r[0] = 0.0
        r[0, rng.integers(experts)] = 8.0
    elif routing != "uniform":
        raise ValueError(f"unknown routing '{routing}'")
    return r


def generate(workload: Any, seed: int) -> tuple[list[Any], dict[str, Any]]:
    p = workload.params
    rng = np.random.default_rng(seed)
    dtype = np.dtype(p.get("dtype", "float32"))
    tokens, d, f, fs = (_int(rng, p[k]) for k in ("tokens", "d", "f", "fs"))
    experts = _int(rng, p["experts"])
    top_k = min(_int(rng, p["top_k"]), experts - 1)
    routing = str(p.get("routing", "uniform"))
    x = rng.integers(-2 * GRID_X, 2 * GRID_X + 1, (tokens, d)) / GRID_X
    if routing in ("zipf", "one-expert"):
        x[:, 0] = 2.0
    router_w = _router(rng, d, experts, routing)

    def gaussian(*shape: int) -> np.ndarray:
        w = rng.standard_normal(shape, dtype=np.float32)
        w *= np.float32(1.0 / np.sqrt(shape[-2]))
        return w

    arrays = [
        x,
        router_w,
        gaussian(experts, d, f),
        gaussian(experts, d, f),
        gaussian(experts, f, d),
        gaussian(d, fs),
        gaussian(d, fs),
        gaussian(fs, d),
    ]
    return [a.astype(dtype, copy=False) for a in arrays], {"top_k": top_k}
