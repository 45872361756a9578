"""The metering proxy: forwards model-API calls (Anthropic Messages, OpenAI Responses and Chat
Completions, streamed or not) to an upstream, meters every call, enforces per-trial limits.

`MeteredSession` runs one for an agent run; `optarena proxy` runs one from the command line.
"""

from optarena.proxy._meter import CALL_RECORD_VERSION, CallRecord, Meter, ProxyLimits
from optarena.proxy._server import MeteringProxy, Upstream
from optarena.proxy._session import MeteredSession, calls_of, record_calls
from optarena.proxy._wire import ApiKind, CallTokens, SseUsage, api_kind

__all__ = [
    "CALL_RECORD_VERSION",
    "ApiKind",
    "CallRecord",
    "CallTokens",
    "Meter",
    "MeteredSession",
    "MeteringProxy",
    "ProxyLimits",
    "SseUsage",
    "Upstream",
    "api_kind",
    "calls_of",
    "record_calls",
]
