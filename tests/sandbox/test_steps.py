"""The isolation steps both sandboxes take and report: a measure is off, unavailable (and
why), or what was applied; a failed attempt is noted; the report's `processes` and `cleanup`
follow from the measures."""

from __future__ import annotations

# private: the one builder of both sandboxes' isolation steps, tested alone
from optarena.sandbox._steps import IsolationSteps


def _fails() -> object:
    raise OSError("no room")


def test_a_step_is_off_unavailable_or_taken() -> None:
    steps = IsolationSteps()
    assert not steps.wanted("network", False, "no netns")
    assert not steps.wanted("pid", True, "no pidns")
    assert steps.wanted("ipc", True, None)
    assert steps.measures == {"network": "off", "pid": "unavailable"}
    assert steps.notes == ["pid: no pidns"]


def test_a_failed_attempt_is_noted_under_its_measure() -> None:
    steps = IsolationSteps()
    assert steps.attempt("user", _fails, state="same", why="no uid lease ({})") is None
    assert steps.attempt("cgroup", _fails) is None
    assert steps.attempt("mounts", lambda: 7) == 7
    assert steps.measures == {"user": "same", "cgroup": "unavailable"}
    assert steps.notes == ["user: no uid lease (no room)", "cgroup: no room"]


def test_processes_and_cleanup_follow_from_the_measures() -> None:
    steps = IsolationSteps()
    assert (steps.processes(None), steps.cleanup()) == ("not enforced", "process tree")
    steps.record("user", "uid 1500001")
    assert (steps.processes(64), steps.cleanup()) == ("rlimit nproc=64", "uid")
    steps.record("cgroup", "pids.max=64")
    assert (steps.processes(64), steps.cleanup()) == ("pids.max=64, rlimit nproc=64", "cgroup")
    steps.record("cgroup", "no pids controller")  # still a cgroup that lists every process
    assert (steps.processes(None), steps.cleanup()) == ("not enforced", "cgroup")
