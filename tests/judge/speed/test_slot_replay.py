"""Each slot opens with an uncounted replay of an input its worker already answered.

What the replay must never become: a look at a counted input before its window (a memoizing
candidate would then answer a counted call for free), a counted call itself, or a place where
CPU the cgroup used while frozen escapes the count (`tests/judge/client/test_call_run.py`).
Asserted on what every worker was sent, whatever the machine's load.
"""

from __future__ import annotations

import hashlib
import shutil
from collections import defaultdict
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from optarena.judge.client import CallResult, WorkerClient

# private: the pair session's slots, driven with a recording worker
from optarena.judge.speed import _pair as pair
from optarena.judge.speed._measure import Measurement, MeasurePlan
from optarena.tasks import BUILTIN_DIR, load_task

Sent = tuple[int, list[bytes], int]  # template, each call's fingerprint, uncounted calls first


def _fingerprint(args: Sequence[Any], kwargs: dict[str, Any]) -> bytes:
    h = hashlib.sha256()
    for v in [*args, *kwargs.values()]:
        h.update(
            np.ascontiguousarray(v).tobytes() if isinstance(v, np.ndarray) else repr(v).encode()
        )
    return h.digest()


@pytest.fixture
def sent(monkeypatch: pytest.MonkeyPatch) -> dict[int, list[Sent]]:
    """Every run of calls, per worker, as the judge sent it."""
    runs: dict[int, list[Sent]] = defaultdict(list)
    real = WorkerClient.run_calls

    def record(
        self: WorkerClient,
        template: int,
        calls: Sequence[tuple[Sequence[Any], dict[str, Any]]],
        timeout: Callable[[], float],
        max_output_bytes: int,
        warm: int = 0,
    ) -> list[CallResult]:
        runs[id(self)].append((template, [_fingerprint(a, k) for a, k in calls], warm))
        return real(self, template, calls, timeout, max_output_bytes, warm)

    monkeypatch.setattr(WorkerClient, "run_calls", record)
    return runs


def test_a_replay_carries_only_an_answered_input_and_every_counted_input_is_new(
    tmp_path: Path, sent: dict[int, list[Sent]], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(pair, "REPLAY_BELOW_NS", 10**12)  # every workload, whatever the load
    root = tmp_path / "rmsnorm"
    shutil.copytree(BUILTIN_DIR / "rmsnorm", root, ignore=shutil.ignore_patterns("__pycache__"))
    spec = root / "task.toml"
    spec.write_text(spec.read_text().replace("shape = [2, 256, 4096]", "shape = [2, 16, 4096]"))
    task = load_task(root)
    plan = MeasurePlan.from_task(task, budget_s=1.0)
    base = task.baseline_dir
    log = tmp_path / "log"
    log.mkdir()
    out = Measurement(task, (base, base), plan, seed=5, stream=0, log_dir=log).run(
        {"a": "baseline", "b": "baseline (copy)"}
    )
    assert out.comparison is not None and out.comparison.protocol.slot_replay
    assert len(sent) >= 3  # a, b and the null arm of at least one pair
    for runs in sent.values():
        answered: dict[int, list[bytes]] = defaultdict(list)  # per template, in order
        for template, calls, warm in runs:
            seen = answered[template]
            # the first run of a workload is its warm-up; every later one opens with a replay
            assert warm == (1 if seen else 0)
            if warm:
                assert calls[0] == seen[-1], "the replay is the last input this worker answered"
            for f in calls[warm:]:
                assert f not in seen, "a counted input this worker had seen before"
                seen.append(f)
