"""The judge's turn between two timed calls, compiled (`_turn.c`), where this machine can.

Why: the turn runs on the worker's CPU while the worker waits, and the next call pays for
what the turn took of the caches, in both arms alike: a fixed cost per call that dilutes every
ratio toward 1. With the same steps in Python the judge read rmsnorm decode's 2x candidate as
1.56-1.60, with them compiled 1.67-1.73 (in-process 1.93-1.94; docs/measurement.md, "The
judge's turn, compiled").

Its input compare differs in one way: an array up to 1 MiB is compared by a keyed hash of
the area against the same hash of the judge's copy, taken before the run, so that the copy is
not read back between two calls (`_turn.c`, `oa_hash`; rmsnorm decode 1.70 to 1.77). The key
is fresh per segment and never leaves the judge's memory. Larger arrays are compared exactly.

How: `cc` compiles the source once per process into a private directory, and the library is
loaded from there and the file removed (nothing another user or the agent can write is ever
loaded). No compiler, a failed build, a clock that is not `CLOCK_MONOTONIC` or structures
whose sizes differ from ours: no library, and the Python turn runs, as it always could. Which
one ran is recorded with every comparison (`SpeedProtocol.turn`): their dilutions differ.
"""

from __future__ import annotations

import ctypes
import os
import shutil
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

import numpy as np

from optarena.judge.client._arena import Copy
from optarena.judge.client._objects import _HEAD, _PLAIN

SOURCE = Path(__file__).with_name("_turn.c")
ABI = 2
LANES = 4  # of the input compare's keyed hash (`oa_hash`)
_P = (1 << 61) - 1

DONE, SENT, HEAD = 0, 1, 2


class OaCopy(ctypes.Structure):
    _fields_ = [(n, ctypes.c_int64) for n in ("which", "offset", "source", "nbytes")]


class OaDtype(ctypes.Structure):
    _fields_ = [
        ("type_char", ctypes.c_uint8),
        ("byteorder", ctypes.c_uint8),
        ("pad", ctypes.c_uint8 * 6),
        ("itemsize", ctypes.c_int64),
    ]


class OaPlan(ctypes.Structure):
    _fields_ = [
        ("inputs", ctypes.c_void_p),
        ("copies", ctypes.c_void_p),
        ("copy_start", ctypes.c_void_p),
        ("frames", ctypes.c_void_p),
        ("frame_start", ctypes.c_void_p),
        ("dtypes", ctypes.c_void_p),
        ("key", ctypes.c_void_p),
        ("expect", ctypes.c_void_p),
        ("ndtypes", ctypes.c_int64),
        ("head", ctypes.c_int64),
        ("ndarray_type", ctypes.c_int64),
        ("max_bytes", ctypes.c_int64),
        ("to_fd", ctypes.c_int32),
        ("from_fd", ctypes.c_int32),
        ("pid", ctypes.c_int32),
        ("cpu_fd", ctypes.c_int32),
        ("cpu_v1", ctypes.c_int32),
        ("pad", ctypes.c_int32),
    ]


_CALL_FIELDS = ["t_go", "answered", "wall_now", "cpu_now", "changed"]
_CALL_FIELDS += ["address", "nbytes", "dtype", "nd", "data"]


class OaCall(ctypes.Structure):
    _fields_ = [*[(n, ctypes.c_int64) for n in _CALL_FIELDS], ("dims", ctypes.c_int64 * 32)]


class OaStop(ctypes.Structure):
    _fields_ = [
        ("status", ctypes.c_int64),
        ("index", ctypes.c_int64),
        ("got", ctypes.c_int64),
        ("answered", ctypes.c_int64),
        ("head", ctypes.c_uint8 * 16),
    ]


_STRUCTS = (OaCopy, OaDtype, OaPlan, OaCall, OaStop)

_lock = threading.Lock()
_loaded: list[Any] = []  # [library or None], once per process
_why: list[str] = []


def _build() -> tuple[Any, str]:
    """(the library, "") or (None, why not)."""
    if sys.platform != "linux":
        return None, "not Linux"
    if time.get_clock_info("perf_counter").implementation != "clock_gettime(CLOCK_MONOTONIC)":
        return None, "time.perf_counter is not CLOCK_MONOTONIC here"
    cc = shutil.which("cc")
    if cc is None:
        return None, "no C compiler (cc) on PATH"
    with tempfile.TemporaryDirectory(prefix="optarena-turn-") as d:  # 0700, ours
        out = os.path.join(d, "turn.so")
        argv = [cc, "-O2", "-shared", "-fPIC", "-o", out, str(SOURCE)]
        try:
            done = subprocess.run(
                argv, stdin=subprocess.DEVNULL, capture_output=True, timeout=60, check=False
            )
        except (OSError, subprocess.TimeoutExpired) as e:
            return None, f"cannot run {cc}: {e}"
        if done.returncode != 0:
            return None, f"{cc} failed: {done.stderr.decode(errors='replace')[-500:]}"
        try:
            lib = ctypes.CDLL(out)
        except OSError as e:
            return None, f"cannot load the compiled turn: {e}"
    lib.oa_abi.restype = ctypes.c_int64
    lib.oa_sizes.restype = ctypes.c_int64
    lib.oa_sizes.argtypes = [ctypes.c_int64]
    if lib.oa_abi() != ABI:
        return None, "the compiled turn's ABI is not this module's"
    for i, s in enumerate(_STRUCTS):
        if lib.oa_sizes(i) != ctypes.sizeof(s):
            return None, f"the compiled turn's {s.__name__} is not this module's"
    lib.oa_hash_max.restype = ctypes.c_int64
    lib.oa_hash.restype = None
    lib.oa_hash.argtypes = [ctypes.c_void_p, ctypes.c_int64, ctypes.c_void_p, ctypes.c_void_p]
    lib.oa_run.restype = None
    lib.oa_run.argtypes = [
        ctypes.POINTER(OaPlan),
        ctypes.c_int64,
        ctypes.c_int64,
        ctypes.c_int64,
        ctypes.c_void_p,
        ctypes.POINTER(OaStop),
    ]
    return lib, ""


