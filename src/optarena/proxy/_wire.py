"""What optarena knows about the three model APIs' requests on the wire: which API a path is,
which requests spend nothing, the model a request asks for, and errors in each API's dialect.
Where each reply puts its token counts is `_usage`. Everything here is pure.
"""

from __future__ import annotations

import json
import re
from typing import Any, Literal

ApiKind = Literal["anthropic", "responses", "chat"]
MAX_MODEL = 200


# A path the upstream might read as another endpoint than its text says (`/v1/completions#/
# messages`, `%2F`, `..`): never metered as an API, so a POST there is refused.
_AMBIGUOUS = re.compile(r"[#%\\]|/\.\.?(/|$)|//")


def api_kind(path: str) -> ApiKind | None:
    """The metered API a request path belongs to; None for anything else."""
    bare = path.split("?", 1)[0].rstrip("/")
    if _AMBIGUOUS.search(bare):
        return None
    if bare.endswith("/messages"):
        return "anthropic"
    if bare.endswith("/responses"):
        return "responses"
    if bare.endswith("/chat/completions"):
        return "chat"
    return None


# Requests that spend no tokens: reads (GET, HEAD: model listing, a connectivity check on the
# base URL) and token counting. They are forwarded unmetered; every other request the proxy
# cannot meter (legacy completions, embeddings, batches, ...) is refused, or an agent could
# spend through it outside every budget.
_COUNTING = re.compile(r"(/messages/count_tokens|/responses/input_tokens)$")
_READS = frozenset({"GET", "HEAD", "OPTIONS"})


def spends_nothing(method: str, path: str) -> bool:
    """Whether an unmetered request is one that spends no tokens (see `_COUNTING`)."""
    bare = path.split("?", 1)[0].rstrip("/")
    counting = _COUNTING.search(bare) is not None and not _AMBIGUOUS.search(bare)
    return method.upper() in _READS or counting


def request_fields(body: bytes) -> tuple[str | None, bool]:
    """(model, stream) of a JSON request body; (None, False) when it is not readable JSON."""
    try:
        obj = json.loads(body)
    except (ValueError, RecursionError):  # UnicodeDecodeError is a ValueError
        return None, False
    if not isinstance(obj, dict):
        return None, False
    model = obj.get("model")
    # no model id is this long; a longer one is recorded cut (and has no price)
    return (model[:MAX_MODEL] if isinstance(model, str) else None), bool(obj.get("stream"))


def sse_event(data: dict[str, Any] | str, event: str | None = None) -> bytes:
    """One server-sent event; `data` is JSON-encoded unless it is already a string."""
    payload = data if isinstance(data, str) else json.dumps(data, separators=(",", ":"))
    head = f"event: {event}\n" if event else ""
    return f"{head}data: {payload}\n\n".encode()


def error_body(kind: ApiKind | None, status: int, message: str) -> dict[str, Any]:
    """An error reply in the dialect the client speaks, so its agent shows `message`."""
    if kind == "anthropic":
        etype = {400: "invalid_request_error", 403: "permission_error", 429: "rate_limit_error"}
        return {
            "type": "error",
            "error": {"type": etype.get(status, "api_error"), "message": message},
        }
    code = {400: "invalid_request_error", 403: "permission_denied", 429: "rate_limit_exceeded"}
    return {"error": {"message": message, "type": code.get(status, "server_error"), "code": None}}
