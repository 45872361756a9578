"""The metering proxy: forwards model-API calls (Anthropic Messages, OpenAI Responses and Chat
Completions, streamed or not) to an upstream, meters every call, enforces per-trial limits.

`MeteredSession` runs one for an agent run; `optarena proxy` runs one from the command line.
"""

from optarena.proxy._meter import Meter, ProxyLimits, set_tokens, total_tokens
from optarena.proxy._prices import ModelPrice, PriceTable, load_prices
from optarena.proxy._server import MeteringProxy, Provider, Upstream, Upstreams, routes_of
from optarena.proxy._session import MeteredSession
from optarena.proxy._wire import ApiKind, CallTokens, SseUsage, api_kind, error_body, sse_event
from optarena.records import CALL_RECORD_VERSION, CallRecord

__all__ = [
    "CALL_RECORD_VERSION",
    "ApiKind",
    "CallRecord",
    "CallTokens",
    "Meter",
    "MeteredSession",
    "MeteringProxy",
    "ModelPrice",
    "PriceTable",
    "Provider",
    "ProxyLimits",
    "SseUsage",
    "Upstream",
    "Upstreams",
    "api_kind",
    "error_body",
    "load_prices",
    "routes_of",
    "set_tokens",
    "sse_event",
    "total_tokens",
]
