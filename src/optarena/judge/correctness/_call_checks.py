"""What one call returned, as the judge sees it, and the call contract's checks.

Both phases use these on a `CallResult`: the output is the judge's copy from shared memory, the
input check compares the judge's own mapping with the bytes it wrote. What the worker loop says
(`aliases`, `lazy`) can only add a rejection, never remove one.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from optarena.judge.client import CallResult
from optarena.judge.correctness._checks import Finding, fail, ok


def returned(result: CallResult, expected_shape: tuple[int, ...]) -> np.ndarray | Finding:
    """The output array the judge read, or the failed check that says why there is none."""
    if result.output is not None:
        return result.output
    desc: Any = result.reply.get("output")
    if isinstance(desc, dict) and "__obj__" in desc:
        got = str(desc["__obj__"])[:200]
        return fail("output_type", "wrong_type", f"expected exactly numpy.ndarray, got {got}")
    if isinstance(desc, dict) and desc.get("too_large") is True:
        shape = desc.get("shape")
        if isinstance(shape, list) and tuple(shape) != expected_shape:
            detail = f"expected shape {expected_shape}, got {tuple(shape)[:8]}"
            return fail("shape", "wrong_shape", detail)
        return fail("output_type", "output_too_large", "the output does not fit the output area")
    return fail("output_type", "protocol_violation", "the reply does not describe the output")


def contract_findings(result: CallResult) -> list[Finding]:
    """Inputs left alone (checked by the judge on its own bytes), no aliasing, nothing lazy."""
    found = []
    if result.input_changed is not None:
        detail = f"input {result.input_changed} was modified in place"
        found.append(fail("inputs_unmodified", "input_mutated", detail))
    else:
        found.append(ok("inputs_unmodified"))
    if result.reply.get("aliases"):
        found.append(fail("no_alias", "output_aliases_input", "the output shares input memory"))
    else:
        found.append(ok("no_alias"))
    device_ns = result.reply.get("device_ns")
    if device_ns is not None and (
        type(device_ns) is not int or not 0 <= device_ns <= result.wall_ns
    ):
        # CUDA event time comes from the candidate's process: it can only be a reason to
        # reject, and it can never exceed the judge's own clock around the same request.
        detail = f"device time {str(device_ns)[:40]} ns next to {result.wall_ns} ns of wall time"
        found.append(fail("device_time", "timing_tampered", detail))
    lazy = result.reply.get("lazy")
    if lazy:
        found.append(fail("lazy", "lazy_output", f"the output is {str(lazy)[:200]}"))
    return found
