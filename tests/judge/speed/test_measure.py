"""The speed phase end to end, with small budgets, asserting what the protocol guarantees on a
loaded machine (CI shares its cores), not what a quiet one gives.

The guarantee is about verdicts: never a false one in the wrong direction. A planted 2x
slowdown reads `regressed` or, when load leaves too few pairs, `inconclusive`, and its estimate
is a slowdown; identical code never reads improved/regressed. Tests of identical code use the
task's own `min_pairs` (6): with 3 pairs, all three on one side of 1 happens by chance one time
in four, enough for a false verdict from noise alone. Candidates that cheat while timed must
lose their metric.
"""

from __future__ import annotations

import json
import shutil
import textwrap
from collections.abc import Callable
from pathlib import Path

import pytest

from optarena.cli import main
from optarena.judge import JudgeOptions, aa_control, compare, judge
from optarena.judge.client import native_turn
from optarena.sandbox import SandboxPolicy
from optarena.tasks import BUILTIN_DIR, Task, load_task

BASE = """
import numpy as np


def _norm(x, weight, eps):
    return x / np.sqrt(np.mean(x**2, axis=-1, keepdims=True) + eps) * weight
"""

SLOW_2X = (
    BASE
    + """

def rmsnorm(x, weight, *, eps):
    _norm(x, weight, eps)  # the same work twice: a known, correct 2x slowdown
    return _norm(x, weight, eps)
"""
)

# Correct while judged for correctness (at most 9 calls of one shape in a row there, 3 each for
# three edge workloads of one shape); wrong once a process keeps getting the same shape, which
# is what a timed phase looks like.
WRONG_WHILE_TIMED = (
    BASE
    + """
_last = [None, 0]


def rmsnorm(x, weight, *, eps):
    _last[1] = _last[1] + 1 if _last[0] == x.shape else 1
    _last[0] = x.shape
    out = _norm(x, weight, eps)
    return out * 1.01 if _last[1] > 12 else out
"""
)

# Rewrites every clock the candidate's process has so that every call seems 20x faster.
CLOCK_TAMPER = (
    BASE
    + """
import time

_wall, _cpu = time.perf_counter_ns, time.thread_time_ns
time.perf_counter_ns = lambda: _wall() // 20
time.thread_time_ns = lambda: _cpu() // 20
time.perf_counter = lambda: _wall() / 20e9


def rmsnorm(x, weight, *, eps):
    return _norm(x, weight, eps)
"""
)


# Enough for about three process pairs of the small task below on a busy 2-core machine.
BUDGET_S = 7.0


def _small_rmsnorm(root: Path, min_pairs: int | None) -> Task:
    """rmsnorm with a smaller prefill (quick to measure), optionally fewer pairs to a verdict."""
    shutil.copytree(BUILTIN_DIR / "rmsnorm", root, ignore=shutil.ignore_patterns("__pycache__"))
    spec = root / "task.toml"
    text = spec.read_text()
    edits = {"shape = [2, 256, 4096]": "shape = [2, 64, 4096]"}
    if min_pairs is not None:
        edits["[measurement]\n"] = f"[measurement]\nmin_pairs = {min_pairs}\n"
    for old, new in edits.items():
        assert old in text, f"the rmsnorm task changed: update this fixture ({old!r})"
        text = text.replace(old, new, 1)
    spec.write_text(text)
    return load_task(root)


@pytest.fixture(scope="module")
def small_task(tmp_path_factory: pytest.TempPathFactory) -> Task:
    """Verdicts after 3 pairs: for effects far beyond the noise (the 2x slowdown)."""
    return _small_rmsnorm(tmp_path_factory.mktemp("measure") / "rmsnorm", min_pairs=3)


@pytest.fixture(scope="module")
def same_code_task(tmp_path_factory: pytest.TempPathFactory) -> Task:
    """The task's own min_pairs: for identical code, where any verdict but no_difference or
    inconclusive is false."""
    return _small_rmsnorm(tmp_path_factory.mktemp("measure-aa") / "rmsnorm", min_pairs=None)


SLOWER = ("regressed", "inconclusive")  # the verdicts a real slowdown may get under load


@pytest.fixture
def cand(tmp_path: Path) -> Callable[[str], Path]:
    def make(source: str) -> Path:
        d = tmp_path / f"cand-{abs(hash(source))}"
        d.mkdir()
        (d / "solution.py").write_text(textwrap.dedent(source))
        return d

    return make


