"""An unexpected exception anywhere in judging is a recorded rejection (`judge_error`) with the
judge's message, never a crash; bad user input and KeyboardInterrupt still propagate."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any, NoReturn

import pytest

from optarena.errors import OptarenaError
from optarena.judge import JudgeOptions, JudgeResult, judge

# private: monkeypatched (a phase that raises)
from optarena.judge import _judge as judge_module
from optarena.tasks import Task

HONEST = (
    "import numpy as np\ndef rmsnorm(x, weight, *, eps):\n"
    "    return x / np.sqrt(np.mean(x * x, axis=-1, keepdims=True) + eps) * weight\n"
)


def _raiser(error: BaseException) -> Callable[..., NoReturn]:
    def phase_that_fails(*args: Any, **kwargs: Any) -> NoReturn:
        raise error

    return phase_that_fails


def _judge(task: Task, cand: Path, **kw: Any) -> JudgeResult:
    return judge(task, cand, JudgeOptions(seed=1234, measure=False, **kw))


def _assert_judge_error(result: JudgeResult, *fragments: str) -> str:
    assert result.verdict == "rejected"
    assert result.reason_codes == ["judge_error"]
    assert result.metrics is None
    (check,) = result.checks
    assert check.code == "judge_error" and not check.passed and check.name == "judge"
    for fragment in fragments:
        assert fragment in check.detail, check.detail
    assert result.reasons == [f"judge_error: {check.detail}"]
    JudgeResult.model_validate_json(result.model_dump_json())  # it can be written and read
    return check.detail


def test_an_exception_in_a_phase_is_a_judge_error_rejection(
    task_copy: Callable[..., Task],
    candidate: Callable[[str], Path],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    task, cand = task_copy("rmsnorm"), candidate(HONEST)
    error = RuntimeError("the correctness phase broke (planted by a test)")
    monkeypatch.setattr(judge_module, "run_correctness", _raiser(error))
    result = _judge(task, cand)
    detail = _assert_judge_error(
        result, "RuntimeError", "the correctness phase broke (planted by a test)", "Traceback"
    )
    assert "phase_that_fails" in detail  # the traceback tail names where it happened
    assert result.seed == 1234
    assert result.task.id == task.id and result.task.sha256 == task.sha256
    assert result.candidate.sha256 == task.candidate_sha256(cand)
    assert result.candidate.files == ["solution.py"]


def test_an_exception_before_any_worker_runs_is_a_judge_error(
    task_copy: Callable[..., Task],
    candidate: Callable[[str], Path],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """E.g. copying the candidate fails (a file that vanished, a permission the judge lacks)."""
    monkeypatch.setattr(judge_module, "copy_candidate", _raiser(PermissionError(13, "denied")))
    _assert_judge_error(_judge(task_copy("rmsnorm"), candidate(HONEST)), "PermissionError")


def test_the_message_is_bounded_and_survives_a_broken_str(
    task_copy: Callable[..., Task],
    candidate: Callable[[str], Path],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    task, cand = task_copy("rmsnorm"), candidate(HONEST)
    monkeypatch.setattr(judge_module, "run_correctness", _raiser(ValueError("x" * 100_000)))
    assert len(_assert_judge_error(_judge(task, cand), "ValueError")) < 5000

    class Unprintable(Exception):
        def __str__(self) -> str:
            raise RuntimeError("no message")

    monkeypatch.setattr(judge_module, "run_correctness", _raiser(Unprintable()))
    _assert_judge_error(_judge(task, cand), "Unprintable")


def test_an_unhashable_candidate_still_gets_a_verdict(
    task_copy: Callable[..., Task],
    candidate: Callable[[str], Path],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """When the candidate directory is what broke the judge, the result records no hash."""
    task, cand = task_copy("rmsnorm"), candidate(HONEST)
    monkeypatch.setattr(judge_module, "copy_candidate", _raiser(OSError("unreadable")))
    monkeypatch.setattr(type(task), "candidate_sha256", _raiser(OSError("unreadable")))
    result = _judge(task, cand)
    _assert_judge_error(result, "OSError", "unreadable")
    assert result.candidate.sha256 == "" and result.candidate.files == []


def test_user_errors_and_interrupts_still_propagate(
    task_copy: Callable[..., Task],
    candidate: Callable[[str], Path],
    monkeypatch: pytest.MonkeyPatch,
    tmp_path: Path,
) -> None:
    task, cand = task_copy("rmsnorm"), candidate(HONEST)
    with pytest.raises(OptarenaError, match="does not exist"):
        _judge(task, tmp_path / "no-such-candidate")
    monkeypatch.setattr(judge_module, "run_correctness", _raiser(OptarenaError("bad option")))
    with pytest.raises(OptarenaError, match="bad option"):
        _judge(task, cand)
    monkeypatch.setattr(judge_module, "run_correctness", _raiser(KeyboardInterrupt()))
    with pytest.raises(KeyboardInterrupt):
        _judge(task, cand)


def test_a_worker_sandbox_that_does_not_start_is_a_judge_error_and_nothing_runs(
    task_copy: Callable[..., Task],
    candidate: Callable[[str], Path],
    monkeypatch: pytest.MonkeyPatch,
    tmp_path: Path,
) -> None:
    """The candidate is never run with less isolation than the probe promised: a failed
    isolated start ends the judgement as `judge_error` (it ran with rlimits only before)."""
    # private: monkeypatched (a child setup that fails)
    from optarena.sandbox import _sandbox

    def broken(plan: object) -> None:
        raise OSError("a mount refused (planted by a test)")

    monkeypatch.setattr(_sandbox, "child_setup", broken)
    marker = tmp_path / "imported"
    cand = candidate(f"open({str(marker)!r}, 'w').close()\n" + HONEST)
    result = _judge(task_copy("rmsnorm"), cand)
    _assert_judge_error(result, "SandboxStartError", "did not start", "was not run")
    assert not marker.exists()
