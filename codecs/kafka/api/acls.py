"""ACL APIs (KIP-140, KIP-290 for prefixed patterns): DescribeAcls (29), CreateAcls (30), DeleteAcls (31), v0-3
(flexible from v2).

v0 has no pattern type (every binding LITERAL: the field keeps its default, 3); v1 adds it (KIP-290); v2 is
flexible; v3 changes nothing on the wire (it tells the client the broker may answer with user principals of other
types). The codes of resource types, pattern types, operations and permissions are Kafka's
(`gateway.security.acls`).

Bounds: every array and string is bounded by the frame (`primitives`).
"""

from __future__ import annotations

from dataclasses import dataclass, field

from ..message import message, since, struct
from ..primitives import Array, Int8, Int16, Int32, NullableString, String

__all__ = ["DESCRIBE_ACLS_KEY", "CREATE_ACLS_KEY", "DELETE_ACLS_KEY", "LITERAL", "AclCreation", "AclCreationResult",
           "AclDescription", "CreateAclsRequest", "CreateAclsResponse", "DeleteAclsFilter", "DeleteAclsFilterResult",
           "DeleteAclsMatchingAcl", "DeleteAclsRequest", "DeleteAclsResponse", "DescribeAclsRequest",
           "DescribeAclsResource", "DescribeAclsResponse", "SCHEMAS"]

DESCRIBE_ACLS_KEY, CREATE_ACLS_KEY, DELETE_ACLS_KEY = 29, 30, 31
#: The pattern type of a v0 binding (which has none on the wire).
LITERAL = 3
_MAX_VERSION, _FLEXIBLE_SINCE = 3, 2


@dataclass(slots=True)
class DescribeAclsRequest:
    resource_type_filter: int = 0
    resource_name_filter: str | None = None
    pattern_type_filter: int = LITERAL  # v1+
    principal_filter: str | None = None
    host_filter: str | None = None
    operation: int = 0
    permission_type: int = 0


@dataclass(slots=True)
class AclDescription:
    principal: str = ""
    host: str = ""
    operation: int = 0
    permission_type: int = 0


@dataclass(slots=True)
class DescribeAclsResource:
    resource_type: int = 0
    resource_name: str = ""
    pattern_type: int = LITERAL  # v1+
    acls: list[AclDescription] = field(default_factory=list)


@dataclass(slots=True)
class DescribeAclsResponse:
    throttle_time_ms: int = 0
    error_code: int = 0
    error_message: str | None = None
    resources: list[DescribeAclsResource] = field(default_factory=list)


@dataclass(slots=True)
class AclCreation:
    resource_type: int = 0
    resource_name: str = ""
    resource_pattern_type: int = LITERAL  # v1+
    principal: str = ""
    host: str = ""
    operation: int = 0
    permission_type: int = 0


@dataclass(slots=True)
class CreateAclsRequest:
    creations: list[AclCreation] = field(default_factory=list)


@dataclass(slots=True)
class AclCreationResult:
    error_code: int = 0
    error_message: str | None = None


@dataclass(slots=True)
class CreateAclsResponse:
    throttle_time_ms: int = 0
    results: list[AclCreationResult] = field(default_factory=list)


@dataclass(slots=True)
class DeleteAclsFilter:
    resource_type_filter: int = 0
    resource_name_filter: str | None = None
    pattern_type_filter: int = LITERAL  # v1+
    principal_filter: str | None = None
    host_filter: str | None = None
    operation: int = 0
    permission_type: int = 0


@dataclass(slots=True)
class DeleteAclsRequest:
    filters: list[DeleteAclsFilter] = field(default_factory=list)


@dataclass(slots=True)
class DeleteAclsMatchingAcl:
    error_code: int = 0
    error_message: str | None = None
    resource_type: int = 0
    resource_name: str = ""
    pattern_type: int = LITERAL  # v1+
    principal: str = ""
    host: str = ""
    operation: int = 0
    permission_type: int = 0


@dataclass(slots=True)
class DeleteAclsFilterResult:
    error_code: int = 0
    error_message: str | None = None
    matching_acls: list[DeleteAclsMatchingAcl] = field(default_factory=list)


@dataclass(slots=True)
class DeleteAclsResponse:
    throttle_time_ms: int = 0
    filter_results: list[DeleteAclsFilterResult] = field(default_factory=list)


def _filter() -> dict:
    """The fields of a binding filter (DescribeAcls' request, DeleteAcls' filters)."""
    return dict(resource_type_filter=Int8, resource_name_filter=NullableString, pattern_type_filter=since(1, Int8),
                principal_filter=NullableString, host_filter=NullableString, operation=Int8, permission_type=Int8)


def _acls(cls: type, **fields):
    return message(cls, _MAX_VERSION, flexible_since=_FLEXIBLE_SINCE, **fields)


SCHEMAS = {
    DESCRIBE_ACLS_KEY: (
        _acls(DescribeAclsRequest, **_filter()),
        _acls(DescribeAclsResponse, throttle_time_ms=Int32, error_code=Int16, error_message=NullableString,
              resources=Array(struct(DescribeAclsResource, resource_type=Int8, resource_name=String,
                                     pattern_type=since(1, Int8),
                                     acls=Array(struct(AclDescription, principal=String, host=String, operation=Int8,
                                                       permission_type=Int8)))))),
    CREATE_ACLS_KEY: (
        _acls(CreateAclsRequest, creations=Array(struct(
            AclCreation, resource_type=Int8, resource_name=String, resource_pattern_type=since(1, Int8),
            principal=String, host=String, operation=Int8, permission_type=Int8))),
        _acls(CreateAclsResponse, throttle_time_ms=Int32, results=Array(struct(
            AclCreationResult, error_code=Int16, error_message=NullableString)))),
    DELETE_ACLS_KEY: (
        _acls(DeleteAclsRequest, filters=Array(struct(DeleteAclsFilter, **_filter()))),
        _acls(DeleteAclsResponse, throttle_time_ms=Int32, filter_results=Array(struct(
            DeleteAclsFilterResult, error_code=Int16, error_message=NullableString,
            matching_acls=Array(struct(DeleteAclsMatchingAcl, error_code=Int16, error_message=NullableString,
                                       resource_type=Int8, resource_name=String, pattern_type=since(1, Int8),
                                       principal=String, host=String, operation=Int8, permission_type=Int8)))))),
}
