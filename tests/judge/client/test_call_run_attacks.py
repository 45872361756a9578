"""Runs of timed calls against a candidate that forges the worker's side of the protocol:
its own loop in place of the worker's, frames sent early or made up, objects that are not
what they claim. Each must gain nothing and, where it breaks a rule, be named."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pytest

from optarena.judge.client import WorkerError

# private: the waiting check's share, on the calls of one run
from optarena.judge.speed._integrity import ArmCalls, waiting_share
from optarena.sandbox import probe

needs_cgroup = pytest.mark.skipif(
    probe().cgroups.why_not.get("cpu") is not None, reason="no cgroup CPU accounting here"
)


# A candidate's own loop in place of the worker's (as `tests/adversarial`'s takeover) that
# answers call i+1 as it answers call i: a ref frame naming an array the judge must ask to
# have described. Then, asked, it sleeps (waiting, off the CPU), computes and describes the
# real output. Stamped at the early ref frame, its calls read as no waiting at all.
BASE = "x / np.sqrt(np.mean(x * x, axis=-1, keepdims=True) + eps) * weight"
LOOP_PARTS = (Path(__file__).resolve().parents[2] / "adversarial/data/loop_parts.py").read_text()

EARLY = """
import importlib.util, os, struct, sys, time
import numpy as np

SLEEP = {sleep}

def _base(x, weight, *, eps):
    return {base}

rmsnorm = _base

{parts}

DUMMY = np.zeros((4, 512), np.float32)[:, ::2]   # not C-contiguous: the judge asks to describe

def _serve():
    wire, run = _sibling("_wire.py"), _sibling("_run.py")
    fd_in, fd_out = int(sys.argv[1]), int(sys.argv[2])
    area = _worker_object().inputs
    wire.send(fd_out, {{"ok": True, "violations": [], "id": 2}})  # hello was 1, load is 2
    templates, held = {{}}, [None]
    while True:
        head = _read_exact(fd_in, 4)
        if head != run.GO_MAGIC:
            msg = wire.recv(fd_in, from_judge=True, prefix=head)
            if msg.get("op") == "bind":
                args = [_view(area, a) for a in msg["args"]]
                kwargs = {{k: _view(area, v) for k, v in msg["kwargs"].items()}}
                templates[msg["template"]] = (args, kwargs)
            wire.send(fd_out, {{"ok": True, "violations": [], "id": msg.get("id")}})
            if msg.get("op") == "exit":
                os._exit(0)
            continue
        _, index, calls, t, m = run.GO.unpack(head + _read_exact(fd_in, run.GO.size - 4))
        args, kwargs = templates[t]
        kw = dict(kwargs)
        frame = b"\\0" * run.GO.size + _read_exact(fd_in, 8 * m)
        early = False          # whether this call's REF (a dummy) is already in the pipe
        while True:
            kw["eps"] = struct.unpack_from("<d", frame, run.GO.size)[0]
            if SLEEP:
                time.sleep(SLEEP)      # waiting, off-CPU
            out = _base(*args, **kw)
            held[0] = out
            if early:
                ask = _read_exact(fd_in, run.GO.size + 8 * m)   # the judge's DESCRIBE frame
                assert ask.startswith(run.DESCRIBE_MAGIC), ask[:4]
                address = out.__array_interface__["data"][0]
                os.write(fd_out, run.OUT.pack(run.OUT_MAGIC, index, out.nbytes, address,
                                             run.STATUS_IN_MEMORY, out.ndim, 0, b"<f4")
                         + run.SHAPES[out.ndim].pack(*out.shape))
            else:
                os.write(fd_out, run.REF.pack(run.REF_MAGIC, index, id(out)))
            index += 1
            if index == calls:
                break
            # answer the next call before it is asked: the judge's `answered` is now
            os.write(fd_out, run.REF.pack(run.REF_MAGIC, index, id(DUMMY)))
            early = True
            frame = _read_exact(fd_in, run.GO.size + 8 * m)

