"""The correctness phase: is the candidate's output right, and did it keep the call contract?

Owns the phase itself (`_phase`: fresh inputs from a secret seed, the candidate in its own
worker, every output compared with the float64 oracle in the judge's process), the checks as
pure functions over one call's output (`_checks`, each a `Finding`), the call contract's checks
on what one call returned (`_call_checks`), and what the judge tells a worker about loading the
entry (`_native`: the language, and for C the judge's fixed build). The speed phase reuses the
checks, the inputs' derivation and the load request, so timed outputs are judged the same way.
"""

from optarena.judge.correctness._call_checks import contract_findings, returned
from optarena.judge.correctness._checks import (
    Finding,
    allowed_error,
    check_dtype,
    check_finite,
    check_shape,
    check_tolerance,
    check_type,
    fail,
)
from optarena.judge.correctness._native import load_request
from optarena.judge.correctness._phase import (
    Recorder,
    area_sizes,
    array_inputs,
    derive_seed,
    expected_dtype,
    guard_findings,
    run_correctness,
    stray_findings,
)

__all__ = [
    "Finding",
    "Recorder",
    "allowed_error",
    "area_sizes",
    "array_inputs",
    "check_dtype",
    "check_finite",
    "check_shape",
    "check_tolerance",
    "check_type",
    "contract_findings",
    "derive_seed",
    "expected_dtype",
    "fail",
    "guard_findings",
    "load_request",
    "returned",
    "run_correctness",
    "stray_findings",
]
