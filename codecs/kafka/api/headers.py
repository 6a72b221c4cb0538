"""Kafka request and response headers.

Request header v1: `request_api_key int16, request_api_version int16, correlation_id int32, client_id` (an int16
length nullable string). Header v2, used by flexible request versions (KIP-482), adds a tagged-field section after
`client_id`, which stays a classic int16 string (Kafka keeps it so, for brokers to read any header).

Response header v0: `correlation_id int32`; header v1, used by flexible response versions, adds a tagged-field
section (we always write it empty). Exception: the ApiVersions response header is always v0, whatever the version
(a client must read it before it knows which versions the broker speaks). `registry.is_flexible` says which
(key, version) is flexible; `connection` picks the headers from it.
"""

from __future__ import annotations

from dataclasses import dataclass

from ..primitives import Int16, Int32, NullableString, Schema, schema

__all__ = [
    "RequestHeader",
    "ResponseHeader",
    "REQUEST_HEADER_V1",
    "REQUEST_HEADER_V2",
    "REQUEST_HEADER_PREFIX_SIZE",
    "RESPONSE_HEADER_V0",
    "RESPONSE_HEADER_V1",
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
    client_id=NullableString,
)
#: v1 + a tagged-field section; client_id is never compact, so this is not `flexible(REQUEST_HEADER_V1)`.
REQUEST_HEADER_V2 = Schema(RequestHeader, REQUEST_HEADER_V1.fields, flexible=True)
#: api_key + api_version + correlation_id: the fixed prefix every request header version starts with.
REQUEST_HEADER_PREFIX_SIZE = 8

RESPONSE_HEADER_V0 = schema(ResponseHeader, correlation_id=Int32)
RESPONSE_HEADER_V1 = Schema(ResponseHeader, RESPONSE_HEADER_V0.fields, flexible=True)