_serve()
"""

HONEST_SLEEPER = """
import time
import numpy as np
def rmsnorm(x, weight, *, eps):
    time.sleep({sleep})
    return {base}
"""


@needs_cgroup
@pytest.mark.parametrize("source", ["early", "honest"])
def test_an_answer_sent_before_its_call_hides_no_waiting(
    source: str, worker_of: Any, calls_of: Any
) -> None:
    """The go-to-answer clock stops when the output the judge takes arrives (red team,
    2026-12-07: it stopped at the early ref frame, and the waiting share read 0.0)."""
    text = (EARLY if source == "early" else HONEST_SLEEPER).format(
        sleep=0.003, base=BASE, parts=LOOP_PARTS
    )
    w = worker_of(text)
    calls = calls_of(12)
    results = w.run_calls(0, calls, lambda: 30.0, 1 << 20)
    assert len(results) == len(calls)
    for r, (a, k) in zip(results, calls, strict=True):
        assert r.reply.get("ok") and r.output is not None, r.reply
        x, weight = a
        want = x / np.sqrt(np.mean(x * x, axis=-1, keepdims=True) + k["eps"]) * weight
        np.testing.assert_allclose(r.output, want, rtol=1e-6)
    counted = results[1:]
    call = [int(r.call_wall_ns or 0) for r in counted]
    cpu = [int(r.cpu_ns or 0) for r in counted]
    assert min(call) > 3_000_000  # each answer after its 3 ms sleep
    share = waiting_share(ArmCalls(call, cpu))
    assert share is not None and share > 0.5, share


FORGED_LAST = """
import os
import struct
import sys

import numpy as np

_calls = [0]


def rmsnorm(x, weight, *, eps):
    out = np.zeros(x.shape, x.dtype)
    _calls[0] += 1
    if _calls[0] == 2:
        address = out.__array_interface__["data"][0]
        head = struct.pack("<4sIQQBBBx16s", b"OAO1", 1, out.nbytes, address, 2, 2, 0, b"<f8")
        os.write(int(sys.argv[2]), head + struct.pack("<2q", *out.shape))
    return out
"""


def test_an_output_frame_in_place_of_a_ref_frame_is_checked_in_full(
    worker_of: Any, calls_of: Any
) -> None:
    """An output frame the candidate writes itself where the judge waits for a ref frame goes
    to the general reader, which checks all of it: a dtype that disagrees with the size is a
    protocol violation, never bytes judged as another dtype."""
    w = worker_of(FORGED_LAST)
    with pytest.raises(WorkerError) as e:
        w.run_calls(0, calls_of(2), lambda: 30.0, 1 << 20)
    assert e.value.code == "protocol_violation"
    assert "disagree" in e.value.detail


# Returns the right values in one of several forms: what the judge takes by reference and what
# it asks the worker to describe (made contiguous there, or no array at all).
FORGED_REF = """
import ctypes
import os
import struct
import sys

import numpy as np

WHAT = "{what}"
_calls = [0]
_keep = []


def _forged_array_over(x):
    dims = (ctypes.c_int64 * 2)(*x.shape)
    strides = (ctypes.c_int64 * 2)(*x.strides)
    fields = (ctypes.c_char * 96)()
    data = x.__array_interface__["data"][0]
    struct.pack_into(
        "<qQQi4xQQQQi", fields, 0, 1 << 20, id(np.ndarray), data, 2,
        ctypes.addressof(dims), ctypes.addressof(strides), 0, id(x.dtype), 1,
    )
    _keep.extend([dims, strides, fields])
    return ctypes.addressof(fields)


