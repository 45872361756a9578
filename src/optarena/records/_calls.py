"""One model call the metering proxy saw: a line of a trial's `api_calls.jsonl` and a row of
the ledger's `api_calls` table. Records never hold request headers, so API keys never reach a
log or the ledger.
"""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict, Field

CALL_RECORD_VERSION = 2  # 2: tokens_at_least, cost_usd_at_least, usage_note


class CallRecord(BaseModel):
    """One model call through the proxy (a line of `api_calls.jsonl`, a row of `api_calls`)."""

    model_config = ConfigDict(extra="forbid")

    schema_version: int = CALL_RECORD_VERSION
    seq: int = Field(description="1, 2, ... in the order calls arrived")
    started_at: str = Field(description="UTC ISO time the request arrived")
    api: str = Field(description="anthropic | responses | chat | other")
    method: str
    path: str = Field(description="request path without the query string")
    model: str | None = Field(default=None, description="model asked for, else the reply's")
    stream: bool = False
    status: int | None = Field(default=None, description="HTTP status; None: no reply")
    request_id: str | None = Field(default=None, description="provider's request id header")
    reply_id: str | None = Field(default=None, description="provider's message/response id")
    latency_s: float | None = Field(default=None, description="request in to last byte out")
    ttfb_s: float | None = Field(default=None, description="request in to first byte out")
    input_tokens: int | None = Field(default=None, description="uncached input")
    output_tokens: int | None = Field(default=None, description="reasoning included")
    cache_read_tokens: int | None = None
    cache_write_tokens: int | None = None
    reasoning_tokens: int | None = None
    cost_usd: float | None = Field(default=None, description="from the price table; None unknown")
    prices_version: str | None = None
    refused: str | None = Field(default=None, description="why the proxy refused the call")
    error: str | None = Field(default=None, description="upstream or transport error, short")
    tokens_at_least: int | None = Field(
        default=None,
        description="when a token count is unknown: the tokens the reply did report on the way "
        "(a stream cut before its final usage); a lower bound, never the count",
    )
    cost_usd_at_least: float | None = Field(
        default=None, description="when the cost is unknown: what `tokens_at_least` costs"
    )
    usage_note: str | None = Field(
        default=None,
        description="why a count or the cost is unknown, or priced otherwise than asked",
    )
