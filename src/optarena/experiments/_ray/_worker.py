"""One attempt at a key, on the node Ray placed it on: checks, the trial, the shipment home.

The trial is the local lifecycle (`optarena.trials.run_trial`) run into a staging ledger on this
node, so everything a local trial guarantees holds here too (agent sandbox, its own metering
proxy on this node, scope, capture, the installation's check before judging); only the judging
runs elsewhere (`RemoteJudged`). What comes back to the driver is what the staging ledger
recorded, whatever happened (`optarena.experiments._ray._transfer`).
"""

from __future__ import annotations

import dataclasses
import os
import tempfile
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path

from optarena.agents import RunContext, create_runner
from optarena.errors import LedgerError, OptarenaError
from optarena.experiments._ray._checks import Expectation, TaskPath, node_problems
from optarena.experiments._ray._judge import JudgeReply, JudgeRequest, RemoteJudged, judged_where
from optarena.experiments._ray._transfer import (
    Begun,
    Lost,
    Message,
    Refused,
    TransferError,
    pack,
)
from optarena.files import printable
from optarena.ledger import Ledger
from optarena.trials import TrialConfig, TrialHook, run_trial, start_record, trial_task

STAGING_ENV = "OPTARENA_RAY_STAGING"  # where nodes keep their staging ledgers (default: tmp)
NODE_LABEL, JUDGE_NODE_LABEL = "node", "judge_node"


@dataclass(frozen=True)
class AgentJob:
    """What the driver sends for one attempt: the trial as configured, and what to check."""

    trial_id: str
    attempt: int
    config: TrialConfig  # its task is loaded again here, from `task`
    task: TaskPath
    env: Mapping[str, str]  # the condition's environment and the key
    expect: Expectation
    hidden: tuple[str, ...]  # the driver's ledger: on a machine it shares, out of sight
    transfer_limit_mb: float
    run: str  # this driver run's own staging on each node: no two runs share one


def staging_root() -> Path:
    return (
        Path(os.environ.get(STAGING_ENV) or tempfile.gettempdir()) / f"optarena-ray-{os.getuid()}"
    )


class NodeHook(TrialHook):
    """The agent's environment on a node: the condition's, with Ray's own variables blanked
    (a cluster token must not reach an agent); and out of its sight the driver's ledger and
    every node's staging on this machine (its own workspace stays writable)."""

    def __init__(self, env: Mapping[str, str], hidden: tuple[Path, ...]) -> None:
        self.env = dict(env)
        self.hidden = hidden

    def before_agent(self, context: RunContext) -> RunContext:
        blanked = {k: "" for k in os.environ if k.startswith("RAY_")}
        env = {**context.env, **blanked, **self.env}
        sandbox = context.sandbox
        if sandbox is not None and sandbox.policy.enabled:
            hidden = (*sandbox.hidden, *self.hidden)
            sandbox = dataclasses.replace(sandbox, hidden=hidden)
        return dataclasses.replace(context, env=env, sandbox=sandbox)


def run_job(
    job: AgentJob,
    node: str,
    session_dir: str | None,
    send: Callable[[JudgeRequest], JudgeReply],
) -> Iterator[Message]:
    """The messages of one attempt: `Refused` (nothing recorded), or `Begun`, then `Lost` or
    the `Shipment` and its chunks."""
    problems = node_problems(job.expect, agents=True, ray_session_dir=session_dir)
    if problems:
        yield Refused(node, "; ".join(problems))
        return
    labels = {**job.config.labels, NODE_LABEL: node, "executor": "ray", "attempt": str(job.attempt)}
    try:
        task = job.task.load()
        config = dataclasses.replace(job.config, task=task, labels=labels)
        source = trial_task(task)
        source.check_runnable()
        runner = create_runner(config.agent, config.agent_args)
        runner.check_available()
    except OptarenaError as e:
        yield Refused(node, str(e))
        return
    remote = RemoteJudged(source, job.task.load(), send)
    staging = staging_root() / node.rsplit("/", 1)[-1] / job.run
    hidden = (*map(Path, job.hidden), staging_root())
    with Ledger.open(staging) as ledger:
        workspace = (ledger.work_dir(job.trial_id) / "workspace").absolute()
        yield Begun(node, start_record(job.trial_id, config, runner, workspace).model_dump_json())
        try:
            run_trial(
                config, ledger, runner=runner, hooks=[NodeHook(job.env, hidden)],
                trial_id=job.trial_id, source=remote,
            )  # fmt: skip
        except KeyboardInterrupt:
            raise
        except BaseException as e:  # recorded by run_trial, unless it never began
            if not _recorded(ledger, job.trial_id):
                yield Lost(node, printable(f"{type(e).__name__}: {e}"))
                return
        yield from _ship(ledger, job, node, remote)


def _recorded(ledger: Ledger, trial_id: str) -> bool:
    try:
        return ledger.get(trial_id).state != "running"
    except LedgerError:
        return False


def _ship(ledger: Ledger, job: AgentJob, node: str, remote: RemoteJudged) -> Iterator[Message]:
    record = ledger.get(job.trial_id)
    where = judged_where(remote)
    update: dict[str, object] = {}
    if where:
        update = {
            "runtime": where["runtime"],
            "labels": {**record.labels, JUDGE_NODE_LABEL: str(where["judge_node"])},
        }
    try:
        shipment, chunks = pack(ledger, job.trial_id, node, update, job.transfer_limit_mb)
    except TransferError as e:
        yield Lost(node, str(e))
        return
    yield shipment
    yield from chunks
