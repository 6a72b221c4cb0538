"""The api keys and versions the gateway speaks, and the schema of every (key, version).

`SUPPORTED` is what ApiVersions advertises: every key with min version 0 (librdkafka before 2.11 only enables
features, e.g. compression, when the broker's range *contains* old versions) and the highest non-flexible max
(no client needs flexible versions, and we never write tagged fields). See the spec §2; SaslHandshake (17) and
SaslAuthenticate (36) are added to its table for authenticated listeners (always advertised, as Kafka does).
"""

from __future__ import annotations

from typing import Any

from ..primitives import Schema
from . import admin, api_versions, fetch, groups, list_offsets, metadata, offsets, produce, sasl

__all__ = [
    "API_KEYS",
    "SUPPORTED",
    "request_schema",
    "response_schema",
    "request_type",
    "response_type",
    "is_supported",
    "api_versions_response",
]

#: api key -> name (as in Kafka's ApiKeys).
API_KEYS: dict[int, str] = {
    0: "Produce",
    1: "Fetch",
    2: "ListOffsets",
    3: "Metadata",
    8: "OffsetCommit",
    9: "OffsetFetch",
    10: "FindCoordinator",
    11: "JoinGroup",
    12: "Heartbeat",
    13: "LeaveGroup",
    14: "SyncGroup",
    15: "DescribeGroups",
    16: "ListGroups",
    17: "SaslHandshake",
    18: "ApiVersions",
    19: "CreateTopics",
    20: "DeleteTopics",
    22: "InitProducerId",
    36: "SaslAuthenticate",
}

# key -> (request schemas by version, response schemas by version)
_SCHEMAS: dict[int, tuple[dict[int, Schema], dict[int, Schema]]] = {
    produce.API_KEY: (produce.REQUEST_SCHEMAS, produce.RESPONSE_SCHEMAS),
    fetch.API_KEY: (fetch.REQUEST_SCHEMAS, fetch.RESPONSE_SCHEMAS),
    list_offsets.API_KEY: (list_offsets.REQUEST_SCHEMAS, list_offsets.RESPONSE_SCHEMAS),
    metadata.API_KEY: (metadata.REQUEST_SCHEMAS, metadata.RESPONSE_SCHEMAS),
    offsets.OFFSET_COMMIT_KEY: (offsets.OFFSET_COMMIT_REQUEST_SCHEMAS, offsets.OFFSET_COMMIT_RESPONSE_SCHEMAS),
    offsets.OFFSET_FETCH_KEY: (offsets.OFFSET_FETCH_REQUEST_SCHEMAS, offsets.OFFSET_FETCH_RESPONSE_SCHEMAS),
    **groups.SCHEMAS,
    api_versions.API_KEY: (api_versions.REQUEST_SCHEMAS, api_versions.RESPONSE_SCHEMAS),
    **admin.SCHEMAS,
    **sasl.SCHEMAS,
}

#: api key -> (min version, max version) advertised and implemented.
SUPPORTED: dict[int, tuple[int, int]] = {
    key: (0, max(_SCHEMAS[key][0])) for key in sorted(API_KEYS)
}
assert set(_SCHEMAS) == set(API_KEYS)
assert all(set(req) == set(resp) for req, resp in _SCHEMAS.values())
assert SUPPORTED == {0: (0, 8), 1: (0, 11), 2: (0, 5), 3: (0, 8), 8: (0, 7), 9: (0, 5), 10: (0, 2), 11: (0, 5),
                     12: (0, 3), 13: (0, 3), 14: (0, 3), 15: (0, 4), 16: (0, 2), 17: (0, 1), 18: (0, 2),
                     19: (0, 4), 20: (0, 3), 22: (0, 1), 36: (0, 1)}, "the spec's §2 table + SASL"


def is_supported(key: int, version: int) -> bool:
    """True when (key, version) is in `SUPPORTED`."""
    bounds = SUPPORTED.get(key)
    return bounds is not None and bounds[0] <= version <= bounds[1]


def request_schema(key: int, version: int) -> Schema:
    """The request body schema of (key, version); KeyError when unsupported."""
    try:
        return _SCHEMAS[key][0][version]
    except KeyError:
        raise KeyError(f"unsupported request: api key {key} version {version}") from None


def response_schema(key: int, version: int) -> Schema:
    """The response body schema of (key, version); KeyError when unsupported."""
    try:
        return _SCHEMAS[key][1][version]
    except KeyError:
        raise KeyError(f"unsupported response: api key {key} version {version}") from None


def request_type(key: int) -> type:
    """The request dataclass of `key` (the same for every version)."""
    return request_schema(key, 0).cls


def response_type(key: int) -> type:
    """The response dataclass of `key` (the same for every version)."""
    return response_schema(key, 0).cls


def api_versions_response(error_code: int = 0, throttle_time_ms: int = 0) -> Any:
    """An `ApiVersionsResponse` listing every supported key (the answer to ApiVersions, v0 fallback included)."""
    return api_versions.ApiVersionsResponse(
        error_code=error_code,
        api_keys=[api_versions.ApiVersion(key, lo, hi) for key, (lo, hi) in SUPPORTED.items()],
        throttle_time_ms=throttle_time_ms,
    )
