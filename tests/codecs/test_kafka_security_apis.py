"""The security APIs' codec beyond the generic round trips of test_kafka.py: librdkafka's AlterUserScramCredentials
request (one empty tagged-field section too many, tolerated — and only that), ACL bindings without a pattern type
before v1, and client quotas' float64 values."""

from __future__ import annotations

import struct

import pytest

from logway.codecs.errors import RemoteProtocolError
from logway.codecs.kafka.api import acls as ACL
from logway.codecs.kafka.api import quotas as Q
from logway.codecs.kafka.api import scram_credentials as S
from logway.codecs.kafka.connection import KafkaClientConnection, KafkaRequest, KafkaServerConnection
from logway.codecs.kafka.primitives import build_bytes, parse_frame
from logway.codecs.kafka.api.registry import request_schema

UPSERT = S.AlterUserScramCredentialsRequest([], [S.ScramCredentialUpsertion("alice", 1, 4096, b"s" * 16, b"p" * 32)])


def _frame(body_bytes: bytes, key=S.ALTER_USER_SCRAM_CREDENTIALS_KEY, version=0) -> bytes:
    header = struct.pack(">hhi", key, version, 7) + struct.pack(">h", 6) + b"rdkafk" + b"\x00"  # + header v2 tags
    return struct.pack(">i", len(header) + len(body_bytes)) + header + body_bytes


@pytest.mark.parametrize("trailer", [b"", b"\x00", b"\x00\x00"])
def test_librdkafkas_extra_tag_section_after_a_flexible_body_is_ignored(trailer):
    """librdkafka ends its AlterUserScramCredentials with one more empty tag section than the layout has; bytes
    after a flexible body are ignored, as Kafka's parser ignores them."""
    body = build_bytes(request_schema(S.ALTER_USER_SCRAM_CREDENTIALS_KEY, 0), UPSERT)
    server = KafkaServerConnection(1 << 20)
    server.receive_data(_frame(body + trailer))
    assert server.next_event().body == UPSERT


def test_bytes_after_a_non_flexible_body_are_refused():
    body = build_bytes(request_schema(ACL.DESCRIBE_ACLS_KEY, 1), ACL.DescribeAclsRequest(2, "t", 3, None, None, 1, 1))
    server = KafkaServerConnection(1 << 20)
    header = struct.pack(">hhih", ACL.DESCRIBE_ACLS_KEY, 1, 7, -1)
    server.receive_data(struct.pack(">i", len(header) + len(body) + 1) + header + body + b"\x00")
    with pytest.raises(RemoteProtocolError, match="left over"):
        server.next_event()


def test_acl_bindings_before_v1_have_no_pattern_type_and_read_as_literal():
    creation = ACL.AclCreation(2, "orders", 4, "User:alice", "*", 3, 3)
    v0 = build_bytes(request_schema(ACL.CREATE_ACLS_KEY, 0), ACL.CreateAclsRequest([creation]))
    v1 = build_bytes(request_schema(ACL.CREATE_ACLS_KEY, 1), ACL.CreateAclsRequest([creation]))
    assert len(v1) == len(v0) + 1
    parsed, left = parse_frame(request_schema(ACL.CREATE_ACLS_KEY, 0), v0)
    assert left == 0 and parsed.creations[0].resource_pattern_type == ACL.LITERAL


def test_quota_values_are_float64():
    request = Q.AlterClientQuotasRequest([Q.AlterEntryData([Q.EntityData("user", None)],
                                                           [Q.OpData("consumer_byte_rate", 1048576.5, False)])])
    client = KafkaClientConnection()
    server = KafkaServerConnection(1 << 20)
    server.receive_data(client.send(KafkaRequest(Q.ALTER_CLIENT_QUOTAS_KEY, 1, client_id="c", body=request)))
    got = server.next_event().body
    assert got.entries[0].ops[0].value == 1048576.5 and got.entries[0].entity[0].entity_name is None
