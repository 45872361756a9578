"""Each correctness check as a pure function, on literal arrays."""

from __future__ import annotations

import numpy as np

from optarena.judge.correctness import (
    check_dtype,
    check_finite,
    check_shape,
    check_tolerance,
    check_type,
)

# private: the checks' pure helpers, tested on literal arrays
from optarena.judge.correctness._checks import (
    check_inputs_unmodified,
    check_no_alias,
    digest,
    downcast_width,
    first_true,
    is_stale,
    tolerance_violations,
)

REF = np.array([1.0, -2.0, 0.0, 1e-3])


def test_type() -> None:
    assert check_type(np.zeros(2)).passed
    bad = check_type({"__obj__": "numpy.memmap"})
    assert not bad.passed and bad.code == "wrong_type" and "numpy.memmap" in bad.detail
    assert check_type([1.0, 2.0]).code == "wrong_type"


def test_shape_and_dtype() -> None:
    assert check_shape(np.zeros(4), REF).passed
    assert check_shape(np.zeros((4, 1)), REF).code == "wrong_shape"
    assert check_dtype(np.zeros(4, np.float32), np.dtype(np.float32)).passed
    f = check_dtype(np.zeros(4, np.float64), np.dtype(np.float32))
    assert f.code == "wrong_dtype" and "float32" in f.detail


def test_finite_only_where_reference_is_finite() -> None:
    assert check_finite(np.array([1.0, np.inf]), np.array([1.0, np.inf])).passed
    f = check_finite(np.array([1.0, np.nan, 0.0, 1.0]), REF)
    assert f.code == "non_finite" and "1 non-finite" in f.detail and "(1,)" in f.detail


def test_tolerance_boundaries() -> None:
    atol, rtol = 1e-5, 1e-4
    at_edge = REF + (atol + rtol * np.abs(REF)) * 0.999
    assert check_tolerance(at_edge.astype(np.float64), REF, atol, rtol).passed
    over = REF.copy()
    over[1] += 1e-3
    f = check_tolerance(over, REF, atol, rtol)
    assert f.code == "out_of_tolerance" and "1 of 4" in f.detail and "(1,)" in f.detail
    # NaN never passes a tolerance, even where comparisons with NaN are vacuous.
    assert tolerance_violations(np.array([np.nan]), np.array([1.0]), 1.0, 1.0).all()
    # Matching infinities are equal; an infinity of the wrong sign is not.
    assert not tolerance_violations(np.array([np.inf]), np.array([np.inf]), 0, 0).any()
    assert tolerance_violations(np.array([-np.inf]), np.array([np.inf]), 0, 0).all()


def test_tolerance_reports_the_largest_finite_error() -> None:
    """The mask and the errors come from one computation: the count covers NaN and inf, the
    largest error only the finite ones, and a float32 output is compared in float64."""
    out = np.array([1.0, np.nan, np.inf, 2.0, np.inf], dtype=np.float32)
    ref = np.array([1.25, 1.0, 1.0, 2.0, np.inf])
    f = check_tolerance(out, ref, 0.1, 0.0)
    assert f.code == "out_of_tolerance"
    assert "3 of 5 elements" in f.detail and "max abs error 0.25" in f.detail
    assert "first at (0,)" in f.detail
    right = check_tolerance(np.array([np.inf, 3.0]), np.array([np.inf, 3.0]), 0.0, 0.0)
    assert right.passed and "max abs error 0 " in right.detail
    assert check_tolerance(np.array([np.nan]), np.array([np.nan]), 1.0, 1.0).code == (
        "out_of_tolerance"
    )


def test_inputs_unmodified_is_bitwise() -> None:
    a = np.array([1.0, np.nan], dtype=np.float32)
    assert check_inputs_unmodified([a], [a.copy()]).passed
    b = a.copy()
    b[0] = -1.0
    f = check_inputs_unmodified([a], [b])
    assert f.code == "input_mutated" and "input 0" in f.detail
    neg_zero = np.array([-0.0, np.nan], dtype=np.float32)
    assert not check_inputs_unmodified([np.array([0.0, np.nan], np.float32)], [neg_zero]).passed
    assert not check_inputs_unmodified([a], []).passed


def test_alias_and_stale() -> None:
    assert check_no_alias(False).passed
    assert check_no_alias(True).code == "output_aliases_input"
    x = np.arange(4.0)
    seen = {digest(x)}
    assert is_stale(x.copy(), seen)
    assert not is_stale(x + 1, seen)
    assert not is_stale(x.reshape(2, 2), seen)


def test_the_first_bad_element_is_named_by_its_index() -> None:
    mask = np.zeros((3, 4, 5), dtype=bool)
    mask[1, 2, 3] = mask[2, 0, 0] = True
    assert first_true(mask) == (1, 2, 3)
    assert first_true(np.array(True)) == ()
    out, ref = np.array([[1.0, 2.0], [3.0, 9.0]]), np.array([[1.0, 2.0], [3.0, 4.0]])
    found = check_tolerance(out, ref, 1e-6, 1e-6)
    assert "first at (1, 1): got 9.0, expected 4.0" in found.detail


def test_a_downcast_is_seen_however_the_distinct_values_lie() -> None:
    """Few distinct values at the front, many later: still many distinct values."""
    vals = np.concatenate([np.full(5000, 0.5), np.linspace(-1, 1, 5000)]).astype(np.float32)
    assert downcast_width(vals.astype(np.float16).astype(np.float32)) == "float16"
    assert downcast_width(np.full(10_000, 0.5, dtype=np.float32)) is None


def test_a_guard_report_of_unknown_kind_is_a_protocol_violation_not_a_new_code() -> None:
    """The guard's report reaches the judge through the candidate's process, which can write
    any code: a code outside the documented set never enters a record (a terminal escape in
    one would have reached `trials`), and the candidate is rejected all the same."""
    from optarena.judge.correctness import guard_findings

    reply = {
        "violations": [
            {"code": "network_access", "detail": "connect to 10.0.0.1"},
            {"code": "\x1b[2Kaccepted", "detail": "forged"},
        ]
    }
    found = guard_findings(reply)
    assert [f.code for f in found] == ["network_access", "protocol_violation"]
    assert "unknown kind" in found[1].detail and all(not f.passed for f in found)
