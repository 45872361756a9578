# Attack: a forged timed-path output header, written once, from the first timed call, for call
# index 0 (the first call of the warm-up run). FORGE picks which:
# - "shape": a shape with a zero and a huge dimension. nbytes = 0 = prod(shape) * itemsize
#   passed `output_dtype`, then the judge's `data.view(dtype).reshape(shape)` raised ValueError
#   ("array is too big"), not a WireError: it escaped `_worker_errors`, and the judgement ended
#   in judge_error.
# - "dtype": a complete header whose dtype and size disagree (float64 claimed for the bytes of
#   the float32 output at the output's own address). The judge's hot path reads it (what it
#   needs to read safely holds); its later checks must still name it, never judge the bytes as
#   float64.
# - "no-shape": a header whose shape never follows, then a call that never ends. The judge's
#   reply pipe is read without blocking (one read per part when a frame is whole): a blocking
#   read of the missing shape held the judge for ever, past every deadline.
import os
import struct
import sys
import time

import numpy as np

FORGE = "shape"
_timed = len(os.sched_getaffinity(0)) == 1  # timed workers are pinned to one CPU
_fired = False


def rmsnorm(x: np.ndarray, weight: np.ndarray, *, eps: float) -> np.ndarray:
    global _fired
    mean_square = np.mean(x**2, axis=-1, keepdims=True)
    out = x / np.sqrt(mean_square + eps) * weight
    if _timed and not _fired:
        _fired = True
        # nbytes, address, dtype, shape (None: not sent)
        nbytes, address, dtype, shape = {
            "shape": (0, 0, b"<f4", (0, 2**62)),
            "dtype": (out.nbytes, out.__array_interface__["data"][0], b"<f8", out.shape),
            "no-shape": (4, 4096, b"<f4", None),
        }[FORGE]
        # magic, call index, nbytes, address, status (2 = in memory), ndim, flags, dtype
        head = struct.pack("<4sIQQBBBx16s", b"OAO1", 0, nbytes, address, 2, 2, 0, dtype)
        os.write(int(sys.argv[2]), head + (b"" if shape is None else struct.pack("<2q", *shape)))
        if shape is None:
            time.sleep(600)
    return out
