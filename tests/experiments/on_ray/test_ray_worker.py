"""One attempt as a node runs it (`_ray._worker.run_job`), without Ray: judged through a
stand-in for the judge node, its messages in order, what its record says of where it ran; a
node that cannot contain an agent refuses before anything is staged; a judge node whose
installation changed fails the attempt (recorded), never judges it."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import pytest

from optarena.experiments import freeze, load_plan, schedule, trial_config

# private: the Ray worker's and judge's steps and messages, driven one at a time
from optarena.experiments._execute import KEY_ENV
from optarena.experiments._ray._checks import expectation
from optarena.experiments._ray._judge import JudgeReply, JudgeRequest, judge_here
from optarena.experiments._ray._transfer import Begun, Chunk, Refused, Shipment
from optarena.experiments._ray._worker import STAGING_ENV, AgentJob, run_job
from optarena.identity import runtime_fingerprint
from optarena.records import load_trial
from optarena.sandbox import probe

PLAN = """
[experiment]
name = "worker"
repetitions = 1
tasks = ["rmsnorm"]

[judge]
measure = false

[[conditions]]
name = "a"
agent = "command"
command = "sh -c 'echo $OPTARENA_EXPERIMENT_KEY'"
"""


@pytest.fixture
def job(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> AgentJob:
    monkeypatch.setenv(STAGING_ENV, str(tmp_path / "staging"))
    (tmp_path / "driver-ledger").mkdir()  # the driver's ledger, on this machine
    path = tmp_path / "plan.toml"
    path.write_text(PLAN)
    plan = load_plan(path)
    freeze(plan)
    s = schedule(plan)[0]
    expect = expectation(plan)
    config = trial_config(plan, s, {s.cell: "c" * 64})
    return AgentJob(
        trial_id="0a1b2c3d4e",
        attempt=1,
        config=dataclasses.replace(config, task=expect.tasks["rmsnorm"].load()),
        task=expect.tasks["rmsnorm"],
        env={KEY_ENV: s.key},
        expect=expect,
        hidden=(str(tmp_path / "driver-ledger"),),
        transfer_limit_mb=64,
        run="r1",
    )


def _judge_node(request: JudgeRequest) -> JudgeReply:
    return judge_here(request, "vm/judge000")


def test_an_attempt_begins_then_ships_its_record_judged_elsewhere(job: AgentJob) -> None:
    messages = list(run_job(job, "vm/agent000", "/tmp/ray/session_x", _judge_node))
    assert isinstance(messages[0], Begun) and isinstance(messages[1], Shipment)
    assert all(isinstance(m, Chunk) for m in messages[2:])
    begun = load_trial(messages[0].record)
    assert begun.state == "running" and begun.id == job.trial_id
    record = load_trial(messages[1].record)
    assert record.state == "complete" and record.verdict == "accepted"
    assert record.labels["node"] == "vm/agent000" and record.labels["judge_node"] == "vm/judge000"
    assert record.labels["executor"] == "ray" and record.labels["attempt"] == "1"
    assert record.runtime == runtime_fingerprint()  # the judge node's: what timings ran on
    assert record.agent_sandbox is not None
    assert job.hidden[0] in record.agent_sandbox["hidden"]


def test_a_node_that_cannot_contain_an_agent_refuses_before_anything_is_staged(
    job: AgentJob, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    caps = dataclasses.replace(probe(), netns="EPERM: no network namespace here")
    monkeypatch.setattr("optarena.experiments._ray._checks.probe", lambda: caps)
    other = dataclasses.replace(job, expect=dataclasses.replace(job.expect, digest="uncached"))
    messages = list(run_job(other, "vm/agent000", "/tmp/ray/session_x", _judge_node))
    assert len(messages) == 1 and isinstance(messages[0], Refused)
    assert "no network namespace" in messages[0].reason
    assert not (tmp_path / "staging").exists()


def test_a_judge_node_whose_installation_changed_judges_nothing(job: AgentJob) -> None:
    def tampered(request: JudgeRequest) -> JudgeReply:
        reply = judge_here(request, "vm/judge000")
        assert reply.judgement is not None  # what it would have said: never used
        return JudgeReply("vm/judge000", reply.runtime, tampered=(["judge/_judge.py"], "RECORD"))

    messages = list(run_job(job, "vm/agent000", "/tmp/ray/session_x", tampered))
    record = load_trial(next(m for m in messages if isinstance(m, Shipment)).record)
    assert record.state == "interrupted" and record.verdict is None
    assert "on judge node vm/judge000: judge/_judge.py" in (record.error or "")
