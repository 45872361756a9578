# Attack: a complete timed-path output header, for the call it answers, whose dtype and size
# disagree (float64 claimed for the bytes of a float32 output at the output's own address).
# The judge's hot path reads it (what it needs to read safely holds); its later checks must
# still name it, never judge the bytes as float64.
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
        address = out.__array_interface__["data"][0]
        # magic, call index (0: the first call of the warm-up run), nbytes, address, status
        # (2 = in memory), ndim, flags, dtype
        head = struct.pack("<4sIQQBBBx16s", b"OAO1", 0, out.nbytes, address, 2, 2, 0, b"<f8")
        os.write(fd_out, head + struct.pack("<2q", *out.shape))
    return out
