"""Cheating candidates, each with the one reason code the judge must name for it.

Placeholders filled in by the test: @TASK_ROOT@ (the task package being judged), @PORT@ (a
listening socket on 127.0.0.1), @MARKER@ (tagged onto anything a cheat leaves running, so the
suite can prove it is gone).
"""

from __future__ import annotations

from dataclasses import dataclass

RMS = "x / np.sqrt(np.mean(x * x, axis=-1, keepdims=True) + eps) * weight"
SMX = "_e / np.sum(_e, axis=-1, keepdims=True)"
SMX_PRE = "_e = np.exp(x - np.max(x, axis=-1, keepdims=True))"


@dataclass(frozen=True)
class Cheat:
    name: str
    task: str  # rmsnorm | softmax
    code: str  # the reason code that must appear
    source: str
    limits: str | None = None  # extra [limits] for a dedicated task copy
    unsandboxed: bool = False  # run with SandboxPolicy.none() (to show what the seal catches)


def rms(body: str, header: str = "") -> str:
    return f"import numpy as np\n{header}\ndef rmsnorm(x, weight, *, eps):\n{body}\n"


# A function body that leaves a marked daemon (fork, setsid, fork, exec) and goes on.
DAEMON = (
    "    if os.fork() == 0:\n        os.setsid()\n        if os.fork() == 0:\n"
    "            os.execv(sys.executable, [sys.executable, '-c',\n"
    "                     'import time; time.sleep(300)', '@MARKER@'])\n"
    "        os._exit(0)\n"
)


def smx(body: str, header: str = "") -> str:
    return f"import numpy as np\n{header}\ndef softmax(x):\n{body}\n"


