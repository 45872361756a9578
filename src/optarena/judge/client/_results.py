"""What a worker's calls come back as: a `CallResult` per call, or a `WorkerError` when the
worker could not answer (kept apart so that the client and its run of timed calls share them)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np


@dataclass
class CallResult:
    """One call as the judge saw it: the reply (data only), the output read from shared memory
    after the worker was frozen, the judge's wall time and the kernel's CPU time of the call,
    and the first input whose bytes changed (None: all intact)."""

    reply: dict[str, Any]
    output: np.ndarray | None
    wall_ns: int
    cpu_ns: int | None
    input_changed: int | None
    call_wall_ns: int | None = None  # `run_calls`: from the go frame to the answer only


class WorkerError(Exception):
    """The worker could not answer: `code` is `timeout`, `protocol_violation`, or how it ended
    (`aborted`, `cpu_limit`, `worker_crashed`; see `exit_reason`)."""

    def __init__(self, code: str, detail: str) -> None:
        self.code = code
        self.detail = detail
        super().__init__(f"{code}: {detail}")