def native() -> Any:
    """The compiled turn's library, or None (then `why_not()` says why)."""
    with _lock:
        if not _loaded:
            lib, why = _build()
            _loaded.append(lib)
            _why.append(why)
        return _loaded[0]


def why_not() -> str:
    native()
    return _why[0]


_free = ctypes.CDLL(None).free
_free.argtypes = [ctypes.c_void_p]
_free.restype = None


class _Malloced:
    """An output's bytes the compiled turn allocated: an ndarray's base, freed with it."""

    def __init__(self, address: int, nbytes: int) -> None:
        self.address = address
        self.__array_interface__ = {
            "data": (address, False),
            "shape": (nbytes,),
            "typestr": "|u1",
            "version": 3,
        }

    def __del__(self) -> None:
        if self.address:
            _free(self.address)
            self.address = 0


def adopt(address: int, nbytes: int) -> np.ndarray:
    """The bytes at `address` (from the compiled turn's `malloc`) as a uint8 array that frees
    them when the last view of it goes."""
    if not address:
        return np.empty(nbytes, dtype=np.uint8)
    return np.asarray(_Malloced(address, nbytes))


# The plain dtypes an output taken by reference may have, as the compiled turn looks them up.
DTYPES: list[np.dtype[Any]] = list(_PLAIN.values())
_DTYPE_TABLE = (OaDtype * len(DTYPES))(
    *[OaDtype(ord(char), ord(order), (0,) * 6, d.itemsize) for (char, order), d in _PLAIN.items()]
)


class Segment:
    """One segment of a run as the compiled turn takes it, built before the worker is thawed:
    its calls' input copies and go frames, where the answers go, and the run's constants."""

    def __init__(
        self,
        lib: Any,
        inputs: int,
        copies: list[list[Copy]],
        frames: list[bytes],
        fds: tuple[int, int],
        pid: int,
        cpu: tuple[int, bool] | None,
        ndarray_type: int,
        max_bytes: int,
    ) -> None:
        self.lib, self.n = lib, len(frames)
        flat = [c for cs in copies for c in cs]
        self._copies = (OaCopy * max(len(flat), 1))(
            *[OaCopy(c.which, c.offset, c.source, c.nbytes) for c in flat]
        )
        starts = [0]
        for cs in copies:
            starts.append(starts[-1] + len(cs))
        self._copy_start = (ctypes.c_int64 * (self.n + 1))(*starts)
        blob = b"".join(frames)
        self._frames = ctypes.create_string_buffer(blob, max(len(blob), 1))
        ends = [0]
        for f in frames:
            ends.append(ends[-1] + len(f))
        self._frame_start = (ctypes.c_int64 * (self.n + 1))(*ends)
        # The input compare's key, fresh per segment and never outside the judge's memory, and
        # each copy's source hashed under it now, before the run (`oa_hash`).
        self._key = (ctypes.c_uint64 * LANES)(
            *[int.from_bytes(os.urandom(8), "little") % (_P - 1) + 1 for _ in range(LANES)]
        )
        self._expect = (ctypes.c_uint64 * (LANES * max(len(flat), 1)))()
        at, hashed = ctypes.addressof(self._expect), lib.oa_hash_max()
        for k, c in enumerate(flat):
            if c.nbytes <= hashed:  # larger arrays are compared in full
                lib.oa_hash(c.source, c.nbytes, ctypes.addressof(self._key), at + 8 * LANES * k)
        self.calls = (OaCall * self.n)()
        self.stop = OaStop()
        self.plan = OaPlan(
            inputs=inputs,
            copies=ctypes.addressof(self._copies),
            copy_start=ctypes.addressof(self._copy_start),
            frames=ctypes.addressof(self._frames),
            frame_start=ctypes.addressof(self._frame_start),
            dtypes=ctypes.addressof(_DTYPE_TABLE),
            key=ctypes.addressof(self._key),
            expect=at,
            ndtypes=len(DTYPES),
            head=_HEAD,
            ndarray_type=ndarray_type,
            max_bytes=max_bytes,
            to_fd=fds[0],
            from_fd=fds[1],
            pid=pid,
            cpu_fd=-1 if cpu is None else cpu[0],
            cpu_v1=int(cpu is not None and cpu[1]),
        )

    def run(self, first: int, sent: int) -> OaStop:
        """Calls `first` on (`sent`: that many bytes of its go frame are out), until one is
        handed back or the segment ends (`OaStop`)."""
        self.lib.oa_run(
            ctypes.byref(self.plan),
            first,
            self.n,
            sent,
            ctypes.addressof(self.calls),
            ctypes.byref(self.stop),
        )
        return self.stop
