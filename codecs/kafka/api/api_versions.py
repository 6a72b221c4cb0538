"""ApiVersions (key 18), versions 0-2: which api keys and version ranges the broker supports.

Request v0-v2: empty body. v3+ (flexible, not implemented) add client_software_name/version; clients send v3/v4
first, and the broker answers them in the v0 body layout with UNSUPPORTED_VERSION plus the full key list
(see `connection` and `registry.api_versions_response`).

Response v0: error_code, api_keys[api_key, min_version, max_version]; v1+ add throttle_time_ms at the end.
v2 is v1 (only the throttling behaviour changed). An error answer is always sent in the v0 layout: kafka-python
decodes the body as v0 whenever error_code != 0, and the Java client falls back to v0 when its parse fails.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from ..primitives import Array, Int16, Int32, schema, versioned

__all__ = [
    "API_KEY",
    "ApiVersionsRequest",
    "ApiVersionsResponse",
    "ApiVersion",
    "REQUEST_SCHEMAS",
    "RESPONSE_SCHEMAS",
]

API_KEY = 18
MAX_VERSION = 2


@dataclass(slots=True)
class ApiVersionsRequest:
    """No fields in v0-v2."""


@dataclass(slots=True)
class ApiVersion:
    api_key: int = 0
    min_version: int = 0
    max_version: int = 0


@dataclass(slots=True)
class ApiVersionsResponse:
    error_code: int = 0
    api_keys: list[ApiVersion] = field(default_factory=list)
    throttle_time_ms: int = 0


REQUEST_V0 = schema(ApiVersionsRequest)
REQUEST_SCHEMAS = versioned(MAX_VERSION, {0: REQUEST_V0})  # v1, v2: same empty body

_API_VERSION_V0 = schema(ApiVersion, api_key=Int16, min_version=Int16, max_version=Int16)
RESPONSE_V0 = schema(ApiVersionsResponse, error_code=Int16, api_keys=Array(_API_VERSION_V0))
RESPONSE_V1 = schema(ApiVersionsResponse, error_code=Int16, api_keys=Array(_API_VERSION_V0),
                     throttle_time_ms=Int32)  # v1 adds throttle time after the key list
RESPONSE_SCHEMAS = versioned(MAX_VERSION, {0: RESPONSE_V0, 1: RESPONSE_V1})  # v2 = v1
