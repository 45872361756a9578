"""`replay`: applies a recorded candidate directory or patch to the workspace. Not an agent.

It exists for demos, tests and re-judging. Every record it makes carries `is_agent: false` and
the label `replay (not an agent)`, so a replay can never be mistaken for an agent's work.

    optarena run --task rmsnorm --agent replay --agent-arg source=path/to/candidate_dir
    optarena run --task rmsnorm --agent replay --agent-arg source=change.patch
"""

from __future__ import annotations

import shutil
import subprocess
import time
from pathlib import Path
from typing import Any

from optarena import __version__
from optarena.agents._base import AgentRunner, RunContext
from optarena.errors import MissingPrerequisiteError, OptarenaError
from optarena.identity import hash_tree, sha256_bytes, tree_files
from optarena.records import AgentLimits, AgentOutcome


class ReplayRunner(AgentRunner):
    """Copies a directory's files over the workspace, or applies a patch with `git apply`."""

    name = "replay"
    is_agent = False

    def __init__(self, source: str | Path) -> None:
        self.source = Path(source).expanduser().resolve()

    def version(self) -> str | None:
        return f"optarena {__version__}"

    def flags(self) -> dict[str, Any]:
        if self.source.is_dir():
            return {"source": str(self.source), "kind": "dir", "sha256": hash_tree(self.source)}
        digest = sha256_bytes(self.source.read_bytes()) if self.source.is_file() else None
        return {"source": str(self.source), "kind": "patch", "sha256": digest}

    def check_available(self) -> None:
        if not self.source.exists():
            raise OptarenaError(f"replay source {self.source} does not exist")
        if self.source.is_file() and shutil.which("git") is None:
            raise MissingPrerequisiteError("replaying a patch needs 'git' on PATH")

    def run(self, context: RunContext, prompt: str, limits: AgentLimits) -> AgentOutcome:
        workspace, logs_dir = context.workspace, context.logs_dir
        logs_dir.mkdir(parents=True, exist_ok=True)
        log = logs_dir / "replay.log"
        t0 = time.monotonic()
        if self.source.is_dir():
            files = tree_files(self.source)
            for rel in files:
                (workspace / rel).parent.mkdir(parents=True, exist_ok=True)
                shutil.copyfile(self.source / rel, workspace / rel)
            log.write_text("".join(f"copied {rel}\n" for rel in files), encoding="utf-8")
            ok, detail, code = True, f"copied {len(files)} file(s) from {self.source}", 0
        else:
            proc = subprocess.run(
                ["git", "apply", "--whitespace=nowarn", "--verbose", str(self.source)],
                cwd=workspace,
                capture_output=True,
                text=True,
                timeout=limits.wall_s,
                check=False,
            )
            log.write_text(proc.stdout + proc.stderr, encoding="utf-8")
            ok, code = proc.returncode == 0, proc.returncode
            detail = f"applied {self.source}" if ok else f"git apply failed: {proc.stderr[:300]}"
        return AgentOutcome(
            status="completed" if ok else "failed",
            exit_code=code,
            logs={"replay": str(log)},
            wall_s=round(time.monotonic() - t0, 4),
            cpu_s=None,  # no agent process: nothing to measure
            detail=detail,
        )
