"""Hostile input to the Kafka protocol over a real socket (the shared gateway: see `conftest.py`).

Every api key at its lowest and highest supported version answered (the control), then truncated (`eof` and
`short`, see `wire.truncate`); frame sizes over `max_request_bytes` or negative; every array count, string length
and bytes length of every request set, one at a time, far beyond the frame; hostile topic names through every
create / produce / fetch / list-offsets / commit / delete path, names that are no UTF-8, hostile group ids in
commits and in the group coordinator, and commit metadata over the limit.

Kafka closes a connection whose request it cannot parse, answering nothing; a well-formed request naming what
cannot exist gets Kafka's error code for it, on a connection that goes on.
"""

from __future__ import annotations

import struct

import construct as c
import pytest

from logway.codecs.kafka import primitives as prim
from logway.codecs.kafka.api import admin as KA
from logway.codecs.kafka.api import groups as KG
from logway.codecs.kafka.api import metadata as KM
from logway.codecs.kafka.api.api_versions import ApiVersionsRequest
from logway.codecs.kafka.api import registry
from logway.codecs.kafka.api.registry import request_schema
from logway.codecs.kafka.connection import KafkaServerConnection
from logway.codecs.kafka.error_codes import ErrorCode as E
from logway.codecs.kafka.primitives import ZERO_UUID
from logway.codecs.errors import RemoteProtocolError

from .wire import (HOSTILE_NAMES, INVALID_UTF8, KAFKA_CASES, KNOWN_KAFKA_KEYS, KafkaSock, assert_kafka_alive,
                   assert_nothing_escaped, kafka_body, kafka_error_codes, kafka_errors, kafka_frame, kafka_id,
                   kt_topic_id, log_state, send_and_close, truncate, truncation_params)

pytestmark = pytest.mark.usefixtures("gw")

KAFKA_FRAMES = {kafka_id(k, v): kafka_frame(k, v) for k, v in KAFKA_CASES}


# ============================================================================================ control

@pytest.mark.parametrize("key, version", KAFKA_CASES, ids=[kafka_id(*kv) for kv in KAFKA_CASES])
def test_kafka_control_valid_request_is_answered(key, version):
    by_id = key in (0, 1) and version >= 13  # Produce, Fetch: the topic by its id
    with KafkaSock() as k:
        answer = k.call(key, version, kafka_body(key, version, topic_id=kt_topic_id() if by_id else ZERO_UUID))
    assert answer.api_key == key and answer.api_version == version
    errors = kafka_error_codes(answer.body)
    expected = {11: {E.UNKNOWN_MEMBER_ID}, 12: {E.UNKNOWN_MEMBER_ID}, 13: {E.UNKNOWN_MEMBER_ID},
                14: {E.UNKNOWN_MEMBER_ID}, 20: {E.UNKNOWN_TOPIC_OR_PARTITION},
                15: {E.GROUP_ID_NOT_FOUND}}.get(key, set())  # (DescribeGroups v6: the group that never existed)
    if key in KNOWN_KAFKA_KEYS:  # keys added later (SASL) may answer any error: the answer itself is the check
        assert errors <= expected | {E.NONE}, (answer.body, errors)


# ============================================================================================ truncation

@pytest.mark.parametrize("name, mode, cut", truncation_params(KAFKA_FRAMES, 4))
def test_kafka_truncated_request(name, mode, cut):
    before = log_state()
    data = truncate(KAFKA_FRAMES[name], mode, cut, 4, lambda head, n: struct.pack(">i", n))
    # Kafka closes a connection whose request it cannot parse; nothing is answered.
    assert send_and_close("kafka", data, half_close=mode == "eof") == b""
    assert log_state() == before  # nothing of a truncated request was applied
    assert_kafka_alive()


# ============================================================================================ absurd sizes

# -- frame sizes over the limit, or negative (refused from the header alone) ------------------------------------

@pytest.mark.parametrize("size", [100 * 1024 * 1024 + 1, 2**31 - 1, -1, -(2**31)],
                         ids=["max_request_bytes+1", "int32-max", "minus-1", "int32-min"])
def test_kafka_frame_size_over_the_limit_or_negative(size):
    frame = kafka_frame(18, 2)
    assert send_and_close("kafka", struct.pack(">i", size) + frame[4:], half_close=False) == b""
    assert_kafka_alive()


# -- every array count, string length and bytes length of every request, one at a time ------------------------

