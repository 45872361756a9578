"""`optarena harness run --demo`: the whole harness loop offline, in one command.

The real Claude Code (or Codex) CLI talks to optarena's scripted model server instead of a
model API: the first attempt writes a wrong rmsnorm and a result file claiming success (the
judge rejects it), reflection and build write a skill, it passes vetting and is activated, and the
second, fresh attempt writes the optimized file and is accepted. No network, no key, nothing
spent (the scripted usage is metered and priced as if it were real); only the pinned CLI must
be installed (the message names the command when it is not).
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass

from optarena.agents import create_runner, npm_cache
from optarena.errors import OptarenaError
from optarena.tasks import Task

SKILL = (
    "---\nname: rmsnorm-one-pass\ndescription: normalize each row in one pass over the data\n"
    "---\nCompute the mean of squares and the scale in one vectorised pass; check with the "
    "judge's tools before finishing.\n"
)
WRONG = "import numpy as np\n\n\ndef rmsnorm(x, weight, *, eps):\n    return np.zeros_like(x)\n"
MODELS = {"claude": "claude-sonnet-4-5", "codex": "gpt-5.5"}
KEYS = {"claude": ("ANTHROPIC_API_KEY", "sk-ant-optarena-demo"),
        "codex": ("OPENAI_API_KEY", "sk-optarena-demo")}  # fmt: skip


@dataclass(frozen=True)
class Demo:
    """What the loop is given: the agent's arguments pointing at the scripted server."""

    agent: str
    agent_args: dict[str, str]


def _executable(agent: str) -> str:
    """The agent's CLI, from PATH or optarena's npm cache; else the install command."""
    runner = create_runner(agent, {})
    exe = runner.executable() if hasattr(runner, "executable") else None
    if exe is None:
        package = getattr(runner, "package", agent)
        raise OptarenaError(
            f"--demo runs the real {agent} CLI against optarena's scripted model server, and "
            f"'{agent}' is not installed; install the pinned version with: npm install --prefix "
            f"{npm_cache()} {package}"
        )
    return str(exe)


@contextmanager
def demo_agent(agent: str, task: Task, task_state: str) -> Iterator[Demo]:
    """The scripted model server, running for the duration, and the agent's arguments."""
    from optarena.fakemodel import FakeModelServer, HarnessPlan, HarnessScript

    if agent not in MODELS:
        raise OptarenaError(f"--demo --agent {agent}: the demo drives claude or codex")
    if task.id != "rmsnorm":
        raise OptarenaError(f"--demo --task {task.id}: the demo's script is written for rmsnorm")
    exe = _executable(agent)
    base = (task.baseline_dir / "solution.py").read_text()
    fast = (task.root / "controls" / "optimized" / "solution.py").read_text()
    plan = HarnessPlan(
        target="solution.py", baseline=base, first=WRONG, later=fast,
        later_starts_from=base if task_state == "reset" else WRONG,
        marker="def rmsnorm", claim=True,
        build={".harness/skills/rmsnorm-one-pass/SKILL.md": SKILL},
        skills=("rmsnorm-one-pass",),
    )  # fmt: skip
    key, value = KEYS[agent]
    with FakeModelServer(HarnessScript(plan)) as fake:
        args = {"bin": exe, "upstream": fake.url, "model": MODELS[agent]}
        args["env"] = f'{{"{key}": "{value}"}}'  # the scripted server ignores it
        if agent == "claude":
            args["max_retries"] = "0"
        yield Demo(agent, args)
