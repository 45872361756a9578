"""The judge's side of a worker process: starting it, talking to it, ending it.

Owns `WorkerClient` (one fresh interpreter running `worker/_loop.py` in the sandbox, spoken to
over two pipes, JSON requests and the timed path's binary frames), the shared memory it reads
and writes (`_arena`: sealed read-only inputs, the output area), the timed path's call layouts
(`_layout`), the judge's side of a run of timed calls (`_calls`, with `_heap`: its turn between
two calls kept small), what calls come back as (`_results`), and what every worker starts with
(`_worker_env`: environment, resource limits, the meaning of its way of ending). Both phases
use it: correctness through one worker, speed through the pair's arms and the null arm. What
runs *inside* the worker is `judge/worker/`.
"""

from optarena.judge.client._arena import arena_bytes
from optarena.judge.client._blas import one_blas_thread
from optarena.judge.client._heap import kept_heap
from optarena.judge.client._results import CallResult, WorkerError
from optarena.judge.client._turn import native as native_turn
from optarena.judge.client._worker import WorkerClient

__all__ = [
    "CallResult",
    "WorkerClient",
    "WorkerError",
    "arena_bytes",
    "kept_heap",
    "native_turn",
    "one_blas_thread",
]