def test_a_planted_2x_slowdown_is_regressed(small_task: Task, cand: Callable[[str], Path]) -> None:
    result = judge(small_task, cand(SLOW_2X), JudgeOptions(budget_s=BUDGET_S))
    assert result.verdict == "accepted"
    m = result.metrics
    assert m is not None and m.verdict in SLOWER, m and m.overall
    # The protocol's own cost per call is measured by the null arm and taken off both arms
    # (docs/measurement.md); load shrinks the effect but, both arms interleaved in every
    # round, never inverts it.
    o = m.overall
    assert o.ratio > 1.05, o
    if m.verdict == "regressed":  # what the verdict promises: the interval is a slowdown
        assert o.ratio_ci is not None and o.ratio_ci[0] > 1.0, o
    assert m.stop.reason in ("decided", "precise", "budget")
    # raw samples, in order, for every pair: rounds x 2 slots x calls per slot, both arms and
    # the null arm, whose cost per call is what was subtracted
    assert m.protocol.null_arm
    # which turn the judge took between calls (their dilutions differ): compiled, where built
    assert m.protocol.turn == ("python" if native_turn() is None else "native")
    for w in m.workloads:
        assert w.median_null_ns is not None and 0 < w.median_null_ns < w.median_a_ns
        for p in w.pairs:
            n = len(p.orders) * 2 * p.calls_per_slot
            assert len(p.a_ns) == len(p.b_ns) == len(p.a_cpu_ns) == n
            assert len(p.n_ns) == len(p.n_cpu_ns) == len(p.a_call_ns) == n
            assert p.orders.count("ABBA") == p.orders.count("BAAB") >= 1
            assert all(x != y for x, y in zip(p.orders, p.orders[1:], strict=False))
    assert result.timings_s["measurement"] > 0
    assert m.instructions.available is False


def test_aa_is_never_improved_or_regressed(same_code_task: Task) -> None:
    control = aa_control(same_code_task, budget_s=BUDGET_S, seed=11)
    c = control.comparison
    assert c.overall.verdict in ("no_difference", "inconclusive")
    assert c.arms == {"a": "baseline", "b": "baseline (copy)"}
    assert c.stop.pairs >= 1 and len(c.workloads) == 2


def test_wrong_only_while_timed_is_rejected_without_metrics(
    small_task: Task, cand: Callable[[str], Path]
) -> None:
    result = judge(small_task, cand(WRONG_WHILE_TIMED), JudgeOptions(budget_s=BUDGET_S))
    assert result.verdict == "rejected"
    assert result.metrics is None
    assert "out_of_tolerance" in result.reason_codes
    assert any("while timed" in r for r in result.reasons)


def test_tampered_clocks_change_nothing(same_code_task: Task, cand: Callable[[str], Path]) -> None:
    # With the guard off (which would flag the patched module), the clocks that time the call
    # are still the judge's and the kernel's: the candidate is the baseline, and measures so.
    options = JudgeOptions(budget_s=BUDGET_S, sandbox=SandboxPolicy(guard=False))
    result = judge(same_code_task, cand(CLOCK_TAMPER), options)
    assert result.verdict == "accepted", result.reasons
    m = result.metrics
    # Fooled clocks would read about 0.05 (20x faster). The judge's read the same code as the
    # same, about 1: on a quiet machine within a few percent, but a budget of two or three
    # pairs on a loaded one has read 1.73 (no interval), so what is asserted is what the
    # protocol guarantees whatever the load: nothing near the fooled figure, and no improvement
    # the interval would stand behind by a factor anywhere near it.
    assert m is not None and m.overall.ratio is not None and m.overall.ratio > 0.5, m.overall
    assert m.verdict != "improved" or m.overall.ratio > 0.8, m.overall


@pytest.mark.parametrize(("arm", "note"), [("b", True), ("n", False)])
def test_a_pair_with_a_worker_that_could_not_be_frozen_does_not_count(
    small_task: Task, monkeypatch: pytest.MonkeyPatch, arm: str, note: bool
) -> None:
    """An idle worker that could not be frozen ran beside the others: its pair is no evidence
    (the report used to look at the first worker of pair 0 and carry on with a note). An arm's
    worker is named, and its pair held against that arm (`decide`); the null arm's worker runs
    the judge's code, and its pair is held against neither."""
    # private: monkeypatched (a freeze that fails once)
    from optarena.judge.client import _worker as _client

    real = _client.WorkerClient.freeze
    failed: list[str] = []

    def flaky(self: _client.WorkerClient) -> None:
        if not failed and f"pair0-{arm}" in str(self.log_path) and self.proc is not None:
            failed.append(str(self.log_path))
            self.freeze_problem = "cannot freeze the worker: a test's broken freezer"
            return
        real(self)

    monkeypatch.setattr(_client.WorkerClient, "freeze", flaky)
    base = small_task.baseline_dir
    result = compare(small_task, base, base, JudgeOptions(budget_s=BUDGET_S, seed=5))
    assert failed and result.comparison is not None
    comp = result.comparison
    who = "arm b's worker" if arm == "b" else "the null arm's worker"
    assert comp.stop.discarded and f"{who} could not be frozen" in comp.stop.discarded[0]
    assert all(w.pairs[0].pair != 0 for w in comp.workloads if w.pairs)
    assert ("discarded_pairs" in comp.overall.notes) is note
    assert comp.overall.verdict not in ("improved", "no_difference") or not note


