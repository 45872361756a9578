"""The harness loop offline: the real Claude Code (or Codex CLI) against optarena's scripted
model server, on rmsnorm, two iterations, in a new temporary ledger.

    python examples/harness/run_example.py [--agent claude|codex] [--keep DIR]

Iteration 1: the scripted agent writes a wrong solution and a result.json claiming success
(the judge rejects it); in the same session it reflects, builds an MCP server `bench` whose
self-test fails, and repairs it from the exact qualification report; a second server, `idle`,
whose self-test calls no tool, stays quarantined. Iteration 2 (task state reset): a fresh
session is offered only `bench`'s tool (through optarena's recording relay), calls it, writes
the optimized solution, and is accepted. Then `optarena harness show` and `harness export`.
Needs the agent CLI (`npm install -g @anthropic-ai/claude-code@2.1.197`); no network, no key.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import sys
import tempfile
from pathlib import Path

from optarena.agents import npm_cache
from optarena.cli import main as cli
from optarena.fakemodel import FakeModelServer, HarnessPlan, HarnessScript
from optarena.harness import HarnessConfig, run_harness
from optarena.ledger import Ledger
from optarena.records import AgentLimits
from optarena.tasks import resolve_task

SERVER = '''from mcp.server.mcpserver import MCPServer

server = MCPServer("bench")


@server.tool()
def probe(n: int) -> str:
    """Say how many rows would be checked."""
    return f"checked {n} rows"


server.run()
'''
MODELS = {"claude": "claude-sonnet-4-5", "codex": "gpt-5.5"}


def manifest(self_test: list[dict[str, object]]) -> str:
    return json.dumps({"command": [sys.executable, "server.py"], "self_test": self_test}) + "\n"


def plan() -> HarnessPlan:
    task = resolve_task("rmsnorm")
    base = (task.baseline_dir / "solution.py").read_text()
    fast = (task.root / "controls" / "optimized" / "solution.py").read_text()
    wrong = "import numpy as np\n\n\ndef rmsnorm(x, weight, *, eps):\n    return x * 0\n"
    return HarnessPlan(
        target="solution.py", baseline=base, first=wrong, later=fast, later_starts_from=base,
        marker="def rmsnorm", claim=True,
        build={
            ".harness/mcp/bench/server.py": SERVER,
            ".harness/mcp/bench/manifest.json": manifest([{"tool": "probe", "arguments": {}}]),
            ".harness/mcp/idle/server.py": SERVER,
            ".harness/mcp/idle/manifest.json": manifest([]),
        },
        repair={
            ".harness/mcp/bench/manifest.json": manifest(
                [{"tool": "probe", "arguments": {"n": 3}}]
            )
        },
        tool_args={"probe": {"n": 7}},
    )  # fmt: skip


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--agent", choices=sorted(MODELS), default="claude")
    p.add_argument("--keep", type=Path, help="keep the ledger in this new directory")
    a = p.parse_args()
    exe = shutil.which(a.agent) or str(npm_cache() / "node_modules" / ".bin" / a.agent)
    os.environ.setdefault("ANTHROPIC_API_KEY", "sk-ant-offline")  # the scripted server
    os.environ.setdefault("OPENAI_API_KEY", "sk-offline")  # ignores keys
    home = a.keep or Path(tempfile.mkdtemp(prefix="optarena-harness-example-"))
    with FakeModelServer(HarnessScript(plan())) as fake, Ledger.open(home) as ledger:
        config = HarnessConfig(
            task=resolve_task("rmsnorm"),
            agent=a.agent,
            agent_args={"bin": exe, "upstream": fake.url, "model": MODELS[a.agent]},
            iterations=2,
            task_state="reset",
            attempt=AgentLimits(wall_s=300),
            reflection_timeout_s=120,
            build_timeout_s=120,
            measure=False,
            final_build=False,
        )
        run, where = run_harness(config, ledger, progress=print)
    print()
    cli(["harness", "show", str(where)])
    cli(["harness", "export", str(where), "-o", str(home / "exported")])
    print(f"ledger: {home}  (optarena trials --ledger {home})")
    return 0 if run.best_iteration is not None else 1


if __name__ == "__main__":
    sys.exit(main())
