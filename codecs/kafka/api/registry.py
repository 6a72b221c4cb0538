"""The api keys and versions the codec speaks, which of them are flexible, and the schema of every (key, version).

`SUPPORTED` is every key the codec implements, up to the highest version a Kafka 4.1 broker offers, from version
0 (librdkafka before 2.11 only enables features, e.g. compression, when the broker's range *contains* old
versions; Kafka 4 itself dropped some old versions, KIP-896) — except the share-group APIs, which start at v1 as
in Kafka 4.1 (their v0 was Kafka 4.0's early access). Flexible versions (KIP-482: compact strings, bytes and
arrays, tagged-field sections, request header v2 and response header v1): `FLEXIBLE_SINCE` gives the first
flexible version of every key (as in Kafka's message JSON), `is_flexible(key, version)` answers for one, and the
schemas of those versions are `flexible(...)` ones (see `message`). Tagged fields sent to us are read and skipped;
we never write a non-empty tagged-field section. SaslHandshake (17) and SaslAuthenticate (36) are in the table for
authenticated listeners.

What a server *advertises* is its business: the gateway lists `SUPPORTED` restricted to the keys it has handlers
for (`advertised(keys)`).
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from ..primitives import Schema
from . import (acls, admin, api_versions, cluster, configs, consumer_groups, fetch, groups, list_offsets, metadata,
               offsets, produce, quotas, sasl, scram_credentials, share_groups, transactions)

__all__ = [
    "API_KEYS",
    "SUPPORTED",
    "FLEXIBLE_SINCE",
    "advertised",
    "is_flexible",
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
    21: "DeleteRecords",
    22: "InitProducerId",
    24: "AddPartitionsToTxn",
    25: "AddOffsetsToTxn",
    26: "EndTxn",
    28: "TxnOffsetCommit",
    29: "DescribeAcls",
    30: "CreateAcls",
    31: "DeleteAcls",
    32: "DescribeConfigs",
    33: "AlterConfigs",
    35: "DescribeLogDirs",
    36: "SaslAuthenticate",
    37: "CreatePartitions",
    42: "DeleteGroups",
    44: "IncrementalAlterConfigs",
    47: "OffsetDelete",
    48: "DescribeClientQuotas",
    49: "AlterClientQuotas",
    50: "DescribeUserScramCredentials",
    51: "AlterUserScramCredentials",
    60: "DescribeCluster",
    68: "ConsumerGroupHeartbeat",
    69: "ConsumerGroupDescribe",
    76: "ShareGroupHeartbeat",
    77: "ShareGroupDescribe",
    78: "ShareFetch",
    79: "ShareAcknowledge",
    90: "DescribeShareGroupOffsets",
    91: "AlterShareGroupOffsets",
    92: "DeleteShareGroupOffsets",
}

#: api key -> its first flexible version (Kafka's "flexibleVersions"), None when no version is flexible.
#: Decides the header versions of a (key, version), implemented or not.
FLEXIBLE_SINCE: dict[int, int | None] = {
    0: 9, 1: 12, 2: 6, 3: 9, 8: 8, 9: 6, 10: 3, 11: 6, 12: 4, 13: 4, 14: 4, 15: 5, 16: 3, 17: None, 18: 3,
    19: 5, 20: 4, 21: 2, 22: 2, 24: 3, 25: 3, 26: 3, 28: 3, 32: 4, 33: 2, 35: 2, 36: 2, 37: 2, 42: 2, 44: 1,
    47: None, 60: 0, 68: 0, 69: 0, 76: 0, 77: 0, 78: 0, 79: 0, 90: 0, 91: 0, 92: 0,
    29: 2, 30: 2, 31: 2, 48: 1, 49: 1, 50: 0, 51: 0,  # (security: acls, quotas, scram_credentials)
}

# key -> (request schemas by version, response schemas by version)
_SCHEMAS: dict[int, tuple[dict[int, Schema], dict[int, Schema]]] = {
    produce.API_KEY: (produce.REQUEST_SCHEMAS, produce.RESPONSE_SCHEMAS),
    fetch.API_KEY: (fetch.REQUEST_SCHEMAS, fetch.RESPONSE_SCHEMAS),
    list_offsets.API_KEY: (list_offsets.REQUEST_SCHEMAS, list_offsets.RESPONSE_SCHEMAS),
    metadata.API_KEY: (metadata.REQUEST_SCHEMAS, metadata.RESPONSE_SCHEMAS),
    offsets.OFFSET_COMMIT_KEY: (offsets.OFFSET_COMMIT_REQUEST_SCHEMAS, offsets.OFFSET_COMMIT_RESPONSE_SCHEMAS),
    offsets.OFFSET_FETCH_KEY: (offsets.OFFSET_FETCH_REQUEST_SCHEMAS, offsets.OFFSET_FETCH_RESPONSE_SCHEMAS),
    offsets.OFFSET_DELETE_KEY: (offsets.OFFSET_DELETE_REQUEST_SCHEMAS, offsets.OFFSET_DELETE_RESPONSE_SCHEMAS),
    **groups.SCHEMAS,
    **consumer_groups.SCHEMAS,
    **share_groups.SCHEMAS,
    api_versions.API_KEY: (api_versions.REQUEST_SCHEMAS, api_versions.RESPONSE_SCHEMAS),
    **admin.SCHEMAS,
    **transactions.SCHEMAS,
    **configs.SCHEMAS,
    **cluster.SCHEMAS,
    **sasl.SCHEMAS,
    **acls.SCHEMAS,
    **quotas.SCHEMAS,
    **scram_credentials.SCHEMAS,
}

#: api key -> (min version, max version) the codec implements.
SUPPORTED: dict[int, tuple[int, int]] = {
    key: (min(_SCHEMAS[key][0]), max(_SCHEMAS[key][0])) for key in sorted(API_KEYS)
}


def is_flexible(key: int, version: int) -> bool:
    """True when (key, version) is a flexible version (KIP-482): request header v2, response header v1 (but
    ApiVersions always answers with header v0), compact types and tagged fields in the bodies."""
    since = FLEXIBLE_SINCE.get(key)
    return since is not None and version >= since


assert set(_SCHEMAS) == set(API_KEYS) == set(FLEXIBLE_SINCE)
assert all(set(req) == set(resp) for req, resp in _SCHEMAS.values())
assert all(sch.flexible == is_flexible(key, v) for key, (req, resp) in _SCHEMAS.items()
           for schemas in (req, resp) for v, sch in schemas.items()), "flexible schemas where FLEXIBLE_SINCE says"
assert SUPPORTED == {0: (0, 13), 1: (0, 18), 2: (0, 10), 3: (0, 13), 8: (0, 9), 9: (0, 9), 10: (0, 6), 11: (0, 9),
                     12: (0, 4), 13: (0, 5), 14: (0, 5), 15: (0, 6), 16: (0, 5), 17: (0, 1), 18: (0, 4),
                     19: (0, 7), 20: (0, 6), 21: (0, 2), 22: (0, 5), 24: (0, 5), 25: (0, 4), 26: (0, 5),
                     28: (0, 5), 32: (0, 4), 33: (0, 2), 35: (0, 4), 36: (0, 2), 37: (0, 3), 42: (0, 2),
                     44: (0, 1), 47: (0, 0), 60: (0, 2), 68: (0, 1), 69: (0, 1), 76: (1, 1), 77: (1, 1),
                     78: (1, 1), 79: (1, 1), 90: (0, 0), 91: (0, 0), 92: (0, 0),
                     29: (0, 3), 30: (0, 3), 31: (0, 3), 48: (0, 1), 49: (0, 1), 50: (0, 0), 51: (0, 0)}, \
    "Kafka 4.1's maxima (franz-go's kversion.V4_1_0), from version 0 (share APIs: 1)"


def advertised(keys: Iterable[int]) -> dict[int, tuple[int, int]]:
    """`SUPPORTED` restricted to `keys` (those a server has handlers for), in key order; unknown keys are ignored."""
    wanted = set(keys)
    return {key: bounds for key, bounds in SUPPORTED.items() if key in wanted}


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
    return request_schema(key, SUPPORTED[key][0]).cls


def response_type(key: int) -> type:
    """The response dataclass of `key` (the same for every version)."""
    return response_schema(key, SUPPORTED[key][0]).cls


def api_versions_response(error_code: int = 0, throttle_time_ms: int = 0,
                          versions: dict[int, tuple[int, int]] | None = None) -> Any:
    """An `ApiVersionsResponse` listing `versions` (default: every supported key): the answer to ApiVersions,
    v0 fallback included."""
    table = SUPPORTED if versions is None else versions
    return api_versions.ApiVersionsResponse(
        error_code=error_code,
        api_keys=[api_versions.ApiVersion(key, lo, hi) for key, (lo, hi) in table.items()],
        throttle_time_ms=throttle_time_ms,
    )