def _kafka_length_fields(con, value, pos: int, path: str):
    """(field path, byte position, kind, prefix size) of every count / length prefix in the encoding of `value`
    with `con`, descending into the first item of each array."""
    if isinstance(con, prim.Schema):
        for name, sub in con.fields:
            item = getattr(value, name)
            yield from _kafka_length_fields(sub, item, pos, f"{path}.{name}" if path else name)
            pos += len(prim.build_bytes(sub, item))
    elif isinstance(con, prim.ArrayType):
        if value is None:
            return
        size = _prefix_size(con, len(value))
        yield path, pos, "array", size
        if value and not isinstance(con.subcon, c.FormatField):
            yield from _kafka_length_fields(con.subcon, value[0], pos + size, f"{path}[0]")
    elif isinstance(con, prim.StringType):
        if value is not None:
            yield path, pos, "string", _prefix_size(con, len(value.encode()))
    elif isinstance(con, prim.BytesType):
        if value is not None:
            yield path, pos, "bytes", _prefix_size(con, len(value))


def _prefix_size(con, n: int) -> int:
    """Bytes of the length / count prefix of `n` items or bytes: an int16/int32, or (compact) a uvarint of n + 1."""
    if con.compact:
        return len(prim.build_bytes(prim.UnsignedVarint, n + 1))
    return 2 if isinstance(con, prim.StringType) else 4


#: What each kind of prefix is overwritten with: far more than any frame here holds.
_ABSURD = {"array": struct.pack(">i", 0x7FFFFFFF), "bytes": struct.pack(">i", 0x7FFFFFFF),
           "string": struct.pack(">h", 0x7FFF)}
#: The compact forms' (flexible versions): a count or length of 2**32 - 2, far beyond any frame or string.
_ABSURD_COMPACT = prim.build_bytes(prim.UnsignedVarint, 2**32 - 1)


def _kafka_absurd_params():
    params = []
    for key, version in KAFKA_CASES:
        body = kafka_body(key, version)
        frame = kafka_frame(key, version, body)
        start = len(frame) - len(prim.build_bytes(request_schema(key, version), body))
        for path, pos, kind, size in _kafka_length_fields(request_schema(key, version), body, start, ""):
            bad = _ABSURD_COMPACT if registry.is_flexible(key, version) else _ABSURD[kind]
            hostile = frame[:pos] + bad + frame[pos + size:]
            hostile = struct.pack(">i", len(hostile) - 4) + hostile[4:]  # a compact prefix may change size
            params.append(pytest.param(hostile, id=f"{kafka_id(key, version)}-{path}-{kind}"))
    # the header's client_id (every request has one)
    frame = kafka_frame(18, 2)
    params.append(pytest.param(frame[:12] + _ABSURD["string"] + frame[14:], id="header-client_id-string"))
    return params


@pytest.mark.parametrize("frame", _kafka_absurd_params())
def test_kafka_absurd_count_or_length(frame):
    before = log_state()
    server = KafkaServerConnection()
    server.receive_data(frame)
    with pytest.raises(RemoteProtocolError):  # the frame is what the case says: malformed, not some other request
        server.next_event()
    assert send_and_close("kafka", frame, half_close=False) == b""
    assert log_state() == before
    assert_kafka_alive()


# ============================================================================================ hostile names

#: path -> (key, version, body builder, the error code every hostile name must get)
KAFKA_TOPIC_PATHS = {
    "CreateTopics": (19, 4, lambda t: KA.CreateTopicsRequest(timeout_ms=5000, validate_only=False, topics=[
        KA.CreatableTopic(name=t, num_partitions=1, replication_factor=1)]), E.INVALID_TOPIC_EXCEPTION),
    "CreateTopics-validate-only": (19, 1, lambda t: KA.CreateTopicsRequest(timeout_ms=5000, validate_only=True,
                                                                           topics=[KA.CreatableTopic(name=t)]),
                                   E.INVALID_TOPIC_EXCEPTION),
    "Metadata-auto-create": (3, 8, lambda t: KM.MetadataRequest(topics=[KM.MetadataRequestTopic(name=t)],
                                                                allow_auto_topic_creation=True),
                             E.INVALID_TOPIC_EXCEPTION),
    "Metadata-v0": (3, 0, lambda t: KM.MetadataRequest(topics=[KM.MetadataRequestTopic(name=t)]),
                    E.INVALID_TOPIC_EXCEPTION),
    "Produce": (0, 8, lambda t: kafka_body(0, 8, topic=t), E.UNKNOWN_TOPIC_OR_PARTITION),
    "Produce-v0": (0, 0, lambda t: kafka_body(0, 0, topic=t), E.UNKNOWN_TOPIC_OR_PARTITION),
    "Fetch": (1, 11, lambda t: kafka_body(1, 11, topic=t), E.UNKNOWN_TOPIC_OR_PARTITION),
    "ListOffsets": (2, 5, lambda t: kafka_body(2, 5, topic=t), E.UNKNOWN_TOPIC_OR_PARTITION),
    "OffsetCommit": (8, 7, lambda t: kafka_body(8, 7, topic=t), E.UNKNOWN_TOPIC_OR_PARTITION),
    # Kafka answers an OffsetFetch of a partition nothing was committed for with offset -1 and no error.
    "OffsetFetch": (9, 5, lambda t: kafka_body(9, 5, topic=t), E.NONE),
    "DeleteTopics": (20, 3, lambda t: KA.DeleteTopicsRequest(topic_names=[t], timeout_ms=5000),
                     E.UNKNOWN_TOPIC_OR_PARTITION),
}


