"""Correctness checks: small pure functions over one call's output and the oracle's.

Each returns a `Finding` (passed, reason code, detail). The judge runs them in its own process on
data that crossed the wire, so a candidate cannot influence how they are computed.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from typing import Any

import numpy as np


@dataclass(frozen=True)
class Finding:
    name: str
    passed: bool
    code: str | None = None
    detail: str = ""


def ok(name: str, detail: str = "") -> Finding:
    return Finding(name, True, None, detail)


def fail(name: str, code: str, detail: str) -> Finding:
    return Finding(name, False, code, detail)


def check_type(output: Any) -> Finding:
    if isinstance(output, np.ndarray):
        return ok("output_type", "numpy.ndarray")
    if isinstance(output, dict) and "__obj__" in output:
        got = str(output["__obj__"])
    else:
        got = type(output).__name__
    return fail("output_type", "wrong_type", f"expected exactly numpy.ndarray, got {got}")


def check_shape(out: np.ndarray, ref: np.ndarray) -> Finding:
    if out.shape == ref.shape:
        return ok("shape", str(out.shape))
    return fail("shape", "wrong_shape", f"expected shape {ref.shape}, got {out.shape}")


def check_dtype(out: np.ndarray, expected: np.dtype[Any]) -> Finding:
    if out.dtype == expected:
        return ok("dtype", str(out.dtype))
    return fail("dtype", "wrong_dtype", f"expected dtype {expected}, got {out.dtype}")


def check_finite(out: np.ndarray, ref: np.ndarray) -> Finding:
    """Non-finite values are only allowed where the oracle itself is not finite."""
    bad = np.isfinite(ref) & ~np.isfinite(out)
    n = int(np.count_nonzero(bad))
    if n == 0:
        return ok("finite")
    first = first_true(bad)
    return fail(
        "finite",
        "non_finite",
        f"{n} non-finite values where the reference is finite (first at {first}: {out[first]!r})",
    )


def first_true(mask: np.ndarray) -> tuple[int, ...]:
    """The index of the first True of a mask with at least one (argwhere would list them all)."""
    return tuple(int(i) for i in np.unravel_index(int(np.argmax(mask)), mask.shape))


def allowed_error(ref: np.ndarray, atol: float, rtol: float) -> np.ndarray:
    """atol + rtol * |ref|, per element, in one new float64 array."""
    allowed = np.abs(ref)
    allowed *= rtol
    allowed += atol
    return allowed


def tolerance_violations(out: np.ndarray, ref: np.ndarray, atol: float, rtol: float) -> np.ndarray:
    """Boolean mask of elements outside |out - ref| <= atol + rtol * |ref| (NaN counts as out)."""
    return _violations(out, ref, atol, rtol)[0]


def _violations(
    out: np.ndarray, ref: np.ndarray, atol: float, rtol: float
) -> tuple[np.ndarray, np.ndarray]:
    """The violations' mask and |out - ref| in float64, computed once for both (each is a few
    passes over float64 copies of the output: in a test run the judge's checks of every call
    were a tenth of its CPU while they computed them twice)."""
    out64 = out.astype(np.float64)
    with np.errstate(invalid="ignore", over="ignore"):
        err = np.subtract(out64, ref)
        np.abs(err, out=err)
        good = err <= allowed_error(ref, atol, rtol)
        nonfinite = ~np.isfinite(ref)
        if nonfinite.any():  # inf where the oracle has the same inf is right
            good |= nonfinite & (out64 == ref)
        return np.logical_not(good, out=good), err


def check_tolerance(out: np.ndarray, ref: np.ndarray, atol: float, rtol: float) -> Finding:
    bad, err = _violations(out, ref, atol, rtol)
    n = int(np.count_nonzero(bad))
    max_err = float(np.max(err, where=np.isfinite(err), initial=0.0))
    if n == 0:
        return ok("tolerance", f"max abs error {max_err:.3g} (atol {atol:g}, rtol {rtol:g})")
    first = first_true(bad)
    return fail(
        "tolerance",
        "out_of_tolerance",
        f"{n} of {bad.size} elements outside atol {atol:g} + rtol {rtol:g}*|ref|; "
        f"max abs error {max_err:.3g}; first at {first}: got {float(out[first])!r}, "
        f"expected {float(ref[first])!r}",
    )


def downcast_width(out: np.ndarray) -> str | None:
    """The narrower float format every finite value of `out` fits exactly, if any.

    A float32 result computed in float16 (or bfloat16) and cast back has only values of the
    narrow format; an honest float32 computation essentially never does (over more than a
    handful of elements). Called only when a tolerance check already failed.
    """
    if out.dtype not in (np.float32, np.float64) or out.size < 16:
        return None
    vals = out[np.isfinite(out)]
    if vals.size < 16 or not _many_distinct(vals, 32):
        return None  # few distinct values (0.25 everywhere, 0 and 1) fit any format honestly
    with np.errstate(over="ignore"):
        if np.array_equal(vals.astype(np.float16).astype(out.dtype), vals):
            return "float16"
    as32 = vals.astype(np.float32)
    if np.array_equal(as32.astype(out.dtype), vals) and not np.any(as32.view(np.uint32) & 0xFFFF):
        return "bfloat16"
    if out.dtype == np.float64 and np.array_equal(as32.astype(np.float64), vals):
        return "float32"
    return None


def _many_distinct(vals: np.ndarray, n: int) -> bool:
    """At least `n` distinct values; a prefix usually settles it without sorting everything."""
    return np.unique(vals[:4096]).size >= n or np.unique(vals).size >= n


def check_precision(out: np.ndarray) -> Finding:
    width = downcast_width(out)
    if width is None:
        return ok("precision")
    return fail(
        "precision",
        "precision_downcast",
        f"every value is exactly a {width} value: computed at {width} precision and cast up to "
        f"{out.dtype}, which loses more than the tolerance allows",
    )


def check_inputs_unmodified(before: list[np.ndarray], after: list[Any]) -> Finding:
    """Bitwise comparison (NaN-safe): the candidate must leave the caller's inputs alone."""
    if len(after) != len(before):
        return fail(
            "inputs_unmodified", "input_mutated", "the worker returned a different input set"
        )
    for i, (b, a) in enumerate(zip(before, after, strict=True)):
        if not isinstance(a, np.ndarray) or a.shape != b.shape or a.dtype != b.dtype:
            return fail("inputs_unmodified", "input_mutated", f"input {i} changed shape or dtype")
        if a.tobytes() != b.tobytes():
            diff = np.frombuffer(a.tobytes(), np.uint8) != np.frombuffer(b.tobytes(), np.uint8)
            changed = int(np.count_nonzero(diff))
            return fail(
                "inputs_unmodified",
                "input_mutated",
                f"input {i} was modified in place ({changed} bytes changed)",
            )
    return ok("inputs_unmodified")


def check_no_alias(aliases: bool) -> Finding:
    if aliases:
        return fail("no_alias", "output_aliases_input", "the output shares memory with an input")
    return ok("no_alias")


def is_stale(out: np.ndarray, earlier: set[bytes]) -> bool:
    """An output byte-identical to one from an earlier call: a replay, not a computation."""
    return digest(out) in earlier


def digest(arr: np.ndarray) -> bytes:
    h = hashlib.sha256(str((arr.shape, arr.dtype.str)).encode())
    h.update(np.ascontiguousarray(arr).view(np.uint8).data)
    return h.digest()
