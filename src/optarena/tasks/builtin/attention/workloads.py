"""Input generator for attention: (workload, seed) -> (args, kwargs). Runs in the judge only.

Each of `batch`, `heads`, `q_len`, `kv_len` and `dim` is a fixed integer or an inclusive
`[lo, hi]` range drawn uniformly; `q_len = "kv_len"` makes a prefill (as many queries as keys).
With `causal` (true, false or "random"), q_len is kept <= kv_len, as the contract requires. The
magnitude of q and k (`scale`, log-uniform), the value distributions (see
`optarena.tasks.inputs`) and, where `layouts = true`, the memory layouts of q, k and v are drawn
from the seed too; `kind = "zeros"` makes q all zeros (every visible key weighs the same).

`kind = "shifted"` makes every score large (`shift` > 0: near +128, exp overflows float32) or
very negative (`shift` < 0: near -128, exp underflows to 0) with a spread of a few units. The
scores are exact in float32 there, whatever the summation order: q and k lie on a grid of 1/8
in [-4, 4] (and their first component is +-`shift`), so every product and partial sum is a
multiple of 1/64 well inside float32's 24 bits, and dim is 64 (its 1/sqrt is a power of two).
Only then is such a case fair: at random scores that large, float32 rounding of the scores
alone would move near-tied weights past any useful tolerance.

For the other kinds the same holds at random: q is scaled down where its and k's largest row
norms (Cauchy-Schwarz) would let a score exceed `SCORE_BOUND`, and v is clipped to
+-`V_BOUND`. A draw with scores near 210 and values of 50 (heavy-tailed, `scale` 2) put the
baseline's own float32 output 6 times past the tolerance: about 1 prefill input in 1,500, so
about one judged comparison in ten rejected an honest candidate (2026-12-06).
"""

from typing import Any

import numpy as np

from optarena.tasks import inputs

SCORE_BOUND = 64.0  # |q . k| / sqrt(dim) a random draw may reach, at most
V_BOUND = 8.0  # |v| at most: the output's rounding error grows with it


def _int(rng: np.random.Generator, value: Any) -> int:
    if isinstance(value, list | tuple):
        return int(rng.integers(int(value[0]), int(value[1]) + 1))
    return int(value)


def _score_room(q: np.ndarray, k: np.ndarray, dim: int) -> float:
    """The factor (at most 1) that keeps every score within SCORE_BOUND, by Cauchy-Schwarz."""
    if q.size == 0 or k.size == 0:
        return 1.0
    largest = np.sqrt((q * q).sum(-1).max() * (k * k).sum(-1).max() / dim)
    return min(1.0, SCORE_BOUND / largest) if largest > 0 else 1.0


def generate(workload: Any, seed: int) -> tuple[list[Any], dict[str, Any]]:
    p = workload.params
    rng = np.random.default_rng(seed)
    dtype = np.dtype(p.get("dtype", "float32"))
    causal = p.get("causal", True)
    if causal == "random":
        causal = bool(rng.integers(2))
    batch, heads, dim = _int(rng, p["batch"]), _int(rng, p["heads"]), _int(rng, p["dim"])
    kv_len = _int(rng, p["kv_len"])
    q_len = kv_len if p["q_len"] == "kv_len" else _int(rng, p["q_len"])
    if causal:
        q_len = min(q_len, kv_len)
    scale = inputs.log_uniform_param(rng, p.get("scale", 1.0))
    kind = p.get("kind")
    if kind == "shifted":
        if dim != 64:
            raise ValueError("kind 'shifted' needs dim = 64 (exact scores)")
        shift = float(p["shift"])
        q = rng.integers(-32, 33, (batch, heads, q_len, dim)) / 8.0
        k = rng.integers(-32, 33, (batch, heads, kv_len, dim)) / 8.0
        q[..., 0], k[..., 0] = shift, abs(shift)
    elif kind == "zeros":
        q = np.zeros((batch, heads, q_len, dim))
        k = inputs.values(rng, (batch, heads, kv_len, dim), scale)
    else:
        q = inputs.values(rng, (batch, heads, q_len, dim), scale)
        k = inputs.values(rng, (batch, heads, kv_len, dim), scale)
        q = q * _score_room(q, k, dim)
    v = np.clip(inputs.values(rng, (batch, heads, kv_len, dim), 1.0), -V_BOUND, V_BOUND)
    arrays = [a.astype(dtype) for a in (q, k, v)]
    if p.get("layouts"):
        arrays = [inputs.relayout(rng, a) for a in arrays]
    return arrays, {"causal": bool(causal)}
