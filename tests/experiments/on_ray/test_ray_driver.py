"""The driver's decisions on each thing a node or Ray can do to an attempt (`RayAttempt`),
with Ray replaced by fakes: an object lost after the trial began is on record and raises (the
key's retry is `_Attempts`'s); one lost before it began is the same attempt submitted again,
nothing recorded; a refusal records nothing; Ctrl-C records the user's stop and cancels."""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from optarena.errors import OptarenaError
from optarena.experiments import RayOptions, experiment_state, freeze, load_plan, schedule

# private: the Ray driver's steps and messages, driven one at a time
from optarena.experiments._ray._checks import expectation
from optarena.experiments._ray._driver import RayAttempt
from optarena.experiments._ray._transfer import Begun, Refused
from optarena.experiments._ray._worker import AgentJob
from optarena.experiments._state import stopped_by_user
from optarena.ledger import Ledger
from optarena.trials import start_record

PLAN = """
[experiment]
name = "driver"
repetitions = 1
tasks = ["rmsnorm"]

[judge]
measure = false

[[conditions]]
name = "a"
agent = "command"
command = "true"
"""


class ObjectLostError(Exception):
    """Stands for Ray's: the object holding the attempt's next message is gone."""


class _Ref:
    def __init__(self, value: Any) -> None:
        self.value = value


class _Gen:
    def __init__(self, items: list[Any]) -> None:
        self.items = iter(items)

    def __iter__(self) -> Iterator[_Ref]:
        return self

    def __next__(self) -> _Ref:
        return _Ref(next(self.items))


class FakeRay:
    def __init__(self) -> None:
        self.cancelled: list[_Gen] = []

    def wait(self, refs: list[Any], timeout: float) -> tuple[list[Any], list[Any]]:
        return refs, []

    def get(self, ref: _Ref) -> Any:
        if isinstance(ref.value, BaseException):
            raise ref.value
        return ref.value

    def cancel(self, gen: _Gen, force: bool) -> None:
        self.cancelled.append(gen)


Script = Callable[[AgentJob], list[Any]]


class FakeTask:
    """Each submission plays the next script: the messages (or errors) its node sends."""

    def __init__(self, scripts: list[Script]) -> None:
        self.scripts = scripts
        self.jobs: list[AgentJob] = []

    def options(self, **kw: Any) -> FakeTask:
        return self

    def remote(self, job: AgentJob, judge: dict[str, Any]) -> _Gen:
        self.jobs.append(job)
        return _Gen(self.scripts.pop(0)(job))


def _begun(job: AgentJob) -> Begun:
    from optarena.agents import create_runner

    runner = create_runner(job.config.agent, job.config.agent_args)
    record = start_record(job.trial_id, job.config, runner, Path("/node/work/workspace"))
    return Begun("vm/node0001", record.model_dump_json())


@pytest.fixture
def attempt(tmp_path: Path) -> Callable[..., tuple[RayAttempt, FakeRay, FakeTask, Path]]:
    path = tmp_path / "plan.toml"
    path.write_text(PLAN)
    plan = load_plan(path)
    freeze(plan)
    home = tmp_path / "ledger"
    with Ledger.open(home) as led:
        state = experiment_state(plan, led)

    def make(
        scripts: list[Script], stop: threading.Event | None = None, events: list[str] | None = None
    ) -> tuple[RayAttempt, FakeRay, FakeTask, Path]:
        ray, task = FakeRay(), FakeTask(scripts)

        def emit(kind: str, s: object, record: object, message: str) -> None:
            if events is not None:
                events.append(kind)
            if stop is not None and kind == "node":
                stop.set()  # Ctrl-C while the agent runs

        one = RayAttempt(
            ray, plan, home, state, RayOptions(), expectation(plan), emit,  # type: ignore[arg-type]
            stop or threading.Event(), task,
        )  # fmt: skip
        return one, ray, task, home

    return make


def _rows(home: Path) -> list[tuple[str, str]]:
    with Ledger(home) as led:
        return [(r.id, r.state) for r in led.trials(limit=None)]


def test_an_object_lost_after_the_trial_began_is_on_record(attempt: Any) -> None:
    one, ray, task, home = attempt([lambda job: [_begun(job), ObjectLostError("gone")]])
    s = schedule(one.plan)[0]
    with pytest.raises(ObjectLostError):
        one(s)
    [(trial_id, state)] = _rows(home)
    assert trial_id == task.jobs[0].trial_id and state == "interrupted"
    with Ledger(home) as led:
        r = led.get(trial_id)
    assert r.error is not None and r.error.startswith("during ray: ObjectLostError: gone")
    assert r.labels["experiment_key"] == s.key and not stopped_by_user(r)
    assert r.usage.input_tokens is None and r.metered_usage is None  # unknown, never zero
    assert ray.cancelled  # whatever still ran of it is ended


def test_lost_before_it_began_is_the_same_attempt_again(attempt: Any) -> None:
    one, _ray, task, home = attempt(
        [
            lambda job: [ObjectLostError("before it began")],
            lambda job: [_begun(job), ObjectLostError("after")],
        ]
    )
    with pytest.raises(ObjectLostError, match="after"):
        one(schedule(one.plan)[0])
    first, second = task.jobs
    assert first.trial_id == second.trial_id and first.attempt == second.attempt == 1
    assert first.run != second.run  # its own staging: never meets what the lost one left
    assert [state for _id, state in _rows(home)] == ["interrupted"]


def test_a_refusal_records_nothing_and_stops_the_run(attempt: Any) -> None:
    one, _ray, _task, home = attempt([lambda job: [Refused("vm/node0001", "no netns")]])
    with pytest.raises(OptarenaError, match="node vm/node0001 refused rmsnorm/a/0: no netns"):
        one(schedule(one.plan)[0])
    assert _rows(home) == []


def test_ctrl_c_records_the_user_s_stop_and_cancels_the_attempt(attempt: Any) -> None:
    stop, events = threading.Event(), []
    one, ray, _task, home = attempt([lambda job: [_begun(job), _begun(job)]], stop, events)
    with pytest.raises(KeyboardInterrupt):
        one(schedule(one.plan)[0])
    assert events == ["node"] and ray.cancelled
    with Ledger(home) as led:
        [r] = led.trials(limit=None)
    assert r.state == "interrupted" and stopped_by_user(r)  # no retry used
