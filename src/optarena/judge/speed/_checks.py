"""Checks on a timed call's output: every output against the oracle.

Fast paths first (a timed phase checks thousands of outputs), the detailed checks of
`correctness/_checks` whenever something is off, so a failure reads the same as in the
correctness phase.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from typing import Any

import numpy as np

from optarena.judge.correctness import (
    Finding,
    allowed_error,
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
    """One call's inputs (in the judge only, until written into an arm's input area right
    before its call) and, later, the oracle's answer.

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
            self._allowed = allowed_error(self.expected(), tol.atol, tol.rtol)
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
    out: np.ndarray,
    inp: TimedInput,
    dtype: Any,
    tol: Tolerance,
    earlier: set[bytes] | None,
) -> Finding | None:
    """The first failed check of one timed call's output (None when it is correct).

    `earlier` holds fingerprints of this arm's earlier timed outputs (None: no replay check).
    """
    ref = inp.expected()
    found = [check_type(out)]
    shape = check_shape(out, ref)
    kind = check_dtype(out, dtype)
    found += [shape, kind]
    # Values are compared only in the expected dtype: a complex or boolean output cannot be
    # subtracted in float64 (it raised, and a wrong dtype read as judge_error).
    if shape.passed and kind.passed and not within_tolerance(out, inp, tol):
        found += [check_finite(out, ref), check_tolerance(out, ref, tol.atol, tol.rtol)]
    bad = next((f for f in found if not f.passed), None)
    if earlier is None or bad is not None:
        return bad
    if out.size >= 2 and out.min() != out.max():
        key = fingerprint(out)
        if key in earlier:
            return fail("tolerance", "stale_output", "the output replays an earlier timed call's")
        earlier.add(key)
    return None


def call_bytes(inputs: list[TimedInput]) -> int:
    """Memory one call keeps alive in the judge and the worker: inputs, the output and its
    copy (each as large as the largest input array)."""
    in_bytes = max(sum(a.nbytes for a in i.arrays) for i in inputs)
    out_bytes = max((max((a.nbytes for a in i.arrays), default=0) for i in inputs), default=0)
    return in_bytes + 2 * out_bytes


def prefault_mb(batch_bytes: int, memory_mb: int) -> int:
    """Heap to touch before loading: one batch's live memory plus temporaries, with a 1.5x
    margin, capped at a quarter of the worker's memory limit."""
    return min(int(batch_bytes * 1.5 + (16 << 20)) >> 20, memory_mb // 4)