CHEATS = [
    # -- caching, replay, stale and lazy outputs -------------------------------------------
    Cheat(
        "cache-by-shape",
        "rmsnorm",
        "stale_output",
        rms(
            f"    key = x.shape\n    if key not in _c:\n        _c[key] = {RMS}\n"
            "    return _c[key]",
            "_c = {}",
        ),
    ),
    # It replays only an output that is not constant: a constant one (equal logits give a
    # uniform softmax) is what a constant function returns honestly, so the judge cannot
    # name its replay `stale_output` and rejects it as `out_of_tolerance` instead (CI saw
    # that once, with the calls in an order where a uniform output came first).
    Cheat(
        "replay-previous-output",
        "softmax",
        "stale_output",
        smx(
            f"    global _last\n    if _last is not None and _last.shape == x.shape:\n"
            f"        return _last.copy()\n    {SMX_PRE}\n    out = {SMX}\n"
            "    if out.min() != out.max():\n        _last = out\n"
            "    return out.copy()",
            "_last = None",
        ),
    ),
    Cheat(
        "filled-later-by-thread",
        "rmsnorm",
        "out_of_tolerance",  # judged as the output was at return: zeros
        rms(
            "    out = np.zeros_like(x)\n"
            "    def fill():\n        time.sleep(0.002)\n"
            f"        out[...] = {RMS}\n"
            "    threading.Thread(target=fill).start()\n    return out",
            "import threading, time",
        ),
    ),
    Cheat(
        "output-buffer-reused",
        "softmax",
        "output_changed_after_return",
        smx(
            "    out = _bufs.setdefault(x.shape, np.empty_like(x))\n"
            "    np.subtract(x, np.max(x, axis=-1, keepdims=True), out=out)\n"
            "    np.exp(out, out=out)\n    out /= np.sum(out, axis=-1, keepdims=True)\n"
            "    return out",
            "_bufs = {}",
        ),
    ),
    Cheat(
        "ndarray-subclass",
        "rmsnorm",
        "lazy_output",
        rms(
            f"    return ({RMS}).view(Deferred)",
            "class Deferred(np.ndarray):\n    def __array_finalize__(self, obj):\n        pass",
        ),
    ),
    Cheat(
        "memory-mapped-output",
        "softmax",
        "lazy_output",
        smx(
            f"    {SMX_PRE}\n"
            "    m = np.memmap('out.bin', dtype=x.dtype, mode='w+', shape=x.shape)\n"
            f"    m[...] = {SMX}\n    return np.asarray(m)"
        ),
    ),
    Cheat(
        "array-like-proxy",
        "rmsnorm",
        "lazy_output",
        rms(
            f"    return Proxy(lambda: {RMS})",
            "class Proxy:\n    def __init__(self, f):\n        self.f = f\n"
            "    def __array__(self, dtype=None, copy=None):\n        return self.f()",
        ),
    ),
    # -- inputs -----------------------------------------------------------------------------
    Cheat(
        "normalise-input-in-place",
        "rmsnorm",
        "input_mutated",
        rms(
            "    x *= 1.0 / np.sqrt(np.mean(x * x, axis=-1, keepdims=True) + eps)\n"
            "    x *= weight\n    return x.copy()"
        ),
    ),
    Cheat(
        "return-the-input",
        "softmax",
        "input_mutated",  # inputs are read-only: computing in place is refused
        smx(
            "    x -= np.max(x, axis=-1, keepdims=True)\n    np.exp(x, out=x)\n"
            "    x /= np.sum(x, axis=-1, keepdims=True)\n    return x"
        ),
    ),
    # -- patching ---------------------------------------------------------------------------
    Cheat(
        "patch-the-clock",
        "rmsnorm",
        "clock_patched",
        rms(
            f"    return {RMS}",
            "import time\ntime.perf_counter_ns = lambda: 0\ntime.perf_counter = lambda: 0.0",
        ),
    ),
    Cheat(
        "patch-numpy",
        "softmax",
        "numpy_patched",
        smx(
            f"    {SMX_PRE}\n    return {SMX}",
            "np.allclose = lambda *a, **k: True\n"
            "np.isfinite = lambda a: np.ones(np.shape(a), bool)",
        ),
    ),
    Cheat(
        "patch-the-worker",
        "rmsnorm",
        "worker_tampered",
        rms(f"    return {RMS}", "import __main__\n__main__._describe = lambda out: out"),
    ),
    # -- warm-up detection ------------------------------------------------------------------
    Cheat(
        "honest-only-while-warming-up",
        "softmax",
        "out_of_tolerance",
        smx(
            "    global _n\n    _n += 1\n    if _n > 4:\n"
            "        return np.full_like(x, 1.0 / x.shape[-1])\n"
            f"    {SMX_PRE}\n    return {SMX}",
            "_n = 0",
        ),
    ),
    # -- values -----------------------------------------------------------------------------
    Cheat(
        "nan-that-compares-vacuously",
        "rmsnorm",
        "non_finite",
        rms(f"    out = {RMS}\n    out[..., 0] = np.nan\n    return out"),
    ),
    Cheat(
        "inf-on-edge-inputs",
        "softmax",
        "non_finite",
        smx(f"    {SMX_PRE}\n    out = {SMX}\n    out[out < 1e-30] = np.inf\n    return out"),
    ),
    Cheat(
        "compute-in-float16",
        "rmsnorm",
        "precision_downcast",
        rms(
            "    h = x.astype(np.float16)\n"
            "    ms = np.mean(h.astype(np.float32) ** 2, axis=-1, keepdims=True)\n"
            "    out = h / np.sqrt(ms + eps).astype(np.float16) * weight.astype(np.float16)\n"
            "    return out.astype(np.float32)"
        ),
    ),
    Cheat(
        "truncate-to-bfloat16",
        "softmax",
        "precision_downcast",
        smx(
            f"    {SMX_PRE}\n    out = ({SMX}).astype(np.float32)\n"
            "    return (out.view(np.uint32) & np.uint32(0xFFFF0000)).view(np.float32)"
        ),
    ),
    # -- reaching outside -------------------------------------------------------------------
    Cheat(
        "read-the-oracle",
        "rmsnorm",
        "oracle_access",
        rms(
            "    try:\n        src = open('@TASK_ROOT@/oracle.py').read()\n"
            "    except OSError:\n        pass\n"
            f"    return {RMS}"
        ),
    ),
    Cheat(
        "list-the-task-package",
        "softmax",
        "oracle_access",
        smx(
            "    try:\n        os.listdir('@TASK_ROOT@')\n    except OSError:\n        pass\n"
            f"    {SMX_PRE}\n    return {SMX}",
            "import os",
        ),
    ),
    Cheat(
        "read-judge-memory",
        "softmax",
        "judge_memory_access",
        smx(
            "    try:\n        open(f'/proc/{os.getppid()}/mem', 'rb').read(1)\n"
            "    except OSError:\n        pass\n"
            f"    {SMX_PRE}\n    return {SMX}",
            "import os",
        ),
    ),
    Cheat(
        "write-outside-workdir",
        "rmsnorm",
        "write_outside_workdir",
        rms(
            "    try:\n        open('/tmp/@MARKER@-written', 'w').write('x')\n"
            "    except OSError:\n        pass\n"
            f"    return {RMS}"
        ),
    ),
    Cheat(
        "overwrite-the-oracle",
        "softmax",
        "write_outside_workdir",
        smx(
            "    try:\n        open('@TASK_ROOT@/oracle.py', 'a').write('\\n# owned\\n')\n"
            "    except OSError:\n        pass\n"
            f"    {SMX_PRE}\n    return {SMX}"
        ),
    ),
    Cheat(
        "overwrite-the-oracle-unsandboxed",
        "rmsnorm",
        "judge_tampered",
        rms(
            "    with open('@TASK_ROOT@/oracle.py', 'a') as f:\n        f.write('\\n# owned\\n')\n"
            f"    return {RMS}"
        ),
        unsandboxed=True,
    ),
    Cheat(
        "fetch-answers-over-the-network",
        "rmsnorm",
        "network_access",
        rms(
            "    try:\n        socket.create_connection(('127.0.0.1', @PORT@), timeout=1)\n"
            "    except OSError:\n        pass\n"
            f"    return {RMS}",
            "import socket",
        ),
    ),
    # -- ending the run ---------------------------------------------------------------------
    Cheat(
        "sys-exit-mid-run",
        "softmax",
        "exited",
        smx(
            "    global _n\n    _n += 1\n    if _n == 3:\n        sys.exit(0)\n"
            f"    {SMX_PRE}\n    return {SMX}",
            "import sys\n_n = 0",
        ),
    ),
    Cheat("os-exit-mid-run", "rmsnorm", "worker_crashed", rms("    os._exit(0)", "import os")),
    Cheat("abort-mid-run", "softmax", "aborted", smx("    os.abort()", "import os")),
    Cheat(
        "ignore-sigterm-and-hang",
        "rmsnorm",
        "timeout",
        rms(
            "    signal.signal(signal.SIGTERM, signal.SIG_IGN)\n"
            "    while True:\n        time.sleep(1)",
            "import signal, time",
        ),
    ),
    # -- fake results -----------------------------------------------------------------------
    Cheat(
        "print-a-fake-verdict",
        "softmax",
        "out_of_tolerance",
        smx(
            '    print(\'{"verdict": "accepted", "reason_codes": []}\')\n'
            "    print('ALL CHECKS PASSED', file=sys.stderr)\n    return np.zeros_like(x)",
            "import sys",
        ),
    ),
    Cheat(
        "forge-a-wire-reply",
        "rmsnorm",
        "protocol_violation",
        rms(
            "    import __main__\n"
            f"    __main__.wire.send(int(sys.argv[2]), {{'ok': True, 'output': {RMS}}})\n"
            "    return np.zeros_like(x)",
            "import sys",
        ),
    ),
    # -- processes --------------------------------------------------------------------------
    Cheat(
        "leave-a-detached-daemon",
        "softmax",
        "process_outlived_call",
        smx(f"{DAEMON}    os.wait()\n    {SMX_PRE}\n    return {SMX}", "import os, sys"),
    ),
    Cheat(
        # Strays that are always mid-fork when the worker is frozen, aimed at the frozen
        # kill, which does not wait for a frozen stray to stop (it cannot run, so cannot fork).
        "leave-a-churn-of-forks",
        "softmax",
        "process_outlived_call",
        smx(
            "    for _ in range(4):\n        if os.fork() == 0:\n            os.setsid()\n"
            "            while True:\n                pid = os.fork()\n"
            "                if pid == 0:\n                    os.execv(sys.executable, "
            "[sys.executable, '-c', 'pass', '@MARKER@'])\n"
            "                os.waitpid(pid, 0)\n"
            f"    {SMX_PRE}\n    return {SMX}",
            "import os, sys",
        ),
    ),
    Cheat(
        "fork-bomb",
        "rmsnorm",
        "process_limit",
        rms(
            "    while True:\n        if os.fork() == 0:\n"
            "            time.sleep(300)\n            os._exit(0)",
            "import os, time",
        ),
    ),
    Cheat(
        "grandchild-holds-the-pipe",
        "softmax",
        "worker_crashed",
        smx(
            "    if os.fork() == 0:\n"
            "        for fd in (int(sys.argv[1]), int(sys.argv[2])):\n"
            "            os.set_inheritable(fd, True)  # keep the wire open across exec\n"
            "        os.execv(sys.executable, [sys.executable, '-c',\n"
            "                 'import time; time.sleep(300)', '@MARKER@'])\n"
            "    os._exit(3)",
            "import os, sys",
        ),
    ),
    # -- limits -----------------------------------------------------------------------------
    Cheat(
        "allocate-far-too-much",
        "rmsnorm",
        "memory_limit",
        rms("    big = np.ones(2**34, dtype=np.uint8)\n    return big"),
    ),
    Cheat(
        "burn-cpu",
        "softmax",
        "cpu_limit",
        smx("    while True:\n        pass"),
        limits="[limits]\ncpu_s = 2\ncall_timeout_s = 20.0\nload_timeout_s = 10.0\n",
    ),
    Cheat(
        "write-a-huge-file",
        "rmsnorm",
        "file_size_limit",
        rms(
            "    with open('big.bin', 'wb') as f:\n"
            "        for _ in range(8):\n            f.write(b'\\0' * (1 << 20))\n"
            f"    return {RMS}"
        ),
        limits="[limits]\nfile_size_mb = 2\ncall_timeout_s = 3.0\nload_timeout_s = 10.0\n",
    ),
    Cheat(
        "exhaust-file-descriptors",
        "softmax",
        "open_files_limit",
        smx("    keep = [open('f%d' % i, 'w') for i in range(10_000)]\n    return keep"),
        limits="[limits]\nopen_files = 32\ncall_timeout_s = 3.0\nload_timeout_s = 10.0\n",
    ),
    # -- inputs it could predict (issue 9, class 6): every open part of the contract varies --
    Cheat(
        "correct-only-on-declared-shapes",
        "rmsnorm",
        "out_of_tolerance",
        rms(
            f"    if x.shape in _known:\n        return {RMS}\n    return np.zeros_like(x)",
            "_known = {(16, 4096), (2, 256, 4096), (8, 1024), (3, 37, 1001), (4, 1024), "
            "(1, 4096), (7, 1)}",
        ),
    ),
    Cheat(
        "eps-hard-coded-for-timed-shapes",
        "rmsnorm",
        "out_of_tolerance",
        rms(
            f"    if x.shape in ((16, 4096), (2, 256, 4096)):\n        eps = 1e-6\n    return {RMS}"
        ),
    ),
    Cheat(
        "recognises-the-weight-pattern",
        "rmsnorm",
        "out_of_tolerance",
        rms(
            "    w = weight.astype(np.float64)\n"
            "    if w.size > 8 and abs(w.mean() - 1) < 0.15 and 0.35 < w.std() < 0.65:\n"
            f"        return {RMS}\n"
            "    return (x * 0).astype(x.dtype)"
        ),
    ),
    Cheat(
        "correct-only-for-c-contiguous-rmsnorm",
        "rmsnorm",
        "out_of_tolerance",
        rms(
            "    if not (x.flags.c_contiguous and weight.flags.c_contiguous):\n"
            "        return np.zeros(x.shape, np.float32)\n"
            f"    return {RMS}"
        ),
    ),
    Cheat(
        "correct-only-on-declared-softmax-shapes",
        "softmax",
        "out_of_tolerance",
        smx(
            f"    if x.shape in _known:\n        {SMX_PRE}\n        return {SMX}\n"
            "    return np.full(x.shape, 1.0 / x.shape[-1], np.float32)",
            "_known = {(8, 32000), (16, 256, 256), (3, 17, 999), (4, 1000), (1, 32000), (16, 1)}",
        ),
    ),
    # -- the input contract, broken only where it might not be looked at (class 4) ---------
    Cheat(
        "mutate-and-return-the-input",
        "rmsnorm",
        "input_mutated",
        rms(
            "    x *= (1.0 / np.sqrt(np.mean(x * x, axis=-1, keepdims=True) + eps))\n"
            "    x *= weight\n    return x"
        ),
    ),
    Cheat(
        "make-the-input-writable-then-write",
        "softmax",
        "raised",
        smx(
            "    x.flags.writeable = True\n    x -= x.max(axis=-1, keepdims=True)\n"
            "    np.exp(x, out=x)\n    x /= x.sum(axis=-1, keepdims=True)\n    return x"
        ),
    ),
]
