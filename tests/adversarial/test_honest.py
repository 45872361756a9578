"""Honest but unusual candidates are accepted, with no reason and the full sandbox reported."""

from __future__ import annotations

import pytest

from adversarial._support import JudgeFn
from adversarial.honest import HONEST, Honest
from optarena.tasks import Task


def test_enough_honest_candidates() -> None:
    assert len(HONEST) >= 10
    assert {h.task for h in HONEST} == {"rmsnorm", "softmax"}


@pytest.mark.parametrize("honest", HONEST, ids=[h.name for h in HONEST])
def test_honest_candidate_is_accepted(
    honest: Honest, tasks: dict[str, Task], judge_source: JudgeFn
) -> None:
    result = judge_source(tasks[honest.task], honest.source)
    assert result.verdict == "accepted", result.reasons
    assert result.reason_codes == []
    assert result.integrity["status"] == "unchanged"
    assert set(result.sandbox) >= {"network", "user", "mounts", "processes", "cleanup", "guard"}
