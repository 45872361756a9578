"""Checks on a timed batch's reply: every output against the oracle, every time as data.

Fast paths first (a timed phase checks thousands of outputs), the detailed checks of `_checks`
whenever something is off, so a failure reads the same as in the correctness phase.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from typing import Any

import numpy as np

from optarena.judge._checks import (
    Finding,
    check_dtype,
    check_finite,
    check_shape,
    check_tolerance,
    check_type,
    fail,
)
from optarena.tasks import Tolerance

_FINGERPRINT_ELEMENTS = 1 << 16


@dataclass
class TimedInput:
    """One call's inputs, generated before any batch is sent, and (later) the oracle's answer.

    The answer is computed only after both arms have answered (`ref` is None until then), as in
    the correctness phase: the expected output never exists while this input's call runs.
    """

    args: list[Any]
    kwargs: dict[str, Any]
    arrays: list[np.ndarray]
    ref: np.ndarray | None = None
    _allowed: np.ndarray | None = None

    def expected(self) -> np.ndarray:
        if self.ref is None:
            raise RuntimeError("the oracle has not run for this input yet")
        return self.ref

    def allowed(self, tol: Tolerance) -> np.ndarray:
        """atol + rtol * |ref|, computed once and shared by both arms' outputs."""
        if self._allowed is None:
            a = np.abs(self.expected())
            a *= tol.rtol
            a += tol.atol
            self._allowed = a
        return self._allowed


def within_tolerance(out: np.ndarray, inp: TimedInput, tol: Tolerance) -> bool:
    """Fast pass test with few temporaries; anything else gets the detailed checks."""
    ref = inp.expected()
    if out.shape != ref.shape:
        return False
    err = np.subtract(out, ref, dtype=np.float64)
    np.abs(err, out=err)
    return bool(np.all(err <= inp.allowed(tol)))


def fingerprint(out: np.ndarray) -> bytes:
    """Identity of an output for the replay check, from at most 64 Ki evenly spaced elements.

    A replayed output is byte-identical, so any subset matches; two honest outputs for
    different random inputs differ almost everywhere. Hashing a sample keeps this cheap.
    """
    flat = np.ascontiguousarray(out).reshape(-1)
    step = max(1, flat.size // _FINGERPRINT_ELEMENTS)
    h = hashlib.sha256(str((out.shape, out.dtype.str, flat.size)).encode())
    h.update(np.ascontiguousarray(flat[::step]).view(np.uint8).data)
    return h.digest()


def first_failure(
    reply: dict[str, Any],
    i: int,
    inp: TimedInput,
    dtype: Any,
    tol: Tolerance,
    earlier: set[bytes] | None,
) -> Finding | None:
    """The first failed check of call `i`'s output (None when it is correct).

    `earlier` holds fingerprints of this arm's earlier timed outputs (None: no replay check,
    for warm-up calls whose inputs repeat on purpose).
    """
    out, ref = reply["outputs"][i], inp.expected()
    found = [check_type(out)]
    if isinstance(out, np.ndarray):
        shape = check_shape(out, ref)
        found += [shape, check_dtype(out, dtype)]
        if shape.passed and not within_tolerance(out, inp, tol):
            found += [check_finite(out, ref), check_tolerance(out, ref, tol.atol, tol.rtol)]
    if reply["inputs_modified"][i]:
        found.append(fail("inputs_unmodified", "input_mutated", "an input was modified in place"))
    if reply["aliases"][i]:
        found.append(fail("no_alias", "output_aliases_input", "the output shares input memory"))
    bad = next((f for f in found if not f.passed), None)
    if earlier is None or bad is not None:
        return bad
    if isinstance(out, np.ndarray) and out.size >= 2 and out.min() != out.max():
        key = fingerprint(out)
        if key in earlier:
            return fail("tolerance", "stale_output", "the output replays an earlier timed call's")
        earlier.add(key)
    return None


def reply_problem(reply: dict[str, Any], n: int) -> Finding | None:
    """A timed-batch reply that is not well-formed data, or reports impossible times."""
    lists = ("elapsed_ns", "cpu_ns", "outputs", "inputs_modified", "aliases")
    if any(not isinstance(reply.get(k), list) or len(reply[k]) != n for k in lists) or not all(
        type(x) is int for k in ("elapsed_ns", "cpu_ns") for x in reply[k]
    ):
        return fail("timed_call", "protocol_violation", "malformed timed-batch reply")
    for wall, cpu in zip(reply["elapsed_ns"], reply["cpu_ns"], strict=True):
        if wall <= 0 or cpu < 0:
            return fail("timing", "timing_tampered", f"impossible call time: {wall} ns, cpu {cpu}")
        # One thread cannot run longer than the call took; the two clocks differ by a few
        # percent on a virtual machine, so only a gross excess counts.
        if cpu > wall * 1.25 + 200_000:
            detail = f"a call used {cpu} ns of its thread's CPU in {wall} ns of wall time"
            return fail("timing", "timing_tampered", detail)
    return None


def call_bytes(inputs: list[TimedInput]) -> int:
    """Memory one call of a batch keeps alive in the worker: inputs, their copies (for the
    mutation check), the output and its snapshot at return (each as large as the largest
    input array)."""
    in_bytes = max(sum(a.nbytes for a in i.arrays) for i in inputs)
    out_bytes = max((max((a.nbytes for a in i.arrays), default=0) for i in inputs), default=0)
    return 2 * in_bytes + 2 * out_bytes


def prefault_mb(batch_bytes: int, memory_mb: int) -> int:
    """Heap to touch before loading: one batch's live memory plus temporaries, with a 1.5x
    margin, capped at a quarter of the worker's memory limit."""
    return min(int(batch_bytes * 1.5 + (16 << 20)) >> 20, memory_mb // 4)
