"""The `harness` script: plays an agent through the harness loop's phases.

Which phase a request belongs to is read from its content: the last harness marker in the
user's messages (`optarena-harness: reflect|build|repair`), none for an attempt. In an attempt
the script works like `optimize` (read, write, check) with the file content of the plan:
`first` when nothing is active, `later` when an activated artifact is visible (an offered
`mcp__...` tool, or a skill name in the request); the first attempt can also write a result
file claiming success. A later attempt calls every offered MCP tool before it finishes,
after a tool search where the CLI defers them (Codex).
Reflection answers in text; build and repair write the plan's files, one tool call each.
Every step is found done by an identical earlier call with a result, never by a counter.
"""

from __future__ import annotations

import json
import shlex
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from optarena.fakemodel._conversation import Conversation
from optarena.fakemodel._script import USAGE, OptimizeScript, Reply, Script, Tool
from optarena.fakemodel._tools_script import SEARCH, call_offered
from optarena.harness import BUILD_MARKER, REFLECT_MARKER, REPAIR_MARKER

CLAIM_FILE = "result.json"
CLAIM = {"verdict": "accepted", "speedup": 9.9, "tests": "all passed"}


@dataclass(frozen=True)
class HarnessPlan:
    """What the scripted agent does in each phase."""

    target: str  # the editable file
    baseline: str  # its content in a fresh workspace
    first: str  # what the first attempt writes
    later: str | None  # what a later attempt writes (None: nothing, it finishes)
    later_starts_from: str  # the file's content when a later attempt starts
    marker: str  # text proving the file was read (e.g. 'def rmsnorm')
    claim: bool = False  # the first attempt writes result.json claiming success
    build: dict[str, str] = field(default_factory=dict)  # path -> content, in the build turn
    repair: dict[str, str] = field(default_factory=dict)  # written in a repair turn
    skills: tuple[str, ...] = ()  # a name seen in a request means a skill is active
    tool_args: dict[str, dict[str, Any]] = field(default_factory=dict)  # short name -> args
    reflection: str = "A reusable MCP server that checks the candidate would help most."


def _phase(conv: Conversation) -> str:
    marks = {REFLECT_MARKER: "reflect", BUILD_MARKER: "build", REPAIR_MARKER: "repair"}
    found = "attempt"
    for text in conv.user_texts:
        for marker, name in marks.items():
            if marker in text:
                found = name
    return found


def _write(conv: Conversation, path: str, content: str) -> Tool | None:
    """A new file written with the harness's own tool (parents created)."""
    if {"Read", "Write", "Bash"} <= set(conv.tools):
        cwd = conv.cwd()
        return Tool(
            "Write", {"file_path": str(Path(cwd) / path) if cwd else path, "content": content}
        )
    if "exec_command" in conv.tools:
        q = shlex.quote(path)
        parent = shlex.quote(str(Path(path).parent))
        body = f"mkdir -p {parent} && cat > {q} <<'OPTARENA_EOF'\n{content}OPTARENA_EOF"
        return Tool("exec_command", {"cmd": body})
    return None


class HarnessScript(Script):
    name = "harness"

    def __init__(self, plan: HarnessPlan) -> None:
        self.plan = plan
        self.called: list[str] = []  # MCP tools this script asked for, in order
        self.phases: list[str] = []  # the phase of every request, in order
        self.read: list[str] = []  # what each attempt's read of the target returned
        self.saw_active: list[bool] = []  # per attempt request: an artifact was visible

    def _done(self, conv: Conversation, tool: Tool) -> bool:
        return any(
            c.name == tool.name and c.args == tool.args and conv.result_of(c) is not None
            for c in conv.calls
        )

    def _steps(self, conv: Conversation, files: dict[str, str], rule: str, text: str) -> Reply:
        for path, content in files.items():
            tool = _write(conv, path, content)
            if tool is not None and not self._done(conv, tool):
                return Reply(rule, USAGE["write"], tool=tool)
        return Reply("finish", USAGE["finish"], text=text)

    def _servers(self) -> list[str]:
        """The MCP servers the plan builds (`.harness/mcp/NAME/...`)."""
        paths = [*self.plan.build, *self.plan.repair]
        return sorted({Path(p).parts[2] for p in paths if Path(p).parts[:2] == (".harness", "mcp")})

    def _active(self, conv: Conversation) -> bool:
        text = conv.all_text()
        if any(t.startswith("mcp__") for t in conv.tools):
            return True
        if any(s in text for s in self.plan.skills):
            return True
        # Codex defers MCP tools behind its tool search and announces each server's namespace
        return SEARCH in conv.tools and any(f"mcp__{s}" in text for s in self._servers())

    def decide(self, conv: Conversation) -> Reply:
        phase = _phase(conv)
        self.phases.append(phase)
        if phase == "reflect":
            return Reply("reflect", USAGE["chat"], text=self.plan.reflection)
        if phase == "build":
            return self._steps(conv, self.plan.build, "build", "Built it in .harness/.")
        if phase == "repair":
            return self._steps(conv, self.plan.repair, "repair", "Repaired it.")
        return self._attempt(conv)

    def _attempt(self, conv: Conversation) -> Reply:
        p = self.plan
        later = self._active(conv)
        self.saw_active.append(later)
        for r in conv.results:
            if p.marker in r.output and r.output not in self.read:
                self.read.append(r.output)
        old, new = (p.later_starts_from, p.later) if later else (p.baseline, p.first)
        if new is not None:
            reply = OptimizeScript(p.target, old, new, p.marker).decide(conv)
            if reply.rule != "finish":
                return reply
        if not later and p.claim:
            tool = _write(conv, CLAIM_FILE, json.dumps(CLAIM) + "\n")
            if tool is not None and not self._done(conv, tool):
                return Reply("claim", USAGE["write"], tool=tool)
        return self._call_tools(conv) or Reply(
            "finish",
            USAGE["finish"],
            text="The candidate is already optimized."
            if new is None
            else "All tests pass; 9.9x faster (result.json).",
        )

    def _call_tools(self, conv: Conversation) -> Reply | None:
        """The next offered MCP tool not called yet (searched for first where Codex defers
        them), or None when every one has been called."""
        offered = [t for t in conv.tools if t.startswith("mcp__")]
        searched = any(c.name == SEARCH for c in conv.calls)
        if not offered and SEARCH in conv.tools and not searched and self._active(conv):
            query = " ".join([*self._servers(), *self.plan.tool_args])
            return Reply("tool-search", USAGE["check"], tool=Tool(SEARCH, {"query": query}))
        done = {c.name for c in conv.calls if conv.result_of(c) is not None}
        for name in offered:
            if name not in done:
                self.called.append(name)
                args = self.plan.tool_args.get(name.rsplit("__", 1)[-1], {})
                return Reply("tool", USAGE["check"], tool=call_offered(conv, name, args))
        return None
