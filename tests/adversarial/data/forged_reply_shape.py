# Attack (correctness phase, JSON path): during the first correctness call the candidate writes
# a forged reply frame (right request id, read from the worker loop's frame via f_back, which
# the guard does not watch) whose output description has shape [0, 2**62] and nbytes 0.
# OutputArena.read accepts it (count 0 == nbytes 0) and then `.reshape(shape)` raises
# ValueError outside the wire error handling: judge_error.
import json
import os
import struct
import sys

import numpy as np

_timed = len(os.sched_getaffinity(0)) == 1
_fired = False


def rmsnorm(x: np.ndarray, weight: np.ndarray, *, eps: float) -> np.ndarray:
    global _fired
    mean_square = np.mean(x**2, axis=-1, keepdims=True)
    out = x / np.sqrt(mean_square + eps) * weight
    if not _timed and not _fired:
        f = sys._getframe().f_back  # Worker.op_call
        msg = f.f_locals.get("msg") if f is not None else None
        if isinstance(msg, dict) and "id" not in msg:
            msg = None
        # the loop adds "id" to the reply, not the request: the request dict carries it
        rid = msg.get("id") if isinstance(msg, dict) else None
        if rid is not None:
            _fired = True
            reply = {
                "ok": True,
                "output": {"shape": [0, 2**62], "dtype": "<f4", "nbytes": 0},
                "aliases": False,
                "lazy": None,
                "violations": [],
                "id": rid,
            }
            body = json.dumps(reply).encode()
            os.write(int(sys.argv[2]), struct.pack("!4sII", b"OAW1", len(body), 0) + body)
    return out
