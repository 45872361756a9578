"""Requests on the wire: which API a path is, the model asked for, errors in each dialect."""

from __future__ import annotations

from optarena.proxy import api_kind, error_body

# private: the proxy's request parser, fed hostile bodies directly
from optarena.proxy._wire import request_fields


def test_api_kind_from_paths() -> None:
    assert api_kind("/v1/messages?beta=true") == "anthropic"
    assert api_kind("/v1/responses") == "responses"
    assert api_kind("/openai/v1/chat/completions/") == "chat"
    assert api_kind("/v1/messages/count_tokens") is None
    assert api_kind("/") is None


def test_request_fields_and_error_dialects() -> None:
    assert request_fields(b'{"model": "m", "stream": true}') == ("m", True)
    assert request_fields(b"\x00garbage") == (None, False)
    assert error_body("anthropic", 400, "no")["error"]["type"] == "invalid_request_error"
    assert error_body("responses", 400, "no")["error"]["message"] == "no"
