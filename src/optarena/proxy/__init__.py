"""The metering proxy: forwards model-API calls (Anthropic Messages, OpenAI Responses and Chat
Completions, streamed or not) to an upstream, meters every call, enforces per-trial limits.

`MeteredSession` runs one for an agent run; `optarena proxy` runs one from the command line.
"""

from optarena.proxy._meter import Meter, ProxyLimits, total_tokens
from optarena.proxy._prices import ModelPrice, PriceTable, load_prices
from optarena.proxy._server import MeteringProxy, Upstreams
from optarena.proxy._session import MeteredSession
from optarena.proxy._usage import CallTokens, ReplyUsage, SseUsage, reply_usage
from optarena.proxy._wire import ApiKind, api_kind, error_body, sse_event

__all__ = [
    "ApiKind",
    "CallTokens",
    "Meter",
    "MeteredSession",
    "MeteringProxy",
    "ModelPrice",
    "PriceTable",
    "ProxyLimits",
    "ReplyUsage",
    "SseUsage",
    "Upstreams",
    "api_kind",
    "error_body",
    "load_prices",
    "reply_usage",
    "sse_event",
    "total_tokens",
]
