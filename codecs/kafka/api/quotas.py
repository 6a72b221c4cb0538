"""Client quota APIs (KIP-546): DescribeClientQuotas (48) and AlterClientQuotas (49), v0-1 (flexible from v1).

An entity is a list of (entity type, name) pairs — types `user`, `client-id` (and `ip`); a null name is the
entity type's default (`<default>` in kafka-configs). A quota is a key (`producer_byte_rate`, `consumer_byte_rate`,
`request_percentage`, …) with a float64 value. DescribeClientQuotas filters entities by components: match type 0 =
this exact name, 1 = the default, 2 = any with this entity type; `strict` asks for the entities with no other
entity types.

Bounds: every array and string is bounded by the frame (`primitives`).
"""

from __future__ import annotations

from dataclasses import dataclass, field

import construct as c

from ..message import message, struct
from ..primitives import Array, Boolean, Int8, Int16, Int32, NullableArray, NullableString, String

__all__ = ["DESCRIBE_CLIENT_QUOTAS_KEY", "ALTER_CLIENT_QUOTAS_KEY", "MATCH_EXACT", "MATCH_DEFAULT", "MATCH_ANY",
           "ComponentData", "DescribeClientQuotasRequest", "DescribeClientQuotasResponse", "EntityData",
           "EntryData", "ValueData", "AlterClientQuotasRequest", "AlterClientQuotasResponse", "AlterEntryData",
           "OpData", "AlterEntryResult", "SCHEMAS"]

DESCRIBE_CLIENT_QUOTAS_KEY, ALTER_CLIENT_QUOTAS_KEY = 48, 49
MATCH_EXACT, MATCH_DEFAULT, MATCH_ANY = 0, 1, 2
#: Kafka's float64 (IEEE 754, big-endian): a FormatField, fused into the fixed-size runs of `Schema`.
Float64 = c.Float64b


@dataclass(slots=True)
class ComponentData:
    entity_type: str = ""
    match_type: int = MATCH_EXACT
    match: str | None = None


@dataclass(slots=True)
class DescribeClientQuotasRequest:
    components: list[ComponentData] = field(default_factory=list)
    strict: bool = False


@dataclass(slots=True)
class EntityData:
    entity_type: str = ""
    entity_name: str | None = None


@dataclass(slots=True)
class ValueData:
    key: str = ""
    value: float = 0.0


@dataclass(slots=True)
class EntryData:
    entity: list[EntityData] = field(default_factory=list)
    values: list[ValueData] = field(default_factory=list)


@dataclass(slots=True)
class DescribeClientQuotasResponse:
    throttle_time_ms: int = 0
    error_code: int = 0
    error_message: str | None = None
    entries: list[EntryData] | None = field(default_factory=list)


@dataclass(slots=True)
class OpData:
    key: str = ""
    value: float = 0.0
    remove: bool = False


@dataclass(slots=True)
class AlterEntryData:
    entity: list[EntityData] = field(default_factory=list)
    ops: list[OpData] = field(default_factory=list)


@dataclass(slots=True)
class AlterClientQuotasRequest:
    entries: list[AlterEntryData] = field(default_factory=list)
    validate_only: bool = False


@dataclass(slots=True)
class AlterEntryResult:
    error_code: int = 0
    error_message: str | None = None
    entity: list[EntityData] = field(default_factory=list)


@dataclass(slots=True)
class AlterClientQuotasResponse:
    throttle_time_ms: int = 0
    entries: list[AlterEntryResult] = field(default_factory=list)


def _quotas(cls: type, **fields):
    return message(cls, 1, flexible_since=1, **fields)


_ENTITY = Array(struct(EntityData, entity_type=String, entity_name=NullableString))

SCHEMAS = {
    DESCRIBE_CLIENT_QUOTAS_KEY: (
        _quotas(DescribeClientQuotasRequest, components=Array(struct(
            ComponentData, entity_type=String, match_type=Int8, match=NullableString)), strict=Boolean),
        _quotas(DescribeClientQuotasResponse, throttle_time_ms=Int32, error_code=Int16, error_message=NullableString,
                entries=NullableArray(struct(EntryData, entity=_ENTITY,
                                             values=Array(struct(ValueData, key=String, value=Float64)))))),
    ALTER_CLIENT_QUOTAS_KEY: (
        _quotas(AlterClientQuotasRequest, entries=Array(struct(
            AlterEntryData, entity=_ENTITY, ops=Array(struct(OpData, key=String, value=Float64, remove=Boolean)))),
                validate_only=Boolean),
        _quotas(AlterClientQuotasResponse, throttle_time_ms=Int32, entries=Array(struct(
            AlterEntryResult, error_code=Int16, error_message=NullableString, entity=_ENTITY)))),
}
