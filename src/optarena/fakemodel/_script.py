"""Scripts for the fake model: each reply is decided from the conversation's content.

The `optimize` script plays a competent agent on a task package: read the entry file, replace
it with the task's optimized control through the agent's own editing tool, run a check
command, finish. Which tools exist depends on the agent harness (Claude Code offers
Read/Write/Bash, Codex offers exec_command/apply_patch), so the script speaks each one's
dialect. Every rule carries literal usage numbers so tests can assert exact token accounting.
"""

from __future__ import annotations

import shlex
from abc import ABC, abstractmethod
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from optarena.fakemodel._conversation import Conversation, ToolCall
from optarena.proxy import CallTokens

CHECK_MARKER = "optarena-check"
DAWDLE_MARKER = "optarena-dawdle"
HANG_MARKER = "optarena-hang"


@dataclass(frozen=True)
class Tool:
    """A tool call to make. `args` is a string for freeform tools (Codex's apply_patch);
    `namespace` is set for a tool a Responses `tool_search` loaded inside a namespace (Codex
    puts each MCP server's tools in one, `mcp__SERVER`), which the call must name."""

    name: str
    args: dict[str, Any] | str
    namespace: str | None = None


@dataclass(frozen=True)
class WireFault:
    """How a streamed reply goes wrong on the wire, for the metering proxy's tests: `events`
    rewrites the rendered events (drops the final usage, makes it lie, sends it twice); after
    `cut_after` events the upstream hangs up without ending the stream; after `stall_after`
    it sends nothing more and holds the connection open until the client leaves (a stream
    that never ends). `event_delay_s` spaces the events."""

    events: Callable[[list[bytes]], list[bytes]] | None = None
    cut_after: int | None = None
    stall_after: int | None = None
    event_delay_s: float = 0.0


@dataclass(frozen=True)
class Reply:
    """One scripted reply: text or a tool call, or an HTTP error; `rule` names why. A text
    is streamed in `pieces` deltas; `wire` makes the stream go wrong."""

    rule: str
    usage: CallTokens = field(default_factory=CallTokens)
    text: str | None = None
    tool: Tool | None = None
    error_status: int | None = None
    delay_s: float = 0.0
    pieces: int = 1
    wire: WireFault | None = None


# Literal usage per rule. Distinct numbers so a sum over calls identifies which calls happened.
USAGE: dict[str, CallTokens] = {
    "read": CallTokens(input=1000, output=50, cache_read=0, cache_write=2000, reasoning=0),
    "write": CallTokens(input=200, output=900, cache_read=2000, cache_write=0, reasoning=100),
    "check": CallTokens(input=300, output=80, cache_read=3000, cache_write=0, reasoning=0),
    "finish": CallTokens(input=100, output=30, cache_read=3300, cache_write=0, reasoning=0),
    "dawdle": CallTokens(input=20000, output=10, cache_read=0, cache_write=0, reasoning=0),
    "hang": CallTokens(input=400, output=20, cache_read=3000, cache_write=0, reasoning=0),
    "chat": CallTokens(input=12, output=9, cache_read=0, cache_write=0, reasoning=0),
    "long": CallTokens(input=1000, output=7000, cache_read=200, cache_write=0, reasoning=0),
    "error": CallTokens(),
}


class Toolkit(ABC):
    """How to read, write and run things with one agent harness's tools."""

    def __init__(self, conv: Conversation, target: str) -> None:
        self.conv = conv
        self.target = target

    @abstractmethod
    def read(self) -> Tool: ...

    @abstractmethod
    def write(self, old: str, new: str) -> Tool: ...

    @abstractmethod
    def run(self, command: str) -> Tool: ...

    @abstractmethod
    def is_write(self, call: ToolCall) -> bool: ...


class ClaudeTools(Toolkit):
    """Claude Code: Read and Write take absolute paths; Bash runs a command."""

    def _path(self) -> str:
        cwd = self.conv.cwd()
        return str(Path(cwd) / self.target) if cwd else self.target

    def read(self) -> Tool:
        return Tool("Read", {"file_path": self._path()})

    def write(self, old: str, new: str) -> Tool:
        return Tool("Write", {"file_path": self._path(), "content": new})

    def run(self, command: str) -> Tool:
        return Tool("Bash", {"command": command, "description": "Run a quick check"})

    def is_write(self, call: ToolCall) -> bool:
        return call.name in ("Write", "Edit") and self.target in call.text()


class CodexTools(Toolkit):
    """Codex CLI: exec_command runs shell commands; apply_patch is a freeform patch tool."""

    def read(self) -> Tool:
        return Tool("exec_command", {"cmd": f"cat {shlex.quote(self.target)}"})

    def write(self, old: str, new: str) -> Tool:
        if "apply_patch" not in self.conv.tools:
            body = f"cat > {shlex.quote(self.target)} <<'OPTARENA_EOF'\n{new}OPTARENA_EOF"
            return Tool("exec_command", {"cmd": body})
        lines = ["*** Begin Patch", f"*** Update File: {self.target}"]
        lines += [f"-{ln}" for ln in old.splitlines()]
        lines += [f"+{ln}" for ln in new.splitlines()]
        lines.append("*** End Patch")
        return Tool("apply_patch", "\n".join(lines) + "\n")

    def run(self, command: str) -> Tool:
        return Tool("exec_command", {"cmd": command})

    def is_write(self, call: ToolCall) -> bool:
        text = call.text()
        return (call.name == "apply_patch" and self.target in text) or (
            call.name == "exec_command" and f"cat > {shlex.quote(self.target)}" in text
        )


def toolkit(conv: Conversation, target: str) -> Toolkit | None:
    """The toolkit for the harness that sent `conv`, judged by the tools it offers."""
    if {"Read", "Write", "Bash"} <= set(conv.tools):
        return ClaudeTools(conv, target)
    if "exec_command" in conv.tools:
        return CodexTools(conv, target)
    return None


