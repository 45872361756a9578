"""Runs of timed calls on a real worker, with the judge's turn compiled and in Python."""

from __future__ import annotations

import textwrap
from collections.abc import Callable, Iterator
from pathlib import Path

import numpy as np
import pytest

from optarena.judge.client import WorkerClient
from optarena.tasks import BUILTIN_DIR, load_task

Calls = list[tuple[list[np.ndarray], dict[str, float]]]


def run_inputs(n: int) -> Calls:
    """`n` rmsnorm calls on small inputs, each different."""
    rng = np.random.default_rng(0)
    x = rng.standard_normal((4, 256), dtype=np.float32)
    return [([x + i, np.ones(256, np.float32)], {"eps": 1e-5}) for i in range(n)]


@pytest.fixture(params=["native", "python"])
def turn(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> str:
    """With the judge's turn compiled (where this machine can build it) and in Python (where
    it cannot): the two must judge alike."""
    # private: the switch between the compiled turn and the Python one
    from optarena.judge.client import _turn

    if request.param == "python":
        monkeypatch.setattr(_turn, "native", lambda: None)
    elif _turn.native() is None:
        pytest.skip(f"no compiled turn here: {_turn.why_not()}")
    return str(request.param)


@pytest.fixture
def calls_of() -> Callable[[int], Calls]:
    return run_inputs


@pytest.fixture
def worker_of(tmp_path: Path, turn: str) -> Iterator[Callable[[str], WorkerClient]]:
    """A started worker with `source` as rmsnorm's solution.py, loaded and bound (closed
    after the test, whatever it did)."""
    started: list[WorkerClient] = []

    def start(source: str) -> WorkerClient:
        task = load_task(BUILTIN_DIR / "rmsnorm")
        d = tmp_path / f"cand{len(started)}"
        d.mkdir()
        (d / "solution.py").write_text(textwrap.dedent(source))
        log = tmp_path / f"w{len(started)}.log"
        w = WorkerClient(d, task.spec.limits, log, arena_bytes=(1 << 20, 1 << 20))
        started.append(w)
        w.start()
        w.request({"op": "hello"}, timeout=30)
        loaded = w.request({"op": "load", "file": "solution.py", "function": "rmsnorm"}, timeout=30)
        assert loaded["ok"], loaded
        assert w.bind_request(0, *run_inputs(1)[0], timeout=30)["ok"]
        return w

    yield start
    for w in started:
        w.close()
