"""Building blocks for task generators: inputs drawn from the judgement's secret seed.

A candidate must not be able to predict its inputs, or it can be right only where the judge
looks: on the declared shapes, for the declared eps, for the weight pattern the generator
always used, for C-contiguous arrays. Generators therefore draw what the task's contract leaves
open (shapes within ranges, parameter values, value distributions, memory layouts) from the
seed they are given, using these helpers, and the task's `params` declare the ranges:

- a fixed `shape = [16, 4096]`, or `dims = [[1, 8], [1, 64], [1, 2048]]` with
  `rank = [1, 3]`: each of the last `rank` dims uniform in its range;
- a fixed number, or a `[lo, hi]` pair drawn log-uniformly (`log_uniform_param`);
- `layouts = true`: the array is handed over as a view with another memory layout (`relayout`).

Generators run in the judge only; what they return is written into the worker's read-only
input area with its layout intact.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

LAYOUTS = (
    "contiguous",
    "fortran",
    "padded_rows",
    "every_other",
    "reversed",
    "offset",
    "transposed",
)


def draw_shape(rng: np.random.Generator, params: dict[str, Any]) -> tuple[int, ...]:
    """`shape` as declared, or one drawn from `dims` (per-dimension [lo, hi]) and `rank`."""
    if "shape" in params:
        return tuple(int(s) for s in params["shape"])
    dims = [(int(lo), int(hi)) for lo, hi in params["dims"]]
    lo_rank, hi_rank = (int(r) for r in params.get("rank", [len(dims), len(dims)]))
    rank = int(rng.integers(lo_rank, hi_rank + 1))
    return tuple(int(rng.integers(lo, hi + 1)) for lo, hi in dims[len(dims) - rank :])


def log_uniform_param(rng: np.random.Generator, value: Any) -> float:
    """A fixed number, or a `[lo, hi]` range drawn log-uniformly (both positive)."""
    if isinstance(value, list | tuple):
        lo, hi = float(value[0]), float(value[1])
        return float(math.exp(rng.uniform(math.log(lo), math.log(hi))))
    return float(value)


def values(rng: np.random.Generator, shape: tuple[int, ...], scale: float) -> np.ndarray:
    """Values of a randomly chosen distribution, float64: normal, uniform, heavy-tailed, or
    normal around an offset; `scale` sets their magnitude."""
    kind = int(rng.integers(4))
    if kind == 0:
        return rng.standard_normal(shape) * scale
    if kind == 1:
        return rng.uniform(-scale, scale, shape)
    if kind == 2:
        return np.clip(rng.standard_t(3, shape), -50, 50) * scale
    return (rng.standard_normal(shape) + rng.uniform(-3, 3)) * scale


def weights(rng: np.random.Generator, n: int) -> np.ndarray:
    """Per-channel weights of a randomly chosen pattern (no fixed pattern to recognise)."""
    kind = int(rng.integers(5))
    if kind == 0:
        return 1.0 + 0.5 * rng.standard_normal(n)
    if kind == 1:
        return rng.uniform(-2.0, 2.0, n)
    if kind == 2:
        return np.full(n, rng.uniform(0.1, 3.0))
    if kind == 3:
        w = rng.standard_normal(n)
        w[rng.random(n) < 0.3] = 0.0
        return w
    return np.exp(rng.standard_normal(n))


def relayout(rng: np.random.Generator, x: np.ndarray) -> np.ndarray:
    """The same values in a randomly chosen layout that is not C-contiguous: a view into a larger
    buffer with padded rows or every other element, reversed or transposed strides, or
    Fortran order. The span it covers is at most about twice its bytes (plus padding)."""
    if x.ndim == 0 or x.size < 2:
        return x
    # Only layouts that are not C-contiguous for this array: contiguous inputs are what every
    # other workload gives, and a candidate that needs them must fail here every time.
    if x.ndim == 1 or x.shape[-1] == 1:
        strided = ["every_other", "reversed"] if x.shape[-1] > 1 else ["padded_rows", "every_other"]
    else:
        strided = ["padded_rows", "every_other", "reversed", "transposed"]
        if x.shape[-2] > 1:
            strided.append("fortran")
    layout = strided[int(rng.integers(len(strided)))]
    if layout == "fortran":
        return np.asfortranarray(x)
    n = x.shape[-1]
    if layout == "padded_rows":
        buf = np.empty((*x.shape[:-1], n + int(rng.integers(1, 17))), dtype=x.dtype)
        view = buf[..., :n]
    elif layout == "every_other":
        buf = np.empty((*x.shape[:-1], 2 * n), dtype=x.dtype)
        view = buf[..., ::2]
    elif layout == "reversed":
        buf = np.empty(x.shape, dtype=x.dtype)
        view = buf[..., ::-1]
    elif layout == "offset":
        buf = np.empty(x.size + 1, dtype=x.dtype)
        view = buf[1:].reshape(x.shape)
    else:  # transposed: the last axis has the largest stride
        buf = np.empty(x.shape[::-1], dtype=x.dtype)
        view = buf.T
    view[...] = x
    return view
