"""Writes `ledger-v2.db`: a ledger as optarena wrote it at ledger schema 2 / trial record 1.

Kept so that tests can prove every later optarena still reads what this one wrote (the
fixture is committed; this script documents how it was made and is not run by the tests).
It holds an accepted trial that was measured, a rejected one, a rejudge, an interrupted
trial, and a trial whose calls were metered by the proxy (rows in `api_calls`).

    PYTHONPATH=src python tests/ledger/data/make_ledger_v2.py tests/ledger/data/ledger-v2.db
"""

from __future__ import annotations

import contextlib
import shutil
import stat
import sys
import tempfile
from pathlib import Path

from optarena.agents import RunContext
from optarena.fakemodel import FakeModelServer, make_script
from optarena.ledger import Ledger
from optarena.records import AgentLimits
from optarena.tasks import resolve_task
from optarena.trials import TrialConfig, TrialHook, rejudge, run_trial

HERE = Path(__file__).parent
STREAM = HERE.parent.parent / "agents" / "data" / "claude_success.jsonl"


def _copy_control(name: str) -> str:
    """A command template that copies an rmsnorm control into the workspace."""
    task = resolve_task("rmsnorm")
    src = next(task.root / c.dir for c in task.spec.controls if c.name == name)
    return f"sh -c 'cp -r {src}/. {{workspace}}/'"


def _claude_stand_in(tmp: Path) -> str:
    """A `claude` that makes one call through the metering proxy, then prints a stream."""
    exe = tmp / "claude"
    body = (
        "import json, os, urllib.request\n"
        "req = urllib.request.Request(os.environ['ANTHROPIC_BASE_URL'] + '/v1/messages',\n"
        "    data=json.dumps({'model': 'claude-sonnet-4-5', 'max_tokens': 16,\n"
        "        'messages': [{'role': 'user', 'content': 'hi'}]}).encode(),\n"
        "    headers={'content-type': 'application/json', 'x-api-key': 'k',\n"
        "        'anthropic-version': '2023-06-01'})\n"
        "urllib.request.urlopen(req).read()\n"
        f"print(open({str(STREAM)!r}).read(), end='')\n"
    )
    exe.write_text(f"#!{sys.executable}\n{body}")
    exe.chmod(exe.stat().st_mode | stat.S_IEXEC)
    return str(exe)


class _Interrupt(TrialHook):
    """Stops the trial as Ctrl-C would, once the agent is about to start."""

    def before_agent(self, context: RunContext) -> None:
        raise KeyboardInterrupt("fixture: interrupted before the agent")


def main(out: Path) -> None:
    task = resolve_task("rmsnorm")
    with tempfile.TemporaryDirectory() as tmp_s:
        tmp = Path(tmp_s)
        with Ledger(tmp / "ledger") as ledger:
            accepted = run_trial(
                TrialConfig(
                    task=task,
                    agent="command",
                    agent_args={"command": _copy_control("optimized")},
                    limits=AgentLimits(wall_s=60),
                    labels={"cond": "fixture"},
                    budget_s=4.0,
                ),
                ledger,
            )
            run_trial(
                TrialConfig(
                    task=task,
                    agent="command",
                    agent_args={"command": _copy_control("missing-eps")},
                    limits=AgentLimits(wall_s=60),
                    measure=False,
                ),
                ledger,
            )
            rejudge(ledger, accepted.id, changes={"measure": False})
            with FakeModelServer(make_script("hello")) as fake:
                run_trial(
                    TrialConfig(
                        task=task,
                        agent="claude",
                        agent_args={
                            "bin": _claude_stand_in(tmp),
                            "upstream": fake.url,
                            "env": '{"ANTHROPIC_API_KEY": "not-a-key"}',
                        },
                        limits=AgentLimits(wall_s=60, max_calls=5),
                        measure=False,
                        agent_sandbox=False,
                    ),
                    ledger,
                )
            with contextlib.suppress(KeyboardInterrupt):
                run_trial(
                    TrialConfig(
                        task=task,
                        agent="command",
                        agent_args={"command": "true"},
                        measure=False,
                    ),
                    ledger,
                    hooks=[_Interrupt()],
                )
            n = ledger._conn.execute("SELECT count(*) FROM api_calls").fetchone()[0]
            assert n >= 1, "the metered trial recorded no call"
        shutil.copyfile(tmp / "ledger" / "ledger.db", out)


if __name__ == "__main__":
    main(Path(sys.argv[1]))
