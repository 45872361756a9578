"""Candidates that write forged, malformed frames to the worker's reply pipe.

The candidate runs inside the worker and can find the reply pipe (a pipe it holds open for
writing) in /proc/self/fd. Whatever it writes there, the judge's decoder answers with a
protocol error: the verdict is a rejection with `protocol_violation`, never a traceback, never
`judge_error` (which would mean the decoder let another exception through), never a hang.
"""

from __future__ import annotations

import time

import pytest

from adversarial._support import JudgeFn
from optarena.judge import JudgeOptions
from optarena.tasks import Task

# Finds every pipe this process may write to, and writes FRAME (a bytes expression) to each.
FORGE = """
import json, os, struct
import numpy as np

def _frame(header, count=0, payload=b""):
    if not isinstance(header, bytes):
        header = json.dumps(header).encode()
    return b"OAW1" + struct.pack("!II", len(header), count) + header + payload

def _forge():
    frame = {frame}
    fds = []
    for name in os.listdir("/proc/self/fd"):
        try:
            fd = int(name)
            if not os.readlink(f"/proc/self/fd/{{fd}}").startswith("pipe:"):
                continue
            with open(f"/proc/self/fdinfo/{{fd}}") as f:
                flags = int(f.read().split("flags:")[1].split()[0], 8)
        except (OSError, IndexError, ValueError):
            continue
        if flags & 3 == os.O_WRONLY:
            fds.append(fd)
    for fd in fds:
        try:
            os.write(fd, frame)
        except OSError:
            pass
{when}
def rmsnorm(x, weight, *, eps):
    {in_call}
    return x / np.sqrt(np.mean(x * x, axis=-1, keepdims=True) + eps) * weight
"""


def _with_array(dtype: str, shape: list[int], index: str = "0") -> str:
    """A reply whose output is an array description (8 bytes of payload follow)."""
    spec = f'{{"__nd__": {index}, "dtype": {dtype!r}, "shape": {shape}}}'
    return f'_frame({{"id": 2, "ok": True, "output": {spec}}}, 1, b"\\0" * 8)'


FRAMES = {
    # The prefix announces a 4 GiB header, or 4 billion arrays.
    "huge_header_length": 'b"OAW1" + struct.pack("!II", 2**32 - 1, 0)',
    "huge_array_count": 'b"OAW1" + struct.pack("!II", 2, 2**32 - 1) + b"{}"',
    # np.dtype answers these with SyntaxError and ValueError.
    "dtype_syntax_error": _with_array("i4,(2,", [1]),
    "dtype_value_error": _with_array("(99999999999,)f8", [1]),
    # The product overflows int64; then one too large to allocate.
    "shape_overflow": _with_array("<f8", [2**62, 2**62]),
    "shape_too_large": _with_array("<f8", [2**40, 2**20]),
    "deep_json": '_frame(b"[" * 200_000 + b"]" * 200_000)',
    "time_10_pow_400": '_frame(b\'{"id": 2, "ok": true, "t": 1\' + b"0" * 400 + b"}")',
    "time_infinite": '_frame(b\'{"id": 2, "ok": true, "t": 1e400}\')',
    "nan": '_frame(b\'{"id": 2, "ok": true, "t": NaN}\')',
    "bad_utf8": '_frame(b\'{"id": 2, "ok": true, "error": "\\xff\\xfe"}\')',
    "lone_surrogate": '_frame(b\'{"id": 2, "ok": false, "error": "\\\\ud800"}\')',
    "not_an_object": "_frame([1, 2, 3])",
    "bool_array_index": _with_array("<f8", [1], index="True"),
}

IN_CALL = {"dtype_syntax_error", "shape_overflow", "time_10_pow_400", "deep_json"}
CASES = [(name, "import") for name in FRAMES] + [(name, "call") for name in sorted(IN_CALL)]


def source(frame: str, when: str) -> str:
    return FORGE.format(
        frame=frame,
        when="_forge()\n" if when == "import" else "",
        in_call="_forge()" if when == "call" else "pass",
    )


@pytest.mark.parametrize(("frame", "when"), CASES, ids=[f"{f}-{w}" for f, w in CASES])
def test_malformed_reply_frames_are_protocol_violations(
    frame: str, when: str, tasks: dict[str, Task], judge_source: JudgeFn
) -> None:
    t0 = time.monotonic()
    task = tasks["rmsnorm"]
    result = judge_source(task, source(FRAMES[frame], when), JudgeOptions(measure=False))
    assert result.verdict == "rejected"
    assert "protocol_violation" in result.reason_codes, result.reasons
    assert "judge_error" not in result.reason_codes, result.reasons
    assert result.metrics is None
    assert time.monotonic() - t0 < 30


def test_the_forging_candidate_is_otherwise_honest(
    tasks: dict[str, Task], judge_source: JudgeFn
) -> None:
    """The same source with a frame of zero bytes is accepted: what gets rejected above is the
    frame, not the way the candidate finds the pipe."""
    result = judge_source(tasks["rmsnorm"], source('b""', "import"), JudgeOptions(measure=False))
    assert result.verdict == "accepted", result.reasons
