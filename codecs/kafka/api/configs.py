"""Configuration APIs: DescribeConfigs (32, v0-3), AlterConfigs (33, v0-1), IncrementalAlterConfigs (44, v0-1).

A resource is (resource_type, resource_name): a topic by its name, a broker by its node id as a string ("" = the
cluster-wide default). DescribeConfigs v1 replaced each entry's `is_default` by `config_source` and added the
synonyms; v3 adds each entry's type and documentation. AlterConfigs replaces a resource's whole dynamic
configuration; IncrementalAlterConfigs sets, deletes, appends to or subtracts from single entries (v1 is
flexible: the Java admin client and librdkafka use it when offered).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from enum import IntEnum

from ..primitives import (Array, Boolean, Int8, Int16, Int32, NullableArray, NullableString, String, flexible,
                          schema, versioned)

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


class ConfigSource(IntEnum):
    """`config_source` values (v1+) of a config entry or synonym."""

    UNKNOWN = 0
    DYNAMIC_TOPIC_CONFIG = 1
    DYNAMIC_BROKER_CONFIG = 2
    DYNAMIC_DEFAULT_BROKER_CONFIG = 3
    STATIC_BROKER_CONFIG = 4
    DEFAULT_CONFIG = 5
    DYNAMIC_BROKER_LOGGER_CONFIG = 6


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


_DC_RESOURCE_V0 = schema(DescribeConfigsResource, resource_type=Int8, resource_name=String,
                         configuration_keys=NullableArray(String))
DESCRIBE_CONFIGS_REQUEST_V0 = schema(DescribeConfigsRequest, resources=Array(_DC_RESOURCE_V0))
DESCRIBE_CONFIGS_REQUEST_V1 = schema(DescribeConfigsRequest, resources=Array(_DC_RESOURCE_V0),
                                     include_synonyms=Boolean)  # v2 = v1
DESCRIBE_CONFIGS_REQUEST_V3 = schema(DescribeConfigsRequest, resources=Array(_DC_RESOURCE_V0),
                                     include_synonyms=Boolean, include_documentation=Boolean)


def _dc_response(entry):
    return schema(DescribeConfigsResponse, throttle_time_ms=Int32, results=Array(schema(
        DescribeConfigsResult, error_code=Int16, error_message=NullableString, resource_type=Int8,
        resource_name=String, configs=Array(entry))))


_DC_SYNONYM_V1 = schema(DescribeConfigsSynonym, name=String, value=NullableString, source=Int8)
DESCRIBE_CONFIGS_RESPONSE_V0 = _dc_response(schema(
    DescribeConfigsResourceResult, name=String, value=NullableString, read_only=Boolean, is_default=Boolean,
    is_sensitive=Boolean))
# v1 replaces is_default by config_source and adds the synonyms; v2 = v1.
DESCRIBE_CONFIGS_RESPONSE_V1 = _dc_response(schema(
    DescribeConfigsResourceResult, name=String, value=NullableString, read_only=Boolean, config_source=Int8,
    is_sensitive=Boolean, synonyms=Array(_DC_SYNONYM_V1)))
# v3 adds config_type and documentation.
DESCRIBE_CONFIGS_RESPONSE_V3 = _dc_response(schema(
    DescribeConfigsResourceResult, name=String, value=NullableString, read_only=Boolean, config_source=Int8,
    is_sensitive=Boolean, synonyms=Array(_DC_SYNONYM_V1), config_type=Int8, documentation=NullableString))


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


ALTER_CONFIGS_REQUEST_V0 = schema(
    AlterConfigsRequest, resources=Array(schema(
        AlterConfigsResource, resource_type=Int8, resource_name=String,
        configs=Array(schema(AlterableConfig, name=String, value=NullableString)))),
    validate_only=Boolean)  # v1 = v0
_ALTER_RESULT_V0 = schema(AlterConfigsResourceResponse, error_code=Int16, error_message=NullableString,
                          resource_type=Int8, resource_name=String)
ALTER_CONFIGS_RESPONSE_V0 = schema(AlterConfigsResponse, throttle_time_ms=Int32,
                                   responses=Array(_ALTER_RESULT_V0))  # v1 = v0


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


INCREMENTAL_ALTER_CONFIGS_REQUEST_V0 = schema(
    IncrementalAlterConfigsRequest, resources=Array(schema(
        IncrementalAlterConfigsResource, resource_type=Int8, resource_name=String,
        configs=Array(schema(IncrementalAlterableConfig, name=String, config_operation=Int8,
                             value=NullableString)))),
    validate_only=Boolean)
INCREMENTAL_ALTER_CONFIGS_RESPONSE_V0 = schema(IncrementalAlterConfigsResponse, throttle_time_ms=Int32,
                                               responses=Array(_ALTER_RESULT_V0))
# v1: the same fields, flexible.
INCREMENTAL_ALTER_CONFIGS_REQUEST_V1 = flexible(INCREMENTAL_ALTER_CONFIGS_REQUEST_V0)
INCREMENTAL_ALTER_CONFIGS_RESPONSE_V1 = flexible(INCREMENTAL_ALTER_CONFIGS_RESPONSE_V0)


#: key -> (request schemas by version, response schemas by version)
SCHEMAS = {
    DESCRIBE_CONFIGS_KEY: (
        versioned(3, {0: DESCRIBE_CONFIGS_REQUEST_V0, 1: DESCRIBE_CONFIGS_REQUEST_V1,
                      3: DESCRIBE_CONFIGS_REQUEST_V3}),
        versioned(3, {0: DESCRIBE_CONFIGS_RESPONSE_V0, 1: DESCRIBE_CONFIGS_RESPONSE_V1,
                      3: DESCRIBE_CONFIGS_RESPONSE_V3})),
    ALTER_CONFIGS_KEY: (
        versioned(1, {0: ALTER_CONFIGS_REQUEST_V0}),
        versioned(1, {0: ALTER_CONFIGS_RESPONSE_V0})),
    INCREMENTAL_ALTER_CONFIGS_KEY: (
        versioned(1, {0: INCREMENTAL_ALTER_CONFIGS_REQUEST_V0, 1: INCREMENTAL_ALTER_CONFIGS_REQUEST_V1}),
        versioned(1, {0: INCREMENTAL_ALTER_CONFIGS_RESPONSE_V0, 1: INCREMENTAL_ALTER_CONFIGS_RESPONSE_V1})),
}