class Script(ABC):
    """Decides each reply from the conversation so far."""

    name: str = ""

    @abstractmethod
    def decide(self, conv: Conversation) -> Reply: ...


class HelloScript(Script):
    """Answers every request with one short text: demos and latency measurement."""

    name = "hello"

    def decide(self, conv: Conversation) -> Reply:
        return Reply("chat", USAGE["chat"], text="Hello from the optarena scripted model.")


class LongStreamScript(Script):
    """Answers every request, after `delay_s`, with a long text (7,000 output tokens) streamed
    in 40 pieces spaced `wire.event_delay_s` apart, going wrong on the wire as `wire` says: the
    metering proxy's cut-stream and lying-usage tests, and demos of them."""

    name = "long-stream"

    def __init__(self, wire: WireFault | None = None, delay_s: float = 0.0) -> None:
        self.wire = wire or WireFault(event_delay_s=0.005)
        self.delay_s = delay_s  # before the reply starts

    def decide(self, conv: Conversation) -> Reply:
        text = "token " * 700
        return Reply(
            "long", USAGE["long"], text=text, pieces=40, wire=self.wire, delay_s=self.delay_s
        )


class ErrorScript(Script):
    """An upstream that fails every call with HTTP `status`."""

    name = "upstream-error"

    def __init__(self, status: int = 500) -> None:
        self.status = status

    def decide(self, conv: Conversation) -> Reply:
        return Reply(
            "error", USAGE["error"], text="scripted upstream failure", error_status=self.status
        )


_CHECK_CODE = "import ast; ast.parse(open('{f}').read()); print('{m}: syntax ok')"


class OptimizeScript(Script):
    """Read the target, write the optimized version, run a check, then `after_write`:
    `finish` (a competent agent), `dawdle` (a tool loop that never ends: budget tests) or
    `hang` (a tool call that blocks for ten minutes: timeout tests)."""

    name = "optimize"

    def __init__(
        self, target: str, old: str, new: str, marker: str, after_write: str = "finish"
    ) -> None:
        self.target, self.old, self.new, self.marker = target, old, new, marker
        self.after_write = after_write
        self.name = {"finish": "optimize", "dawdle": "budget-hog", "hang": "hang"}[after_write]

    def decide(self, conv: Conversation) -> Reply:
        tk = toolkit(conv, self.target)
        if tk is None:
            return Reply("chat", USAGE["chat"], text=f"```python\n{self.new}```")
        done = {r.call_id for r in conv.results if not r.is_error}
        read = any(self.marker in r.output for r in conv.results)
        written = any(c.id in done and tk.is_write(c) for c in conv.calls)
        if not read and not written:
            return Reply("read", USAGE["read"], tool=tk.read())
        failed = [c for c in conv.calls if tk.is_write(c) and c.id not in done]
        if not written and len(failed) >= 2:
            return Reply("give-up", USAGE["finish"], text=f"I could not write {self.target}.")
        if not written:
            return Reply("write", USAGE["write"], tool=tk.write(self.old, self.new))
        if self.after_write == "hang":
            # `: marker` after the sleep keeps the shell alive with the marker in its command
            # line (a shell runs a lone last command by exec: `sleep 600 # marker` left a bare
            # `sleep 600` that no leftover check could tell from any other)
            return Reply("hang", USAGE["hang"], tool=tk.run(f"sleep 600; : {HANG_MARKER}"))
        if not any(CHECK_MARKER in c.text() and conv.result_of(c) for c in conv.calls):
            code = _CHECK_CODE.format(f=self.target, m=CHECK_MARKER)
            return Reply("check", USAGE["check"], tool=tk.run(f'python3 -c "{code}"'))
        if self.after_write == "dawdle":
            return Reply("dawdle", USAGE["dawdle"], tool=tk.run(f"echo {DAWDLE_MARKER}"))
        return Reply(
            "finish", USAGE["finish"], text=f"Replaced {self.target} with a faster version."
        )


def optimize_script(task_ref: str = "rmsnorm", after_write: str = "finish") -> OptimizeScript:
    """The optimize script for a task package that has an `optimized` control."""
    from optarena.tasks import resolve_task

    task = resolve_task(task_ref)
    entry = task.spec.entry
    control = next((c for c in task.spec.controls if c.name == "optimized"), None)
    if control is None:
        from optarena.errors import OptarenaError

        raise OptarenaError(f"task '{task.id}' has no 'optimized' control to script an agent with")
    old = (task.baseline_dir / entry.file).read_text()
    new = (task.root / control.dir / entry.file).read_text()
    return OptimizeScript(
        entry.file, old, new, marker=f"def {entry.function}", after_write=after_write
    )


SCRIPT_NAMES = (
    "optimize",
    "budget-hog",
    "hang",
    "upstream-error",
    "hello",
    "task-tools",
    "long-stream",
)


def make_script(name: str, task: str = "rmsnorm", error_status: int = 500) -> Script:
    """A built-in script by name (`optarena fake-model --script NAME`)."""
    if name == "optimize":
        return optimize_script(task)
    if name == "budget-hog":
        return optimize_script(task, "dawdle")
    if name == "hang":
        return optimize_script(task, "hang")
    if name == "upstream-error":
        return ErrorScript(error_status)
    if name == "hello":
        return HelloScript()
    if name == "long-stream":
        return LongStreamScript()
    if name == "task-tools":
        from optarena.fakemodel._tools_script import TaskToolsScript

        return TaskToolsScript(optimize_script(task))
    from optarena.errors import UnknownNameError

    raise UnknownNameError("script", name, list(SCRIPT_NAMES))