def rmsnorm(x, weight, *, eps):
    _calls[0] += 1
    if _calls[0] == 2:
        thing = b"not an array" * 8
        _keep.append(thing)
        ref = {{"no-array": id(thing), "unmapped": 8, "over-the-input": _forged_array_over(x)}}
        os.write(int(sys.argv[2]), struct.pack("<4sIQ", b"OAR1", 1, ref[WHAT]))
    return np.zeros(x.shape, x.dtype)
"""


@pytest.mark.parametrize(
    ("what", "finding"),
    [("no-array", "names no ndarray"), ("unmapped", "cannot be read"), ("over-the-input", "")],
)
def test_a_forged_output_reference_gains_nothing(
    what: str, finding: str, worker_of: Any, calls_of: Any
) -> None:
    """The object a ref frame names is the candidate's to forge: one that is no array, or lies
    nowhere, is a protocol violation; a made-up array over the input area (the input's bytes
    as the output, no work done) is seen for what its bytes are: an output in an input."""
    w = worker_of(FORGED_REF.format(what=what))
    if w.objects is None:
        pytest.skip("this judge cannot read the worker's memory")
    if finding:
        with pytest.raises(WorkerError) as e:
            w.run_calls(0, calls_of(2), lambda: 30.0, 1 << 20)
        assert e.value.code == "protocol_violation"
        assert finding in e.value.detail
        return
    calls = calls_of(2)
    results = w.run_calls(0, calls, lambda: 30.0, 1 << 20)
    last = results[-1]
    assert last.reply["aliases"] is True
    assert last.output is not None and np.array_equal(last.output, calls[1][0][0])


# The input area mapped a second time (red team, 2026-12-07: an output through such a copy
# shared the inputs' memory where the judge, which read the area's place at hello, did not
# look). Tried three ways; the first that works returns x's own bytes through the new mapping,
# and where none does, the output's values say how each failed (errno, per way).
REMAP = """
import ctypes

import numpy as np

libc = ctypes.CDLL(None, use_errno=True)
libc.mremap.restype = libc.mmap.restype = ctypes.c_void_p
libc.mremap.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_size_t, ctypes.c_int]
libc.mremap.argtypes += [ctypes.c_void_p]
libc.mmap.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int, ctypes.c_int]
libc.mmap.argtypes += [ctypes.c_int, ctypes.c_long]
WAYS = ((0, 1), (-1, 1 | 4), (-1, 1 | 2))  # old size 0; MREMAP_DONTUNMAP; a move (FIXED)


def rmsnorm(x, weight, *, eps):
    for line in open("/proc/self/maps"):
        if "optarena-inputs" in line:
            lo, hi = (int(v, 16) for v in line.split()[0].split("-"))
            break
    size = hi - lo
    spare = libc.mmap(None, size, 0, 0x22, -1, 0)  # where a move would go
    errors = []
    for old, flags in WAYS:
        args = [lo, size if old < 0 else old, size, flags]
        new = libc.mremap(*args, spare if flags & 2 else None)
        if new not in (None, ctypes.c_void_p(-1).value):
            at = x.__array_interface__["data"][0] - lo + new
            return np.frombuffer((ctypes.c_char * x.nbytes).from_address(at), x.dtype).reshape(
                x.shape
            )
        errors.append(ctypes.get_errno())
    return np.array(errors * (x.size // 3) + [0] * (x.size % 3), x.dtype).reshape(x.shape)
"""


def test_the_input_area_cannot_be_mapped_again(worker_of: Any, calls_of: Any) -> None:
    w = worker_of(REMAP)
    hello_sealed = w.sealed_inputs
    results = w.run_calls(0, calls_of(2), lambda: 30.0, 1 << 20)
    for r in results:
        assert r.reply.get("ok") and r.output is not None, r.reply
        assert not r.reply["aliases"]  # nothing to alias: no second mapping exists
        errors = [int(v) for v in r.output.reshape(-1)[:3]]
        assert errors[:2] == [1, 1]  # EPERM, by the filter
        if hello_sealed:
            assert errors[2] == 1  # EPERM: the sealed area does not move
