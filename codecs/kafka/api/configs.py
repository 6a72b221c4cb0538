"""Configuration APIs: DescribeConfigs (32, v0-4, flexible from 4), AlterConfigs (33, v0-2, from 2),
IncrementalAlterConfigs (44, v0-1, from 1).

A resource is (resource_type, resource_name): a topic by its name, a broker by its node id as a string ("" = the
cluster-wide default). DescribeConfigs v1 replaced each entry's `is_default` by `config_source` and added the
synonyms; v3 adds each entry's type and documentation. AlterConfigs replaces a resource's whole dynamic
configuration; IncrementalAlterConfigs sets, deletes, appends to or subtracts from single entries. The flexible
versions change nothing else.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from enum import IntEnum

from ..message import message, only, since, struct
from ..primitives import Array, Boolean, Int8, Int16, Int32, NullableArray, NullableString, String

__all__ = [
    "DESCRIBE_CONFIGS_KEY",
    "ALTER_CONFIGS_KEY",
    "INCREMENTAL_ALTER_CONFIGS_KEY",
    "ConfigResourceType",
    "ConfigSource",
    "ConfigType",
    "AlterConfigOp",
    "DescribeConfigsRequest",
    "DescribeConfigsResource",
    "DescribeConfigsResponse",
    "DescribeConfigsResult",
    "DescribeConfigsResourceResult",
    "DescribeConfigsSynonym",
    "AlterConfigsRequest",
    "AlterConfigsResource",
    "AlterableConfig",
    "AlterConfigsResponse",
    "AlterConfigsResourceResponse",
    "IncrementalAlterConfigsRequest",
    "IncrementalAlterConfigsResource",
    "IncrementalAlterableConfig",
    "IncrementalAlterConfigsResponse",
    "SCHEMAS",
]

DESCRIBE_CONFIGS_KEY = 32
ALTER_CONFIGS_KEY = 33
INCREMENTAL_ALTER_CONFIGS_KEY = 44


class ConfigResourceType(IntEnum):
    """`resource_type` values (Kafka's ConfigResource.Type)."""

    UNKNOWN = 0
    TOPIC = 2
    BROKER = 4
    BROKER_LOGGER = 8
    CLIENT_METRICS = 16
    GROUP = 32  # KIP-848/KIP-932 group configs


class ConfigSource(IntEnum):
    """`config_source` values (v1+) of a config entry or synonym."""

    UNKNOWN = 0
    DYNAMIC_TOPIC_CONFIG = 1
    DYNAMIC_BROKER_CONFIG = 2
    DYNAMIC_DEFAULT_BROKER_CONFIG = 3
    STATIC_BROKER_CONFIG = 4
    DEFAULT_CONFIG = 5
    DYNAMIC_BROKER_LOGGER_CONFIG = 6
    DYNAMIC_CLIENT_METRICS_CONFIG = 7
    DYNAMIC_GROUP_CONFIG = 8


class ConfigType(IntEnum):
    """`config_type` values (v3+)."""

    UNKNOWN = 0
    BOOLEAN = 1
    STRING = 2
    INT = 3
    SHORT = 4
    LONG = 5
    DOUBLE = 6
    LIST = 7
    CLASS = 8
    PASSWORD = 9


class AlterConfigOp(IntEnum):
    """IncrementalAlterConfigs `config_operation` values."""

    SET = 0
    DELETE = 1
    APPEND = 2
    SUBTRACT = 3


# ========================================================================================== DescribeConfigs

@dataclass(slots=True)
class DescribeConfigsResource:
    resource_type: int = 0
    resource_name: str = ""
    configuration_keys: list[str] | None = None  # None = every key


@dataclass(slots=True)
class DescribeConfigsRequest:
    resources: list[DescribeConfigsResource] = field(default_factory=list)
    include_synonyms: bool = False  # v1+
    include_documentation: bool = False  # v3+


@dataclass(slots=True)
class DescribeConfigsSynonym:
    name: str = ""
    value: str | None = None
    source: int = 0


@dataclass(slots=True)
class DescribeConfigsResourceResult:
    name: str = ""
    value: str | None = None
    read_only: bool = False
    config_source: int = -1  # v1+
    is_default: bool = False  # v0 only
    is_sensitive: bool = False
    synonyms: list[DescribeConfigsSynonym] = field(default_factory=list)  # v1+
    config_type: int = 0  # v3+
    documentation: str | None = None  # v3+


@dataclass(slots=True)
class DescribeConfigsResult:
    error_code: int = 0
    error_message: str | None = None
    resource_type: int = 0
    resource_name: str = ""
    configs: list[DescribeConfigsResourceResult] = field(default_factory=list)


@dataclass(slots=True)
class DescribeConfigsResponse:
    throttle_time_ms: int = 0
    results: list[DescribeConfigsResult] = field(default_factory=list)


DESCRIBE_CONFIGS_REQUEST_SCHEMAS = message(
    DescribeConfigsRequest, 4, flexible_since=4,
    resources=Array(struct(DescribeConfigsResource, resource_type=Int8, resource_name=String,
                           configuration_keys=NullableArray(String))),
    include_synonyms=since(1, Boolean), include_documentation=since(3, Boolean))
DESCRIBE_CONFIGS_RESPONSE_SCHEMAS = message(
    DescribeConfigsResponse, 4, flexible_since=4,
    throttle_time_ms=Int32,
    results=Array(struct(
        DescribeConfigsResult, error_code=Int16, error_message=NullableString, resource_type=Int8,
        resource_name=String,
        configs=Array(struct(
            DescribeConfigsResourceResult, name=String, value=NullableString, read_only=Boolean,
            is_default=only(0, 0, Boolean),  # v1 replaces it by config_source and adds the synonyms
            config_source=since(1, Int8), is_sensitive=Boolean,
            synonyms=since(1, Array(struct(DescribeConfigsSynonym, name=String, value=NullableString,
                                           source=Int8))),
            config_type=since(3, Int8), documentation=since(3, NullableString))))))


# ============================================================================================= AlterConfigs

@dataclass(slots=True)
class AlterableConfig:
    name: str = ""
    value: str | None = None


@dataclass(slots=True)
class AlterConfigsResource:
    resource_type: int = 0
    resource_name: str = ""
    configs: list[AlterableConfig] = field(default_factory=list)


@dataclass(slots=True)
class AlterConfigsRequest:
    resources: list[AlterConfigsResource] = field(default_factory=list)
    validate_only: bool = False


@dataclass(slots=True)
class AlterConfigsResourceResponse:
    """One resource's result, in AlterConfigs and IncrementalAlterConfigs responses alike."""

    error_code: int = 0
    error_message: str | None = None
    resource_type: int = 0
    resource_name: str = ""


@dataclass(slots=True)
class AlterConfigsResponse:
    throttle_time_ms: int = 0
    responses: list[AlterConfigsResourceResponse] = field(default_factory=list)


ALTER_CONFIGS_REQUEST_SCHEMAS = message(  # v1 = v0
    AlterConfigsRequest, 2, flexible_since=2,
    resources=Array(struct(AlterConfigsResource, resource_type=Int8, resource_name=String,
                           configs=Array(struct(AlterableConfig, name=String, value=NullableString)))),
    validate_only=Boolean)
_ALTER_RESULT = struct(AlterConfigsResourceResponse, error_code=Int16, error_message=NullableString,
                       resource_type=Int8, resource_name=String)
ALTER_CONFIGS_RESPONSE_SCHEMAS = message(
    AlterConfigsResponse, 2, flexible_since=2, throttle_time_ms=Int32, responses=Array(_ALTER_RESULT))


# ================================================================================= IncrementalAlterConfigs

@dataclass(slots=True)
class IncrementalAlterableConfig:
    name: str = ""
    config_operation: int = 0  # AlterConfigOp
    value: str | None = None


@dataclass(slots=True)
class IncrementalAlterConfigsResource:
    resource_type: int = 0
    resource_name: str = ""
    configs: list[IncrementalAlterableConfig] = field(default_factory=list)


@dataclass(slots=True)
class IncrementalAlterConfigsRequest:
    resources: list[IncrementalAlterConfigsResource] = field(default_factory=list)
    validate_only: bool = False


@dataclass(slots=True)
class IncrementalAlterConfigsResponse:
    throttle_time_ms: int = 0
    responses: list[AlterConfigsResourceResponse] = field(default_factory=list)


INCREMENTAL_ALTER_CONFIGS_REQUEST_SCHEMAS = message(
    IncrementalAlterConfigsRequest, 1, flexible_since=1,
    resources=Array(struct(IncrementalAlterConfigsResource, resource_type=Int8, resource_name=String,
                           configs=Array(struct(IncrementalAlterableConfig, name=String, config_operation=Int8,
                                                value=NullableString)))),
    validate_only=Boolean)
INCREMENTAL_ALTER_CONFIGS_RESPONSE_SCHEMAS = message(
    IncrementalAlterConfigsResponse, 1, flexible_since=1, throttle_time_ms=Int32, responses=Array(_ALTER_RESULT))


#: key -> (request schemas by version, response schemas by version)
SCHEMAS = {
    DESCRIBE_CONFIGS_KEY: (DESCRIBE_CONFIGS_REQUEST_SCHEMAS, DESCRIBE_CONFIGS_RESPONSE_SCHEMAS),
    ALTER_CONFIGS_KEY: (ALTER_CONFIGS_REQUEST_SCHEMAS, ALTER_CONFIGS_RESPONSE_SCHEMAS),
    INCREMENTAL_ALTER_CONFIGS_KEY: (INCREMENTAL_ALTER_CONFIGS_REQUEST_SCHEMAS, INCREMENTAL_ALTER_CONFIGS_RESPONSE_SCHEMAS),
}