def _stall_clock(monkeypatch: pytest.MonkeyPatch, every_call: bool) -> list[str]:
    """Pair 0's arm b gets a clock that gave the last call of each run (or every call) no
    time; returns the runs it touched."""
    # private: monkeypatched (a clock that gives one worker's calls nothing)
    from optarena.judge.client import _worker as _client

    real = _client.WorkerClient.run_calls
    hit: list[str] = []

    def stalled(self: _client.WorkerClient, *args: object, **kwargs: object) -> object:
        results = real(self, *args, **kwargs)  # type: ignore[arg-type]
        if "pair0-b" in str(self.log_path) and results:
            for r in results if every_call else results[-1:]:
                if r.cpu_ns is not None:
                    r.cpu_ns = 0
                else:
                    r.wall_ns = 0
            hit.append(str(self.log_path))
        return results

    monkeypatch.setattr(_client.WorkerClient, "run_calls", stalled)
    return hit


def test_a_call_whose_clock_gave_it_no_time_counts_and_is_not_a_crash(
    small_task: Task, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Beside a CPU-burning neighbour the cgroup's CPU count once gave a timed call a tile of
    zero, and the round's ratio raised ValueError out of the judge. A tile of zero is time
    accounted late (to the next call); the round's mean is over every call, so the pair
    counts as it is: discarding it would let whatever causes a late count choose the pairs."""
    hit = _stall_clock(monkeypatch, every_call=False)
    base = small_task.baseline_dir
    result = compare(small_task, base, base, JudgeOptions(budget_s=BUDGET_S, seed=5))
    assert hit and result.comparison is not None and result.failure is None
    assert not result.comparison.stop.discarded
    assert any(p.pair == 0 for w in result.comparison.workloads for p in w.pairs)


def test_a_round_without_time_is_discarded_not_a_crash(
    small_task: Task, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Negative control: a clock that gave every call of an arm nothing has measured nothing;
    that pair does not count and says why."""
    hit = _stall_clock(monkeypatch, every_call=True)
    base = small_task.baseline_dir
    result = compare(small_task, base, base, JudgeOptions(budget_s=BUDGET_S, seed=5))
    assert hit and result.comparison is not None
    stop = result.comparison.stop
    assert stop.discarded and "no time" in stop.discarded[0], stop
    assert "arm b" in stop.discarded[0]
    assert "discarded_pairs" in result.comparison.overall.notes  # held against arm b
    assert all(w.pairs[0].pair != 0 for w in result.comparison.workloads if w.pairs)


def test_compare_two_candidates(small_task: Task, cand: Callable[[str], Path]) -> None:
    slow = cand(SLOW_2X)
    result = compare(small_task, small_task.baseline_dir, slow, JudgeOptions(budget_s=BUDGET_S))
    assert result.a.verdict == result.b.verdict == "accepted"
    assert result.comparison is not None and result.failure is None
    assert result.comparison.overall.verdict in SLOWER
    assert (result.comparison.overall.ratio or 0) > 1.05
    wrong = cand(WRONG_WHILE_TIMED)
    r2 = compare(small_task, wrong, small_task.baseline_dir, JudgeOptions(budget_s=BUDGET_S))
    assert r2.comparison is None and r2.failure is not None and r2.failure.startswith("arm a")


def test_cli_flags(
    small_task: Task, cand: Callable[[str], Path], capsys: pytest.CaptureFixture[str]
) -> None:
    base = str(small_task.baseline_dir)
    assert main(["judge", str(small_task.root), base, "--no-measure", "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["metrics"] is None
    assert main(["judge", str(small_task.root), base, "--budget-s", "-1"]) == 2
    assert main(["judge", str(small_task.root), base, "--min-effect", "1.5"]) == 2
    assert main(["compare", str(small_task.root), base, str(tmp_missing := base + "-nope")]) == 2
    assert not Path(tmp_missing).exists()
    code = main(
        ["compare", str(small_task.root), base, str(cand(SLOW_2X)), "--budget-s", "3", "--json"]
    )
    out = json.loads(capsys.readouterr().out)
    assert code == 0, out["failure"] or out["a"]["reasons"] + out["b"]["reasons"]
    assert out["comparison"]["stop"]["pairs"] >= 1
