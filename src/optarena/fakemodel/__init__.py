"""The scripted model server: speaks the three model APIs (streaming included) and replies as
a script decides from each request's content, with scripted token usage. For tests and offline
demos (`optarena fake-model`); never a real model.
"""

from optarena.fakemodel._conversation import Conversation, ToolCall, ToolResult, parse_request
from optarena.fakemodel._harness_script import HarnessPlan, HarnessScript
from optarena.fakemodel._script import (
    SCRIPT_NAMES,
    USAGE,
    LongStreamScript,
    Reply,
    Script,
    Tool,
    WireFault,
    make_script,
    optimize_script,
)
from optarena.fakemodel._server import FakeModelServer, ServedCall

__all__ = [
    "SCRIPT_NAMES",
    "USAGE",
    "Conversation",
    "FakeModelServer",
    "HarnessPlan",
    "HarnessScript",
    "LongStreamScript",
    "Reply",
    "Script",
    "ServedCall",
    "Tool",
    "ToolCall",
    "ToolResult",
    "WireFault",
    "make_script",
    "optimize_script",
    "parse_request",
]
