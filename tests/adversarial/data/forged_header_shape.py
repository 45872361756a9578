# Attack: a forged timed-path output header whose shape has a zero and a huge dimension.
# nbytes = 0 = prod(shape) * itemsize passes `output_dtype`, then the judge's
# `data.view(dtype).reshape(shape)` raises ValueError ("array is too big"), which is not a
# WireError: it escapes `_worker_errors` and the judgement ends in judge_error.
import os
import struct
import sys

import numpy as np

_timed = len(os.sched_getaffinity(0)) == 1  # timed workers are pinned to one CPU
_fired = False


def rmsnorm(x: np.ndarray, weight: np.ndarray, *, eps: float) -> np.ndarray:
    global _fired
    mean_square = np.mean(x**2, axis=-1, keepdims=True)
    out = x / np.sqrt(mean_square + eps) * weight
    if _timed and not _fired:
        _fired = True
        fd_out = int(sys.argv[2])
        # magic, call index (0: first call of the warm-up run), nbytes, address, status
        # (2 = in memory), ndim, flags, dtype
        head = struct.pack("<4sIQQBBBx16s", b"OAO1", 0, 0, 0, 2, 2, 0, b"<f4")
        os.write(fd_out, head + struct.pack("<2q", 0, 2**62))
    return out
