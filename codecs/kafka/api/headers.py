"""Kafka request and response headers (non-flexible forms only).

Request header v1: `request_api_key int16, request_api_version int16, correlation_id int32, client_id` (an int16
length nullable string; it stays non-compact even in header v2). Header v2, used by flexible request versions,
adds a tagged-field section after `client_id`: we never parse past `client_id` for such requests (the only one we
answer is ApiVersions v3+, with an UNSUPPORTED_VERSION body), so v2 has no schema here.

Response header v0: `correlation_id int32`. Flexible responses would use header v1 (+ tagged fields), but every
version we implement is non-flexible, and the ApiVersions response header is always v0 anyway.
"""

from __future__ import annotations

from dataclasses import dataclass

from ..primitives import Int16, Int32, NullableString, schema

__all__ = [
    "RequestHeader",
    "ResponseHeader",
    "REQUEST_HEADER_V1",
    "REQUEST_HEADER_PREFIX_SIZE",
    "RESPONSE_HEADER_V0",
]


@dataclass(slots=True)
class RequestHeader:
    request_api_key: int = 0
    request_api_version: int = 0
    correlation_id: int = 0
    client_id: str | None = None


@dataclass(slots=True)
class ResponseHeader:
    correlation_id: int = 0


REQUEST_HEADER_V1 = schema(
    RequestHeader,
    request_api_key=Int16,
    request_api_version=Int16,
    correlation_id=Int32,
    client_id=NullableString,  # never compact, even in the flexible header v2
)
#: api_key + api_version + correlation_id: the fixed prefix every request header version starts with.
REQUEST_HEADER_PREFIX_SIZE = 8

RESPONSE_HEADER_V0 = schema(ResponseHeader, correlation_id=Int32)
