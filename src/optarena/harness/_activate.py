"""Activation of qualified artifacts for a fresh agent session, and their export as an
experiment condition's `artifacts` directory.

Only qualified artifacts are ever activated; a quarantined version is left where it is. Skills
go where each registered agent discovers them (`agents.skill_dirs`: each runner's `skills_dir`,
e.g. `.claude/skills/NAME/` for Claude Code, `.agents/skills/NAME/` for Codex); MCP servers are
described in `mcp-servers.json` (name, command, tools) for the runner to pass through its own
options (`AgentRunner.mcp_args`), each command wrapped so that it runs contained.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

from optarena.agents import skill_dirs
from optarena.files import copy_entry
from optarena.harness._registry import Registry


def export_artifacts(registry: Registry, snapshots: Path, dest: Path) -> list[str]:
    """Copy every qualified artifact into `dest` laid out for every agent; returns what was
    written (relative paths). `dest` must not exist yet (an export is never merged into
    another one)."""
    if dest.exists():
        from optarena.errors import OptarenaError

        raise OptarenaError(f"{dest} exists: export into a new directory")
    dest.mkdir(parents=True)
    written: list[str] = []
    servers = {}
    for a in sorted(registry.qualified(), key=lambda a: (a.kind, a.name)):
        src = snapshots / a.path
        if a.kind == "skill":
            for d in skill_dirs():
                shutil.copytree(src, dest / d / a.name, symlinks=True)
                written.append(f"{d}/{a.name}")
        elif a.kind == "mcp":
            target = dest / ".harness" / "mcp" / a.name
            shutil.copytree(src, target, symlinks=True)
            manifest = json.loads((src / "manifest.json").read_text())
            servers[a.name] = {
                "command": manifest["command"],
                "cwd": f".harness/mcp/{a.name}",
                "sha256": a.sha256,
            }
            written.append(f".harness/mcp/{a.name}")
        else:
            sub = {"tool": "tools", "verifier": "verifiers", "fixture": "fixtures", "doc": "docs"}
            target = dest / ".harness" / sub[a.kind] / a.name
            target.parent.mkdir(parents=True, exist_ok=True)
            copy_entry(src, target)
            written.append(f".harness/{sub[a.kind]}/{a.name}")
    if servers:
        (dest / "mcp-servers.json").write_text(json.dumps({"servers": servers}, indent=1) + "\n")
        written.append("mcp-servers.json")
    (dest / "HARNESS.md").write_text(_describe(registry, written))
    written.append("HARNESS.md")
    return written


def _describe(registry: Registry, written: list[str]) -> str:
    lines = [f"# Harness artifacts of run {registry.run}", ""]
    for a in sorted(registry.qualified(), key=lambda a: (a.kind, a.name)):
        lines.append(
            f"- {a.kind} `{a.name}` (iteration {a.iteration}, {a.sha256[:12]}): {a.report}"
        )
    lines += ["", "Files: " + ", ".join(written), ""]
    return "\n".join(lines)
