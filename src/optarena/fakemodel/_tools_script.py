"""The `task-tools` script: the optimize script, then optarena's task tools over MCP.

After writing the optimized file and running its check, it calls the offered
`check_correctness` tool, then `measure` with a small budget, then finishes, claiming success
in text whatever the tools said (the trial's verdict must not depend on that claim). A tool is
found by the end of its name, whatever prefix the harness gives MCP tools
(`mcp__optarena__check_correctness` in Claude Code).

Codex defers MCP tools: its requests offer only the hosted `tool_search` tool and announce the
servers' namespaces in a developer message. Where the task tools are not offered but
`tool_search` is, the script searches once (the Responses API's client-executed tool search);
Codex answers with the namespace it loaded (`mcp__optarena` holding `check_correctness`, ...),
and the calls then name that namespace, as a real model's would.
"""

from __future__ import annotations

from typing import Any

from optarena.fakemodel._conversation import Conversation
from optarena.fakemodel._script import USAGE, OptimizeScript, Reply, Script, Tool

TOOL_CALLS = ("check_correctness", "measure")
MEASURE_BUDGET_S = 3.0
SEARCH = "tool_search"
SEARCH_QUERY = "optarena check_correctness measure"


def _offered(conv: Conversation, tool: str) -> str | None:
    return next((t for t in conv.tools if t.endswith(f"__{tool}") or t == tool), None)


def call_offered(conv: Conversation, name: str, args: dict[str, Any]) -> Tool:
    """A call of an offered tool, naming its namespace where a tool search loaded it in one."""
    if name in conv.namespaced:
        namespace, bare = conv.namespaced[name]
        return Tool(bare, args, namespace=namespace)
    return Tool(name, args)


class TaskToolsScript(Script):
    name = "task-tools"

    def __init__(self, optimize: OptimizeScript) -> None:
        self.optimize = optimize
        self.called: list[str] = []  # tool names in the order this script asked for them
        self.searches = 0  # tool searches this script asked for

    def decide(self, conv: Conversation) -> Reply:
        reply = self.optimize.decide(conv)
        if reply.rule != "finish":
            return reply
        done = {c.name for c in conv.calls if conv.result_of(c) is not None}
        searched = any(c.name == SEARCH for c in conv.calls)
        for tool in TOOL_CALLS:
            name = _offered(conv, tool)
            if name is None and SEARCH in conv.tools and not searched:
                self.searches += 1
                search = Tool(SEARCH, {"query": SEARCH_QUERY, "limit": 8})
                return Reply("tool-search", USAGE["check"], tool=search)
            if name is not None and name not in done:
                args = {"budget_s": MEASURE_BUDGET_S} if tool == "measure" else {}
                self.called.append(name)
                return Reply(f"tool-{tool}", USAGE["check"], tool=call_offered(conv, name, args))
        return Reply("finish", USAGE["finish"], text="All checks pass; the candidate is faster.")
