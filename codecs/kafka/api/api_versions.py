"""ApiVersions (key 18), versions 0-4: which api keys and version ranges the broker supports.

Request v0-v2: empty body. v3+ (flexible) carry the client's software name and version (KIP-511: what the
broker shows in its logs and metrics; librdkafka sends "librdkafka"/"2.16.0", the Java client "apache-kafka-java").
A version we do not implement (v5+ from a newer client) is answered in the v0 body layout with UNSUPPORTED_VERSION
plus the full key list, and the client retries at a version we list (see `connection` and
`registry.api_versions_response`).

Response v0: error_code, api_keys[api_key, min_version, max_version]; v1+ add throttle_time_ms at the end.
v2 is v1 (only the throttling behaviour changed); v3 is v2, flexible, with tagged fields (supported and finalized
features, tags 0-3) we never write: no feature flags is what a broker without KRaft features says. The response
header stays v0 in every version. An error answer is always sent in the v0 layout: kafka-python decodes the body
as v0 whenever error_code != 0, and the Java client falls back to v0 when its parse fails.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from ..message import message, since
from ..primitives import Array, Int16, Int32, String, schema

__all__ = [
    "API_KEY",
    "ApiVersionsRequest",
    "ApiVersionsResponse",
    "ApiVersion",
    "REQUEST_SCHEMAS",
    "RESPONSE_SCHEMAS",
    "RESPONSE_V0",
]

API_KEY = 18
MAX_VERSION = 4
FLEXIBLE_SINCE = 3


@dataclass(slots=True)
class ApiVersionsRequest:
    client_software_name: str = ""  # v3+
    client_software_version: str = ""  # v3+


@dataclass(slots=True)
class ApiVersion:
    api_key: int = 0
    min_version: int = 0
    max_version: int = 0


@dataclass(slots=True)
class ApiVersionsResponse:
    error_code: int = 0
    api_keys: list[ApiVersion] = field(default_factory=list)
    throttle_time_ms: int = 0  # v1+


REQUEST_SCHEMAS = message(ApiVersionsRequest, MAX_VERSION, flexible_since=FLEXIBLE_SINCE,
                          client_software_name=since(3, String), client_software_version=since(3, String))

_API_VERSION = schema(ApiVersion, api_key=Int16, min_version=Int16, max_version=Int16)
RESPONSE_SCHEMAS = message(ApiVersionsResponse, MAX_VERSION, flexible_since=FLEXIBLE_SINCE,
                           error_code=Int16, api_keys=Array(_API_VERSION), throttle_time_ms=since(1, Int32))
#: The layout of every error answer and of the answer to a version we do not implement.
RESPONSE_V0 = RESPONSE_SCHEMAS[0]
