"""Every control of every built-in task, through the real worker process."""

from __future__ import annotations

from pathlib import Path

import pytest

import optarena.qualify
from optarena.judge import JudgeOptions, JudgeResult, judge
from optarena.qualify import qualify_task
from optarena.tasks import Task, builtin_task_ids, resolve_task, unmet_requirements

# Tasks this machine can run (the CUDA variants need a GPU: tests/tasks/test_library_requirements.py
# covers their CPU side and their refusal here).
RUNNABLE = [
    t for t in builtin_task_ids() if not unmet_requirements(resolve_task(t).spec.requirements)
]


def _on_one_worker(task_id: str) -> pytest.MarkDecorator:
    """A task's control tests and its qualification on one xdist worker, in that order, so the
    qualification finds every control's judgement in `_JUDGED` (a worker that judged none of
    them would judge every control again)."""
    return pytest.mark.xdist_group(f"controls-{task_id}")


CONTROLS = [
    pytest.param(tid, c.name, marks=_on_one_worker(tid))
    for tid in RUNNABLE
    for c in resolve_task(tid).spec.controls
]
QUALIFIED = [pytest.param(tid, marks=_on_one_worker(tid)) for tid in RUNNABLE]

# Each control's judgement (correctness only), kept for the qualification test below, which
# would otherwise judge every control a second time.
_JUDGED: dict[tuple[str, str], JudgeResult] = {}


def judge_control(
    task: Task, control_dir: Path, options: JudgeOptions | None = None
) -> JudgeResult:
    """`judge` for a control without measurement, once per (task, control) in this session."""
    assert options is None or not options.measure
    key = (task.sha256, str(control_dir))
    if key not in _JUDGED:
        _JUDGED[key] = judge(task, control_dir, JudgeOptions(measure=False))
    return _JUDGED[key]


@pytest.mark.parametrize(("task_id", "control"), CONTROLS)
def test_control_gets_its_declared_verdict(task_id: str, control: str) -> None:
    task = resolve_task(task_id)
    c = next(c for c in task.spec.controls if c.name == control)
    result = judge_control(task, task.root / c.dir)
    assert result.verdict == c.expect, result.reasons
    if c.expect == "rejected":
        assert c.reason in result.reason_codes
        assert result.metrics is None
        assert result.reasons and all(":" in r for r in result.reasons)
        failed = [ch for ch in result.checks if not ch.passed]
        assert failed and all(ch.code for ch in failed)
    else:
        assert result.reasons == [] and all(ch.passed for ch in result.checks)
        names = {ch.name for ch in result.checks}
        assert {
            "load",
            "call",
            "output_type",
            "shape",
            "dtype",
            "finite",
            "tolerance",
            "inputs_unmodified",
            "no_alias",
        } <= names
        workloads = {ch.workload for ch in result.checks if ch.workload}
        assert workloads == {w.name for w in task.spec.workloads}


def test_identity_fields_recorded() -> None:
    task = resolve_task("softmax")
    r1 = judge(task, task.baseline_dir, JudgeOptions(measure=False))
    r2 = judge(task, task.baseline_dir, JudgeOptions(measure=False))
    assert r1.task.sha256 == r2.task.sha256 == task.sha256
    assert r1.candidate.sha256 == r2.candidate.sha256
    assert r1.candidate.files == ["solution.py"]
    assert r1.judge.sha256 and r1.runtime["sha256"]
    assert r1.seed != r2.seed  # a fresh secret seed per judgement


def test_seed_replay_is_deterministic() -> None:
    task = resolve_task("rmsnorm")
    bad = task.root / "controls" / "missing_weight"
    a = judge(task, bad, JudgeOptions(seed=1234, measure=False))
    b = judge(task, bad, JudgeOptions(seed=1234, measure=False))
    assert a.seed == b.seed == 1234
    assert a.reasons == b.reasons


# Every CPU task this machine can run qualifies: its controls' verdicts (judged above, reused
# here) and an A/A run. rmsnorm gets the default A/A budget; the others a short one
# to keep the suite's time (each A/A then fits few pairs and usually reads inconclusive: it
# catches a protocol that calls identical code improved or regressed, not small noise; the
# full-budget qualification is `optarena task qualify`, run by hand).
FULL_AA = {"rmsnorm"}
SHORT_AA_BUDGET_S = 3.0


@pytest.mark.parametrize("task_id", QUALIFIED)
def test_qualify_passes(task_id: str, monkeypatch: pytest.MonkeyPatch) -> None:
    task = resolve_task(task_id)
    assert task.spec.requirements.device == "cpu"
    monkeypatch.setattr(optarena.qualify, "judge", judge_control)
    if task_id in FULL_AA:
        report = qualify_task(task)
    else:
        report = qualify_task(task, aa_budget_s=SHORT_AA_BUDGET_S)
    assert report.qualified, report.problems
    assert all(row.ok for row in report.controls)
    assert report.aa is not None and report.aa.ok
