# Attack: a forged reply (right request id, read from the worker loop's frame via f_back) whose
# "violations" is a JSON number. `guard_findings` iterates `reply.get("violations") or []`:
# iterating an int raises TypeError in the judge, outside the wire error handling: judge_error.
import json
import os
import struct
import sys

import numpy as np

_fired = False


def rmsnorm(x: np.ndarray, weight: np.ndarray, *, eps: float) -> np.ndarray:
    global _fired
    mean_square = np.mean(x**2, axis=-1, keepdims=True)
    out = x / np.sqrt(mean_square + eps) * weight
    if not _fired:
        f = sys._getframe().f_back  # Worker.op_call (correctness phase)
        msg = f.f_locals.get("msg") if f is not None else None
        if isinstance(msg, dict) and "id" in msg:
            _fired = True
            reply = {
                "ok": True,
                "output": {"shape": list(out.shape), "dtype": "<f4", "nbytes": int(out.nbytes)},
                "aliases": False,
                "lazy": None,
                "violations": 5,
                "id": msg["id"],
            }
            body = json.dumps(reply).encode()
            os.write(int(sys.argv[2]), struct.pack("!4sII", b"OAW1", len(body), 0) + body)
    return out