@pytest.mark.parametrize("path", KAFKA_TOPIC_PATHS)
@pytest.mark.parametrize("label", HOSTILE_NAMES)
def test_kafka_hostile_topic_name(label, path):
    key, version, build, code = KAFKA_TOPIC_PATHS[path]
    with KafkaSock() as k:
        answer = k.call(key, version, build(HOSTILE_NAMES[label])).body
        assert kafka_errors(answer) == {code}, answer
        if path == "OffsetFetch":
            assert {p.committed_offset for p in answer.topics[0].partitions} == {-1}, answer
        assert k.call(18, 2, ApiVersionsRequest()).body.error_code == 0  # the same connection goes on
    assert_nothing_escaped()
    assert_kafka_alive()


@pytest.mark.parametrize("path", KAFKA_TOPIC_PATHS)
def test_kafka_topic_name_that_is_no_utf8(path):
    """A Kafka string must be UTF-8: the request is malformed and the connection is closed (as for any request
    the broker cannot parse); nothing is created."""
    key, version, build, _ = KAFKA_TOPIC_PATHS[path]
    placeholder = "Q" * len(INVALID_UTF8)
    frame = kafka_frame(key, version, build(placeholder))
    assert frame.count(placeholder.encode()) == 1
    assert send_and_close("kafka", frame.replace(placeholder.encode(), INVALID_UTF8), half_close=False) == b""
    assert_nothing_escaped()
    assert_kafka_alive()


def _kafka_group_params():
    params = []
    for label, group in {**HOSTILE_NAMES, "overlong-32767": "g" * 32767}.items():
        params.append(pytest.param(group, id=label))
    return params


@pytest.mark.parametrize("group", _kafka_group_params())
def test_kafka_hostile_group_id_commit_and_fetch(group):
    """Group ids are never paths: a non-empty id commits and fetches back; an empty one is Kafka's
    INVALID_GROUP_ID (or accepted, as Kafka does for standalone commits); never another error."""
    with KafkaSock() as k:
        commit = k.call(8, 7, kafka_body(8, 7, group=group)).body
        codes = kafka_error_codes(commit)
        if group:
            assert codes == {E.NONE}, commit
            fetched = k.call(9, 5, kafka_body(9, 5, group=group)).body
            assert fetched.topics[0].partitions[0].committed_offset == 2, fetched
        else:
            assert codes == {E.INVALID_GROUP_ID}, commit
    assert_nothing_escaped()
    assert_kafka_alive()


def test_kafka_commit_metadata_over_the_limit_is_offset_metadata_too_large():
    body = kafka_body(8, 7)
    body.topics[0].partitions[0].committed_metadata = "m" * 4097
    with KafkaSock() as k:
        codes = kafka_errors(k.call(8, 7, body).body)
    assert_kafka_alive()
    assert codes == {E.OFFSET_METADATA_TOO_LARGE}, codes


#: Group APIs that use the coordinator: an empty group id is INVALID_GROUP_ID there (Kafka's isValidGroupId).
KAFKA_GROUP_PATHS = {
    "JoinGroup": (11, 5, lambda g: KG.JoinGroupRequest(group_id=g, session_timeout_ms=10000,
                                                       rebalance_timeout_ms=10000, member_id="nobody",
                                                       protocol_type="consumer", protocols=[])),
    "Heartbeat": (12, 3, lambda g: KG.HeartbeatRequest(group_id=g, generation_id=1, member_id="nobody")),
    "SyncGroup": (14, 3, lambda g: KG.SyncGroupRequest(group_id=g, generation_id=1, member_id="nobody")),
    "LeaveGroup": (13, 3, lambda g: KG.LeaveGroupRequest(group_id=g, members=[KG.MemberIdentity("nobody")])),
}


@pytest.mark.parametrize("path", KAFKA_GROUP_PATHS)
@pytest.mark.parametrize("label", ["empty", "dotdot-slash", "nul", "overlong-250"])
def test_kafka_hostile_group_id_in_the_coordinator(label, path):
    key, version, build = KAFKA_GROUP_PATHS[path]
    group = HOSTILE_NAMES[label]
    with KafkaSock() as k:
        codes = kafka_error_codes(k.call(key, version, build(group)).body)
        with_describe = k.call(15, 4, KG.DescribeGroupsRequest(groups=[group])).body
    assert codes - {E.NONE} == ({E.INVALID_GROUP_ID} if group == "" else {E.UNKNOWN_MEMBER_ID}), codes
    assert [g.group_id for g in with_describe.groups] == [group]
    assert_nothing_escaped()
    assert_kafka_alive()
