# Attack (found by a red-team session): hold the judge by never draining its request pipe.
# The worker owns the pipe's read end: it shrinks the pipe to one page (F_SETPIPE_SZ) and always
# leaves one byte of the judge's stream unread (a JSON request's last byte is always '}', a go
# frame's is the top byte of eps, known from the byte before it). The page is then never freed:
# the judge's writes fill it, and its next write blocked for ever, past every deadline, while
# the worker waited for a message the judge could not send. WHEN: "load" takes the worker loop
# over at import (the correctness phase's requests), "timed" from inside the first timed call
# (the hot path's go frames). The outputs are right throughout.
import array
import fcntl
import json
import os
import struct
import sys
import termios
import time

import numpy as np

WHEN = "load"
F_SETPIPE_SZ = 1031


def rmsnorm(x, weight, *, eps):
    if WHEN == "timed":
        caller = sys._getframe(0).f_back
        if caller is not None and caller.f_code.co_name == "run" and "tmpl" in caller.f_locals:
            loc = caller.f_locals
            _serve(loc["self"], caller.f_globals, loc["index"], x, weight, eps)
    return _base(x, weight, eps)


def _base(x, weight, eps):
    return x / np.sqrt(np.mean(x * x, axis=-1, keepdims=True) + eps) * weight


def _read_exact(fd, n):
    buf = b""
    while len(buf) < n:
        chunk = os.read(fd, n - len(buf))
        if not chunk:
            os._exit(0)
        buf += chunk
    return buf


def _await_more(fd):
    """Until the judge's next message has arrived behind the byte kept unread."""
    n = array.array("i", [0])
    while True:
        fcntl.ioctl(fd, termios.FIONREAD, n, True)
        if n[0] > 1:
            return
        time.sleep(0.0002)


def _serve(worker, g, first, x, weight, eps):
    """The worker loop from here on: requests and go frames, each read but for its last byte."""
    run, wire = g["run"], g["wire"]
    fd_in, fd_out = int(sys.argv[1]), int(sys.argv[2])
    try:
        fcntl.fcntl(fd_in, F_SETPIPE_SZ, 4096)
    except OSError:
        return  # the lever is closed: stay honest
    held = []
    lag = False

    def answer(index, out):
        held[:] = [out]
        address = out.__array_interface__["data"][0]
        head = run.OUT.pack(
            run.OUT_MAGIC,
            index,
            out.nbytes,
            address,
            run.STATUS_IN_MEMORY,
            out.ndim,
            0,
            out.dtype.str.encode(),
        )
        os.write(fd_out, head + run.SHAPES[out.ndim].pack(*out.shape))

    if first is None:
        worker.fn = rmsnorm
        wire.send(fd_out, {"ok": True, "violations": [], "id": g["_load_id"]})
    else:
        answer(first, _base(x, weight, eps))
    while True:
        if lag:
            _await_more(fd_in)
            _read_exact(fd_in, 1)  # the previous message's last byte
        lag = True
        magic = _read_exact(fd_in, 4)
        if magic == run.GO_MAGIC:
            head = magic + _read_exact(fd_in, run.GO.size - 4)
            _, index, _, t, m = run.GO.unpack(head)
            raw = bytearray(_read_exact(fd_in, 8 * m - 1))
            raw.append(0x3F if (raw[-1] >> 4) <= 0xD else 0x3E)  # eps in [1e-5, 0.5]
            tmpl = worker.templates[t]
            tmpl.place(head + bytes(raw))
            answer(index, _base(*tmpl.args, **tmpl.kwargs))
            continue
        hlen, _count = struct.unpack("!II", _read_exact(fd_in, 8))
        req = json.loads(_read_exact(fd_in, hlen - 1) + b"}")
        if req.get("op") == "exit":
            os._exit(0)
        handler = getattr(worker, f"op_{req.get('op')}", None)
        reply = handler(req) if handler else {"ok": False, "code": "protocol"}
        reply["violations"] = []
        reply["id"] = req.get("id")
        wire.send(fd_out, reply)


def _at_load():
    f = sys._getframe(0)
    while f is not None and type(f.f_locals.get("self")).__name__ != "Worker":
        f = f.f_back
    if f is not None:
        g = dict(f.f_globals, _load_id=f.f_locals["msg"].get("id"))
        _serve(f.f_locals["self"], g, None, None, None, None)


if WHEN == "load":
    _at_load()
