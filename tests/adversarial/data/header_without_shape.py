# Attack: a timed-path output header whose shape never follows, then a call that never ends.
# The judge's reply pipe is read without blocking (one read per part when a frame is whole):
# a blocking read of the missing shape would hold the judge forever, past every deadline.
import os
import struct
import sys
import time

import numpy as np

_timed = len(os.sched_getaffinity(0)) == 1  # timed workers are pinned to one CPU


def rmsnorm(x: np.ndarray, weight: np.ndarray, *, eps: float) -> np.ndarray:
    mean_square = np.mean(x**2, axis=-1, keepdims=True)
    out = x / np.sqrt(mean_square + eps) * weight
    if _timed:
        fd_out = int(sys.argv[2])
        # magic, call index 0, nbytes, address, status (2 = in memory), ndim 2, flags, dtype
        head = struct.pack("<4sIQQBBBx16s", b"OAO1", 0, 4, 4096, 2, 2, 0, b"<f4")
        os.write(fd_out, head)  # and not the 16 bytes of its shape
        time.sleep(600)
    return out
