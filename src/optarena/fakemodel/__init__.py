"""The scripted model server: speaks the three model APIs (streaming included) and replies as
a script decides from each request's content, with scripted token usage. For tests and offline
demos (`optarena fake-model`); never a real model.
"""

from optarena.fakemodel._conversation import Conversation, ToolCall, ToolResult, parse_request
from optarena.fakemodel._harness_script import CLAIM_FILE, HarnessPlan, HarnessScript
from optarena.fakemodel._render import render
from optarena.fakemodel._script import (
    HANG_MARKER,
    SCRIPT_NAMES,
    USAGE,
    LongStreamScript,
    OptimizeScript,
    Reply,
    Script,
    Tool,
    WireFault,
    make_script,
    optimize_script,
)
from optarena.fakemodel._server import FakeModelServer, ServedCall
from optarena.fakemodel._tools_script import SEARCH_QUERY, TaskToolsScript

__all__ = [
    "CLAIM_FILE",
    "HANG_MARKER",
    "SCRIPT_NAMES",
    "SEARCH_QUERY",
    "USAGE",
    "Conversation",
    "FakeModelServer",
    "HarnessPlan",
    "HarnessScript",
    "LongStreamScript",
    "OptimizeScript",
    "Reply",
    "Script",
    "ServedCall",
    "TaskToolsScript",
    "Tool",
    "ToolCall",
    "ToolResult",
    "WireFault",
    "make_script",
    "optimize_script",
    "parse_request",
    "render",
]
