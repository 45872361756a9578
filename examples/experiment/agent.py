"""A scripted stand-in for a coding agent (no model): it writes one of three rmsnorm
solutions into the workspace, chosen by a seeded draw.

    python3 agent.py WORKSPACE --p-fast P --p-wrong Q

With probability P the optimized solution, with Q a wrong one (no eps), else it leaves the
baseline. The draw is seeded from $OPTARENA_EXPERIMENT_KEY (task/condition/repetition), so a
re-run of the experiment makes the same choices. If the workspace holds a CLAUDE.md (the
`hint` condition's artifact), it says so in its log.
"""

from __future__ import annotations

import argparse
import hashlib
import os
import random
from pathlib import Path

FAST = """import numpy as np


def rmsnorm(x, weight, *, eps):
    ms = np.einsum("...i,...i->...", x, x) / x.shape[-1]
    inv = 1.0 / np.sqrt(ms + eps)
    out = np.multiply(x, inv[..., None].astype(x.dtype))
    out *= weight
    return out
"""

WRONG = """import numpy as np


def rmsnorm(x, weight, *, eps):
    return x / np.sqrt(np.mean(x * x, axis=-1, keepdims=True)) * weight  # eps forgotten
"""


def main() -> int:
    p = argparse.ArgumentParser()
    p.add_argument("workspace", type=Path)
    p.add_argument("--p-fast", type=float, required=True)
    p.add_argument("--p-wrong", type=float, required=True)
    a = p.parse_args()
    key = os.environ.get("OPTARENA_EXPERIMENT_KEY", "")
    rng = random.Random(int.from_bytes(hashlib.sha256(key.encode()).digest()[:8], "big"))
    hint = (a.workspace / "CLAUDE.md").is_file()
    draw = rng.random()
    if draw < a.p_wrong:
        choice, source = "wrong", WRONG
    elif draw < a.p_wrong + a.p_fast:
        choice, source = "fast", FAST
    else:
        choice, source = "baseline", None
    if source is not None:
        (a.workspace / "solution.py").write_text(source)
    print(f"key={key!r} hint={hint} draw={draw:.3f} delivered={choice}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
