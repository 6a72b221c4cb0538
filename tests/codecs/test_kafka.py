"""The Kafka request/response codec: every (key, version) of the spec's table, framing, bounds and error paths.

- Round trips: for every (key, version), a sample request and response (every field of that version set to a
  distinct non-default value, once with lists/strings and once with nulls where the version allows them) go
  through the client and server connections (`send` / `next_event`, the codec contract) and come back equal.
- The contract: the server remembers each request's (key, version) by correlation id (a FIFO per id) and
  answers `KafkaResponse(correlation_id, body=...)` in that layout; misuse is a LocalProtocolError.
- kafka-python cross-checks: its JSON-driven `kafka.protocol` messages (Kafka's message definitions) must list
  the same fields in the same order for each version, encode our samples to the very same bytes, and decode our
  responses to the same values; its older hand-written `kafka.protocol.old` schemas must encode the same bytes
  wherever they have that version.
- Framing: every frame fed whole, one byte at a time, two frames at once, with a partial frame behind.
- Errors: sizes out of bounds, EOF inside a frame, absurd counts (no allocation), bad UTF-8, trailing bytes,
  unknown keys and versions (fatal, code 35), the ApiVersions v3/v4 fallback, deferred records in Fetch.
Golden frames are in `fixtures/kafka/wire/` (see its README).
"""

from __future__ import annotations

import gc
import importlib
import inspect
import pkgutil
import struct
import tracemalloc
import uuid
from dataclasses import dataclass, fields
from pathlib import Path

import construct as c
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from logway.codecs.errors import LocalProtocolError, RemoteProtocolError
from logway.codecs.kafka import api
from logway.codecs.kafka import primitives as prim
from logway.codecs.kafka.api import registry
from logway.codecs.kafka.api.registry import SUPPORTED, request_schema, response_schema
from logway.codecs.kafka.connection import (CLOSED, MAX_REQUEST_BYTES, NEED_DATA, KafkaClientConnection,
                                            KafkaRequest, KafkaResponse, KafkaServerConnection, SaslToken,
                                            encode_body)
from logway.codecs.kafka.error_codes import ErrorCode

WIRE = Path(__file__).resolve().parent.parent.parent / "fixtures" / "kafka" / "wire"
RECORDS = Path(__file__).resolve().parent.parent.parent / "fixtures" / "kafka"

ALL = [(key, v) for key, (lo, hi) in SUPPORTED.items() for v in range(lo, hi + 1)]
IDS = [f"{registry.API_KEYS[k]}-v{v}" for k, v in ALL]


# ------------------------------------------------------------------------------------------------ samples

class _Counter:
    def __init__(self, nulls: bool) -> None:
        self.n = 0
        self.nulls = nulls

    def __call__(self) -> int:
        self.n += 1
        return self.n


_INT = {
    "b": lambda n: (n * 37) % 256 - 128,
    "h": lambda n: (n * 7919) % 65536 - 32768,
    "l": lambda n: ((n * 2654435761) % 2**32) - 2**31,
    "q": lambda n: ((n * 11400714819323198485) % 2**64) - 2**63,
    "L": lambda n: (n * 2654435761) % 2**32,
    "?": lambda n: n % 2 == 1,
    "d": lambda n: n + 0.25,  # float64 (client quotas)
}


def sample(con: c.Construct, next_n: _Counter):
    """A value for `con` with every field set (distinct values, so swapped fields show up)."""
    if isinstance(con, prim.Schema):
        return con.cls(**{name: sample(sub, next_n) for name, sub in con.fields})
    if isinstance(con, prim.ArrayType):
        if con.nullable and next_n.nulls:
            return None
        return [sample(con.subcon, next_n) for _ in range(2)]
    if isinstance(con, prim.NullableStructType):
        return None if next_n.nulls else sample(con.subcon, next_n)
    n = next_n()
    if con is prim.Uuid:
        return n.to_bytes(16, "big")
    if isinstance(con, c.FormatField):
        return _INT[con.fmtstr[1]](n)
    if isinstance(con, prim.StringType):
        return None if con.nullable and next_n.nulls else f"s{n}-é"
    if isinstance(con, prim.BytesType):
        return None if con.nullable and next_n.nulls else bytes(range(n % 7, n % 7 + 5)) * (n % 3 + 1)
    raise AssertionError(f"no sample for {con!r}")


def sample_request(key, version, nulls=False):
    return sample(request_schema(key, version), _Counter(nulls))


def sample_response(key, version, nulls=False):
    body = sample(response_schema(key, version), _Counter(nulls))
    if key == 18:
        body.error_code = 0  # an ApiVersions error answer always takes the v0 layout (tested on its own)
    return body


def exchange(key, version, request_body, response_body):
    """Client -> server -> client through both connections; returns (KafkaRequest, KafkaResponse)."""
    client, server = KafkaClientConnection(), KafkaServerConnection()
    server.receive_data(client.send(KafkaRequest(key, version, client_id="test-client", body=request_body)))
    request = server.next_event()
    assert server.next_event() is NEED_DATA
    assert server.pending == 1
    client.receive_data(server.send(KafkaResponse(request.correlation_id, body=response_body)))
    assert server.pending == 0
    response = client.next_event()
    assert client.next_event() is NEED_DATA
    return request, response


def served(key, version, cid=1234, body=None):
    """A server that has read one request (key, version) with correlation id `cid`: (server, KafkaRequest)."""
    if body is None:
        body = sample_request(key, version)
        if key == 0:
            body.acks = 1  # acks=0 gets no response
    server = KafkaServerConnection()
    server.receive_data(KafkaClientConnection().send(KafkaRequest(key, version, cid, "c", body)))
    return server, server.next_event()


def answer(key, version, body, cid=1234):
    """The bytes a server sends for `body`, answering a request (key, version) with correlation id `cid`."""
    server, _ = served(key, version, cid)
    out = server.send(KafkaResponse(cid, body=body))
    assert isinstance(out, bytes)
    return out


def test_requests_and_responses_leave_no_reference_cycles():
    """construct's parse_stream/build_stream make a self-referencing context per call: garbage that only the
    cyclic collector frees, a few per request in the gateway. The codec parses and builds without them."""
    samples = [(key, version, sample_request(key, version), sample_response(key, version))
               for key, version in ((0, 8), (1, 11), (3, 8), (18, 2), (8, 2), (9, 5))]
    gc.collect()
    gc.disable()
    try:
        for key, version, req, resp in samples:
            exchange(key, version, req, resp)
        assert gc.collect() == 0
    finally:
        gc.enable()


# ---------------------------------------------------------------------------------------- round trips

@pytest.mark.parametrize("nulls", [False, True], ids=["values", "nulls"])
@pytest.mark.parametrize("key,version", ALL, ids=IDS)
def test_round_trip_every_key_and_version(key, version, nulls):
    req_body = sample_request(key, version, nulls)
    resp_body = sample_response(key, version, nulls)
    if key == 0 and req_body.acks == 0:
        req_body.acks = 1  # acks=0 gets no response
    request, response = exchange(key, version, req_body, resp_body)
    assert (request.api_key, request.api_version, request.client_id) == (key, version, "test-client")
    assert not request.unsupported_version
    assert request.body == req_body
    assert type(request.body) is registry.request_type(key)
    assert (response.api_key, response.api_version, response.correlation_id) == (key, version,
                                                                                   request.correlation_id)
    assert response.body == resp_body
    assert type(response.body) is registry.response_type(key)


@pytest.mark.parametrize("key,version", ALL, ids=IDS)
def test_schema_build_parse_identity(key, version):
    for schema, body in ((request_schema(key, version), sample_request(key, version)),
                         (response_schema(key, version), sample_response(key, version))):
        data = schema.build(body)
        assert schema.parse(data) == body  # construct's own entry points (BytesIO) work too
        value, left = prim.parse_frame(schema, data)
        assert value == body and left == 0


def test_fields_absent_from_a_version_take_defaults_and_are_ignored():
    full = api.FetchRequest(replica_id=-1, max_wait_ms=500, min_bytes=1, max_bytes=1234, isolation_level=1,
                            session_id=9, session_epoch=3, rack_id="rack-a",
                            topics=[api.FetchTopic("t", [api.FetchPartition(partition=2, current_leader_epoch=7,
                                                                             fetch_offset=42, log_start_offset=5,
                                                                             partition_max_bytes=1024)])])
    client, server = KafkaClientConnection(), KafkaServerConnection()
    server.receive_data(client.send(KafkaRequest(1, 0, body=full)))
    v0 = server.next_event().body
    assert v0 == api.FetchRequest(replica_id=-1, max_wait_ms=500, min_bytes=1, topics=[
        api.FetchTopic("t", [api.FetchPartition(partition=2, fetch_offset=42, partition_max_bytes=1024)])])
    assert v0.max_bytes == 0x7FFFFFFF and v0.session_epoch == -1  # Kafka's defaults for versions without them


def test_dataclass_field_names_follow_the_naming_contract():
    names = {f.name for f in fields(api.ProduceRequest)}
    assert names == {"transactional_id", "acks", "timeout_ms", "topic_data"}
    assert [f.name for f in fields(api.PartitionProduceData)] == ["index", "records"]
    assert {f.name for f in fields(api.PartitionProduceResponse)} >= {"index", "error_code", "base_offset",
                                                                      "log_append_time_ms", "log_start_offset"}
    assert {f.name for f in fields(api.FetchRequest)} >= {"replica_id", "max_wait_ms", "min_bytes", "max_bytes",
                                                          "isolation_level", "session_id", "session_epoch",
                                                          "topics"}
    assert {f.name for f in fields(api.FetchPartition)} >= {"fetch_offset", "partition_max_bytes"}
    assert {f.name for f in fields(api.PartitionData)} >= {"high_watermark", "last_stable_offset",
                                                           "aborted_transactions", "preferred_read_replica",
                                                           "records"}
    for cls in (api.ProduceRequest, api.MetadataResponse, api.JoinGroupResponse, api.PartitionData):
        assert hasattr(cls, "__slots__")
    commit = api.OffsetCommitRequest(generation_id_or_member_epoch=4)
    assert commit.generation_id == 4  # alias for the classic protocol's name


def test_registry_supports_kafka_41_versions():
    assert SUPPORTED == {0: (0, 13), 1: (0, 18), 2: (0, 10), 3: (0, 13), 8: (0, 9), 9: (0, 9), 10: (0, 6),
                         11: (0, 9), 12: (0, 4), 13: (0, 5), 14: (0, 5), 15: (0, 6), 16: (0, 5), 17: (0, 1),
                         18: (0, 4), 19: (0, 7), 20: (0, 6), 22: (0, 5), 36: (0, 2),
                         24: (0, 5), 25: (0, 4), 26: (0, 5), 28: (0, 5),  # transactions
                         21: (0, 2), 32: (0, 4), 33: (0, 2), 35: (0, 4), 37: (0, 3), 42: (0, 2), 44: (0, 1),
                         47: (0, 0), 60: (0, 2),  # admin
                         68: (0, 1), 69: (0, 1),  # KIP-848
                         76: (1, 1), 77: (1, 1), 78: (1, 1), 79: (1, 1), 90: (0, 0), 91: (0, 0), 92: (0, 0),  # KIP-932
                         29: (0, 3), 30: (0, 3), 31: (0, 3), 48: (0, 1), 49: (0, 1), 50: (0, 0), 51: (0, 0)}  # security
    assert registry.API_KEYS[22] == "InitProducerId" and registry.API_KEYS[68] == "ConsumerGroupHeartbeat"
    with pytest.raises(KeyError):
        request_schema(0, 14)
    with pytest.raises(KeyError):
        request_schema(78, 0)  # Kafka 4.0's early-access share fetch: gone in 4.1
    with pytest.raises(KeyError):
        response_schema(23, 0)
    assert registry.advertised([60, 0, 999, 18]) == {0: (0, 13), 18: (0, 4), 60: (0, 2)}
    # unchanged versions reuse the previous schema object (one schema per distinct layout), flexible ones too
    assert request_schema(0, 1) is request_schema(0, 0) and request_schema(0, 8) is request_schema(0, 3)
    assert response_schema(1, 10) is response_schema(1, 7)
    assert request_schema(0, 12) is request_schema(0, 9) is not request_schema(0, 13)
    assert request_schema(1, 18) is request_schema(1, 15)
    # every version from FLEXIBLE_SINCE on is flexible, in both directions
    for key, version in ALL:
        flexible = registry.is_flexible(key, version)
        assert request_schema(key, version).flexible == response_schema(key, version).flexible == flexible


# ---------------------------------------------------------------------------------- kafka-python (JSON)

def _kp_messages():
    from kafka.protocol.api_message import ApiMessage

    for name in ("producer", "consumer", "metadata", "admin", "sasl"):
        importlib.import_module(f"kafka.protocol.{name}")
    found, todo = {}, list(ApiMessage.__subclasses__())
    while todo:
        cls = todo.pop()
        todo.extend(cls.__subclasses__())
        if cls._class_version is None and ".old." not in cls.__module__:
            found[(cls.API_KEY, cls.type)] = cls
    return found


KP = _kp_messages()
#: What kafka-python 3.0.12 knows: every key but those of KIP-848 and KIP-932 (checked against golden bytes
#: captured from librdkafka instead, in test_kafka_groups_wire.py).
KP_ALL = [(k, v) for k, v in ALL if (k, "request") in KP]
KP_IDS = [f"{registry.API_KEYS[k]}-v{v}" for k, v in KP_ALL]
# Where kafka-python's names differ from ours: it shortens the two Metadata v8 operation fields, and its (Kafka
# 3.x) JSON renamed AddPartitionsToTxn's v0-3 fields when v4 batched transactions (we keep Kafka 2.x's names).
KP_RENAMES = {
    (api.MetadataResponse, "cluster_authorized_operations"): "authorized_operations",
    (api.MetadataResponseTopic, "topic_authorized_operations"): "authorized_operations",
    (api.AddPartitionsToTxnRequest, "transactional_id"): "v3_and_below_transactional_id",
    (api.AddPartitionsToTxnRequest, "producer_id"): "v3_and_below_producer_id",
    (api.AddPartitionsToTxnRequest, "producer_epoch"): "v3_and_below_producer_epoch",
    (api.AddPartitionsToTxnRequest, "topics"): "v3_and_below_topics",
    (api.AddPartitionsToTxnResponse, "results"): "results_by_topic_v3_and_below",
    (api.AddPartitionsToTxnTopicResult, "results"): "results_by_partition",
    (api.AddPartitionsToTxnPartitionResult, "error_code"): "partition_error_code",
    (api.DescribeClusterResponse, "cluster_authorized_operations"): "authorized_operations",
}


# kafka-python turns the int32 authorized-operations bit fields into sets of bit numbers (None for INT32_MIN).
KP_BITFIELDS = {(api.MetadataResponse, "cluster_authorized_operations"),
                (api.MetadataResponseTopic, "topic_authorized_operations"),
                (api.DescribedGroup, "authorized_operations"),
                (api.DescribeClusterResponse, "cluster_authorized_operations")}


def kp_name(cls, name):
    return KP_RENAMES.get((cls, name), name)


def kp_value(cls, name, value, con=None):
    if con is prim.Uuid:  # kafka-python's uuid.UUID, None for the zero uuid
        return None if value == prim.ZERO_UUID else uuid.UUID(bytes=value)
    if (cls, name) not in KP_BITFIELDS:
        return value
    bits = {i for i in range(32) if (value & 0xFFFFFFFF) >> i & 1}
    return None if bits == {31} else bits


def to_kp(schema: prim.Schema, obj, kp_cls, version=None):
    """Our dataclass -> the kafka-python message/data container with the same values."""
    kwargs = {}
    for name, con in schema.fields:
        value = getattr(obj, name)
        kname = kp_name(schema.cls, name)
        if isinstance(con, prim.ArrayType) and isinstance(con.subcon, prim.Schema) and value is not None:
            sub_cls = kp_cls.fields[kname].data_class
            value = [to_kp(con.subcon, item, sub_cls) for item in value]
        kwargs[kname] = kp_value(schema.cls, name, value, con)
    return kp_cls(version=version, **kwargs) if version is not None else kp_cls(**kwargs)


def plain(schema: prim.Schema, obj):
    """Our dataclass -> nested dicts under kafka-python's names, only the fields of this version."""
    out = {}
    for name, con in schema.fields:
        value = getattr(obj, name)
        if isinstance(con, prim.ArrayType) and isinstance(con.subcon, prim.Schema) and value is not None:
            value = [plain(con.subcon, item) for item in value]
        out[kp_name(schema.cls, name)] = kp_value(schema.cls, name, value, con)
    return out


def untagged(decoded, expected):
    """kafka-python's decoded dict without the tagged fields (it fills in their defaults; we write none)."""
    if isinstance(decoded, dict) and isinstance(expected, dict):
        return {k: untagged(v, expected[k]) for k, v in decoded.items() if k in expected}
    if isinstance(decoded, list) and isinstance(expected, list) and len(decoded) == len(expected):
        return [untagged(d, e) for d, e in zip(decoded, expected)]
    return decoded


def kp_layout(kp_struct, version):
    return [(f.name, kp_layout(f, version) if f.is_struct_array() else None)
            for f in kp_struct.untagged_fields(version)]


def our_layout(schema: prim.Schema):
    return [(kp_name(schema.cls, name),
             our_layout(con.subcon) if isinstance(con, prim.ArrayType) and isinstance(con.subcon, prim.Schema)
             else None)
            for name, con in schema.fields]


@pytest.mark.parametrize("kind", ["request", "response"])
@pytest.mark.parametrize("key,version", KP_ALL, ids=KP_IDS)
def test_layout_matches_kafka_message_definitions(key, version, kind):
    kp = KP[(key, kind)]
    schema = (request_schema if kind == "request" else response_schema)(key, version)
    assert kp.flexible_version_q(version) == registry.is_flexible(key, version) == schema.flexible
    assert our_layout(schema) == kp_layout(kp._struct, version)


def test_flexible_since_matches_kafka_message_definitions():
    for key in {k for k, _ in KP_ALL}:
        for kind in ("request", "response"):
            kp = KP[(key, kind)]
            first = next((v for v in range(64) if kp.flexible_version_q(v)), None)
            assert registry.FLEXIBLE_SINCE[key] == first, (registry.API_KEYS[key], kind)


@pytest.mark.parametrize("nulls", [False, True], ids=["values", "nulls"])
@pytest.mark.parametrize("key,version", KP_ALL, ids=KP_IDS)
def test_requests_encode_like_kafka_python_and_parse_its_bytes(key, version, nulls):
    schema = request_schema(key, version)
    body = sample_request(key, version, nulls)
    theirs = bytes(to_kp(schema, body, KP[(key, "request")], version).encode())
    assert prim.build_bytes(schema, body) == theirs
    # and a framed kafka-python request (header v1 + body) parses through the server connection
    message = to_kp(schema, body, KP[(key, "request")], version)
    message.with_header(correlation_id=77, client_id="kafka-python")
    server = KafkaServerConnection()
    server.receive_data(bytes(message.encode(header=True, framed=True)))
    request = server.next_event()
    assert (request.correlation_id, request.client_id, request.body) == (77, "kafka-python", body)


@pytest.mark.parametrize("nulls", [False, True], ids=["values", "nulls"])
@pytest.mark.parametrize("key,version", KP_ALL, ids=KP_IDS)
def test_responses_decode_with_kafka_python(key, version, nulls):
    schema = response_schema(key, version)
    body = sample_response(key, version, nulls)
    frame = answer(key, version, body, cid=1234)
    assert struct.unpack_from(">ii", frame) == (len(frame) - 4, 1234)
    start = 8
    if registry.is_flexible(key, version) and key != 18:  # response header v1 (ApiVersions': always v0)
        assert frame[start] == 0
        start += 1
    decoded = KP[(key, "response")].decode(frame[start:], version=version)
    assert untagged(decoded.to_dict(json=False), plain(schema, body)) == plain(schema, body)
    assert bytes(to_kp(schema, body, KP[(key, "response")], version).encode()) == frame[start:]


# ------------------------------------------------------------------------------- kafka-python (old)

def _old_classes():
    import kafka.protocol.old as old

    found = {}
    for info in pkgutil.iter_modules(old.__path__):
        module = importlib.import_module(f"kafka.protocol.old.{info.name}")
        for _, cls in inspect.getmembers(module, inspect.isclass):
            key, version = getattr(cls, "API_KEY", None), getattr(cls, "API_VERSION", None)
            if isinstance(key, int) and isinstance(version, int) and getattr(cls, "SCHEMA", None) is not None:
                kind = "request" if cls.__name__.endswith(f"Request_v{version}") else "response"
                if cls.__name__.endswith(f"_v{version}"):
                    found[(key, version, kind)] = cls
    return found


OLD = _old_classes()
# Old schemas that do not describe the wire layout: DescribeLogDirs v0 declares each topic's partitions as one
# int32 (an array in Kafka), CreatePartitions nests count/assignments in a struct of its own, DescribeAcls v2 is
# declared with the classic types (Kafka's JSON: flexible from v2). (The JSON-driven messages above check those
# layouts.)
OLD_WRONG = {(35, 0, "request"), (37, 0, "request"), (37, 1, "request"), (29, 2, "request"), (29, 2, "response")}
OLD_CASES = [(k, v, kind) for k, v in ALL for kind in ("request", "response")
             if (k, v, kind) in OLD and (k, v, kind) not in OLD_WRONG]


# The old schemas declare Metadata request topics as bare strings, not one-field structs.
OLD_FLATTENED = {api.MetadataRequestTopic}


def as_tuple(schema: prim.Schema, obj):
    if schema.cls in OLD_FLATTENED:
        (name,) = schema.names
        return getattr(obj, name)
    out = []
    for name, con in schema.fields:
        value = getattr(obj, name)
        if isinstance(con, prim.ArrayType) and isinstance(con.subcon, prim.Schema) and value is not None:
            value = [as_tuple(con.subcon, item) for item in value]
        out.append(kp_value(schema.cls, name, value))
    return tuple(out)


def test_old_kafka_python_schemas_cover_many_versions():
    assert len(OLD_CASES) >= 100, len(OLD_CASES)


@pytest.mark.parametrize("key,version,kind", OLD_CASES,
                         ids=[f"{registry.API_KEYS[k]}-v{v}-{kind}" for k, v, kind in OLD_CASES])
def test_bytes_equal_old_kafka_python_schemas(key, version, kind):
    schema = (request_schema if kind == "request" else response_schema)(key, version)
    body = sample(schema, _Counter(nulls=False))
    ours = prim.build_bytes(schema, body)
    old_cls = OLD[(key, version, kind)]
    assert bytes(old_cls(*as_tuple(schema, body)).encode()) == ours
    assert prim.parse_frame(schema, ours)[0] == body


# ------------------------------------------------------------------------------------------- golden

def test_golden_produce_frame_from_kafka_python():
    frame = (WIRE / "produce-v3-kafka-python.bin").read_bytes()
    records = (RECORDS / "kafka-python-uncompressed.bin").read_bytes()
    server = KafkaServerConnection()
    server.receive_data(frame)
    request = server.next_event()
    assert (request.api_key, request.api_version, request.correlation_id) == (0, 3, 5)
    assert request.client_id == "kafka-python-3.0.12"
    assert request.body == api.ProduceRequest(None, -1, 30000, [
        api.TopicProduceData("events", [api.PartitionProduceData(0, records)])])
    header_size = 4 + 8 + 2 + len(request.client_id)
    assert prim.build_bytes(request_schema(0, 3), request.body) == frame[header_size:]


#: The spec's §2 table + SASL: the keys served when `api-versions-fallback-response.bin` was made.
SPEC_TABLE = registry.advertised([0, 1, 2, 3, 8, 9, 10, 11, 12, 13, 14, 15, 16, 17, 18, 19, 20, 22, 36])


@pytest.mark.parametrize("fixture,cid,client_id,version,software", [
    ("api-versions-v4-kafka-python.bin", 1, "kafka-python-3.0.12", 4, ("kafka-python", "3.0.12")),
    ("api-versions-v3-librdkafka-layout.bin", 7, "rdkafka", 3, ("librdkafka", "2.0.2")),
])
def test_api_versions_v3_v4_carry_the_client_software(fixture, cid, client_id, version, software):
    """KIP-511: the flexible versions name the client's software; they are answered in their own layout (response
    header v0 all the same), with kafka-python decoding our v3/v4 answer."""
    from kafka.protocol.metadata import ApiVersionsResponse as KpApiVersionsResponse

    frame = (WIRE / fixture).read_bytes()
    for feed in (whole, one_byte_at_a_time):
        server = KafkaServerConnection()
        events = feed(server, frame + frame)
        assert len(events) == 2
        request = events[0]
        assert (request.api_key, request.api_version, request.correlation_id) == (18, version, cid)
        assert request.client_id == client_id and not request.unsupported_version
        assert request.body == api.ApiVersionsRequest(*software)
    response = server.send(KafkaResponse(cid, body=registry.api_versions_response(throttle_time_ms=9)))
    assert struct.unpack_from(">iih", response) == (len(response) - 4, cid, 0)  # header v0: no tag section
    decoded = KpApiVersionsResponse.decode(response[8:], version=version)
    assert decoded.throttle_time_ms == 9
    assert {(k.api_key, k.min_version, k.max_version) for k in decoded.api_keys} == {
        (key, lo, hi) for key, (lo, hi) in SUPPORTED.items()}


def test_api_versions_beyond_v4_get_the_v0_fallback():
    """A newer client's ApiVersions (v5+, flexible): error 35 and the key list in the v0 layout, which it reads
    before retrying at a version we list."""
    from kafka.protocol.metadata import ApiVersionsResponse as KpApiVersionsResponse

    frame = (WIRE / "api-versions-v5-future.bin").read_bytes()
    for feed in (whole, one_byte_at_a_time):
        server = KafkaServerConnection(api_versions=SPEC_TABLE)
        events = feed(server, frame + frame)
        assert len(events) == 2
        request = events[0]
        assert (request.api_key, request.api_version, request.correlation_id) == (18, 5, 1)
        assert request.client_id == "kafka-python-3.0.12" and request.unsupported_version
        assert request.body == api.ApiVersionsRequest()
    assert server.pending == 2  # the same correlation id twice: both wait, oldest first
    response = server.send(KafkaResponse(1, body=api.ApiVersionsResponse(error_code=0, throttle_time_ms=9)))
    assert server.send(KafkaResponse(1, body=None)) == response and server.pending == 0
    assert struct.unpack_from(">iih", response) == (len(response) - 4, 1, 35)
    decoded = KpApiVersionsResponse.decode(response[8:], version=0)
    assert decoded.error_code == ErrorCode.UNSUPPORTED_VERSION
    assert {(k.api_key, k.min_version, k.max_version) for k in decoded.api_keys} == {
        (key, lo, hi) for key, (lo, hi) in SPEC_TABLE.items()}
    assert response == (WIRE / "api-versions-fallback-response.bin").read_bytes()
    # the v0 layout has no throttle_time_ms: nothing follows the key list
    assert len(response) == 4 + 4 + 2 + 4 + 6 * len(SPEC_TABLE)


@pytest.mark.parametrize("version", [0, 1, 2])
def test_api_versions_supported_versions_answer_in_their_own_layout(version):
    request, response = exchange(18, version, api.ApiVersionsRequest(), registry.api_versions_response())
    assert not request.unsupported_version
    assert response.body == registry.api_versions_response()
    frame = answer(18, version, registry.api_versions_response(throttle_time_ms=5))
    expected = 4 + 4 + 2 + 4 + 6 * len(SUPPORTED) + (4 if version >= 1 else 0)
    assert len(frame) == expected


@pytest.mark.parametrize("version", [3, 4])
def test_api_versions_flexible_answers_are_compact_with_an_empty_tag_section(version):
    frame = answer(18, version, registry.api_versions_response(throttle_time_ms=5))
    # header v0; error, uvarint count + 1, per key 6 bytes + its empty tags, throttle time, empty tag section
    assert len(frame) == 4 + 4 + 2 + 1 + 7 * len(SUPPORTED) + 4 + 1 and frame[-1] == 0


@pytest.mark.parametrize("key,version", [(18, 1), (18, 2), (3, 8), (9, 5), (60, 1), (44, 1)])
def test_an_encoded_body_answers_byte_for_byte_as_the_body_itself(key, version):
    """`encode_body` builds an unchanging answer once (e.g. ApiVersions); framed after each request's header (v0,
    or v1 for flexible versions: 60 and 44 here) it is the same bytes as the body built for that request."""
    body = sample_response(key, version)
    encoded = encode_body(key, version, body)
    for cid in (1, 77):
        assert answer(key, version, encoded, cid=cid) == answer(key, version, body, cid=cid)
    _, response = exchange(key, version, sample_request(key, version), encoded)
    assert response.body == body
    with pytest.raises(LocalProtocolError, match=f"encoded for API {key} v{version} cannot answer"):
        answer(key, version - 1, encoded)
    with pytest.raises(LocalProtocolError, match="cannot encode"):
        encode_body(key, 99, body)


@pytest.mark.parametrize("version", [1, 2])
def test_api_versions_error_answers_use_the_v0_layout(version):
    out = answer(18, version, api.ApiVersionsResponse(error_code=42, api_keys=[], throttle_time_ms=3), cid=8)
    assert out == struct.pack(">iihi", 10, 8, 42, 0)  # no throttle_time_ms
    client = KafkaClientConnection()
    client.send(KafkaRequest(18, version, body=api.ApiVersionsRequest()))
    client.receive_data(struct.pack(">iihi", 10, 0, 42, 0))
    assert client.next_event().body == api.ApiVersionsResponse(error_code=42)


def test_client_parses_the_v0_fallback_when_it_asked_a_higher_version():
    client = KafkaClientConnection()
    client.send(KafkaRequest(18, 2, body=api.ApiVersionsRequest()))
    server = KafkaServerConnection()
    server.receive_data(frame(18, 5, cid=0, body=b"flexible v5 body"))
    assert server.next_event().unsupported_version
    client.receive_data(server.send(KafkaResponse(0, body=None)))
    response = client.next_event()
    assert response.body.error_code == 35 and len(response.body.api_keys) == len(SUPPORTED)


# ------------------------------------------------------------------------------------------- framing

def whole(conn, data):
    conn.receive_data(data)
    return drain(conn)


def one_byte_at_a_time(conn, data):
    events = []
    for i in range(len(data)):
        conn.receive_data(data[i:i + 1])
        events.extend(drain(conn))
    return events


def drain(conn):
    events = []
    while (event := conn.next_event()) is not NEED_DATA:
        assert event is not CLOSED
        events.append(event)
    return events


FRAMING_CASES = ALL  # every (key, version): cheap enough, and each has its own layout


@pytest.mark.parametrize("key,version", FRAMING_CASES, ids=[f"{registry.API_KEYS[k]}-v{v}" for k, v in
                                                          FRAMING_CASES])
def test_requests_whole_byte_by_byte_concatenated_and_with_a_partial_tail(key, version):
    client = KafkaClientConnection()
    b1 = sample_request(key, version)
    b2 = sample_request(key, version, nulls=True)
    f1, f2 = client.send(KafkaRequest(key, version, body=b1)), client.send(KafkaRequest(key, version, body=b2))
    for feed in (whole, one_byte_at_a_time):
        events = feed(KafkaServerConnection(), f1)
        assert [e.body for e in events] == [b1]
        events = feed(KafkaServerConnection(), f1 + f2)
        assert [(e.correlation_id, e.body) for e in events] == [(0, b1), (1, b2)]
        server = KafkaServerConnection()
        events = feed(server, f1 + f2[:-3])  # a partial frame behind a complete one
        assert [e.body for e in events] == [b1]
        assert server.trailing_data == (f2[:-3], False)
        server.receive_data(f2[-3:])
        assert server.next_event().body == b2
        server.receive_data(b"")
        assert server.next_event() is CLOSED


@pytest.mark.parametrize("key,version", FRAMING_CASES, ids=[f"{registry.API_KEYS[k]}-v{v}" for k, v in
                                                          FRAMING_CASES])
def test_responses_whole_byte_by_byte_and_concatenated(key, version):
    client, server = KafkaClientConnection(), KafkaServerConnection()
    if key == 0:
        bodies = [api.ProduceRequest(acks=1), api.ProduceRequest(acks=-1)]
    else:
        bodies = [sample_request(key, version), sample_request(key, version)]
    server.receive_data(b"".join(client.send(KafkaRequest(key, version, body=b)) for b in bodies))
    requests = drain(server)
    answers = [sample_response(key, version), sample_response(key, version, nulls=True)]
    data = b"".join(server.send(KafkaResponse(r.correlation_id, body=a)) for r, a in zip(requests, answers))
    assert client.pending == 2
    events = one_byte_at_a_time(client, data)
    assert [(e.correlation_id, e.body) for e in events] == [(0, answers[0]), (1, answers[1])]
    assert client.pending == 0
    client.receive_data(b"")
    assert client.next_event() is CLOSED


def test_produce_acks_0_expects_no_response_and_is_not_remembered():
    client, server = KafkaClientConnection(), KafkaServerConnection()
    server.receive_data(client.send(KafkaRequest(0, 7, body=api.ProduceRequest(acks=0, timeout_ms=10))))
    request = server.next_event()
    assert not request.expects_response
    assert client.pending == 0 and server.pending == 0
    with pytest.raises(LocalProtocolError, match="correlation id 0"):
        server.send(KafkaResponse(0, body=api.ProduceResponse()))
    server.receive_data(client.send(KafkaRequest(3, 8, body=api.MetadataRequest(topics=None))))
    request = server.next_event()
    assert request.expects_response and request.correlation_id == 1 and request.body.topics is None
    assert server.pending == 1


def test_correlation_ids_wrap_and_client_id_may_be_null():
    client, server = KafkaClientConnection(), KafkaServerConnection()
    client._next_correlation_id = 2**31 - 1
    assert client.next_correlation_id == 2**31 - 1
    server.receive_data(client.send(KafkaRequest(12, 0, client_id=None, body=api.HeartbeatRequest("g", 1, "m"))))
    server.receive_data(client.send(KafkaRequest(12, 0, body=api.HeartbeatRequest("g", 2, "m"))))
    assert client.next_correlation_id == 1
    first, second = drain(server)
    assert (first.correlation_id, first.client_id) == (2**31 - 1, None)
    assert (second.correlation_id, second.client_id) == (0, "logway")


# ------------------------------------------------------------------------------------- error paths

def frame(key, version, cid=1, client_id=b"\x00\x01c", body=b""):
    payload = struct.pack(">hhi", key, version, cid) + client_id + body
    return struct.pack(">i", len(payload)) + payload


def assert_fatal(server, data, code, **attrs):
    server.receive_data(data)
    with pytest.raises(RemoteProtocolError) as info:
        server.next_event()
    err = info.value
    assert err.fatal and err.code == code, (err.message, err.code)
    for name, value in attrs.items():
        assert getattr(err, name) == value
    with pytest.raises(RemoteProtocolError):  # the connection stays broken
        server.next_event()
    return err


def test_oversized_size_fails_before_the_body_arrives():
    assert MAX_REQUEST_BYTES == 100 * 1024 * 1024
    assert_fatal(KafkaServerConnection(), struct.pack(">i", MAX_REQUEST_BYTES + 1), None)
    small = KafkaServerConnection(max_request_bytes=1000)
    assert small.max_request_bytes == 1000
    assert_fatal(small, struct.pack(">i", 1001) + b"\x00" * 10, None)
    ok = KafkaServerConnection(max_request_bytes=1000)
    ok.receive_data(struct.pack(">i", 1000))
    assert ok.next_event() is NEED_DATA  # at the limit: waits for the body


@pytest.mark.parametrize("size", [-1, 0, 4, 7])
def test_size_below_8_is_fatal(size):
    assert_fatal(KafkaServerConnection(), struct.pack(">i", size) + b"\x00" * 8, None)


def test_header_without_client_id_is_fatal_invalid_request():
    data = struct.pack(">ihhi", 8, 3, 1, 99)  # 8 bytes: key, version, correlation id, no client_id
    assert_fatal(KafkaServerConnection(), data, 42, correlation_id=99)


def test_truncated_frame_at_eof_is_fatal_and_clean_eof_is_closed():
    f = frame(3, 1, body=struct.pack(">i", -1))
    for cut in (2, 4, 10, len(f) - 1):
        server = KafkaServerConnection()
        server.receive_data(f[:cut])
        assert server.next_event() is NEED_DATA
        server.receive_data(b"")
        with pytest.raises(RemoteProtocolError) as info:
            server.next_event()
        assert info.value.fatal
    server = KafkaServerConnection()
    server.receive_data(f)
    server.receive_data(b"")
    assert server.next_event().body == api.MetadataRequest(topics=None)
    assert server.next_event() is CLOSED
    with pytest.raises(LocalProtocolError):
        server.receive_data(b"more")


def test_truncated_body_inside_a_complete_frame_is_invalid_request():
    body = prim.build_bytes(request_schema(0, 3), sample_request(0, 3))
    assert_fatal(KafkaServerConnection(), frame(0, 3, body=body[:-1]), 42, api_key=0, api_version=3)


def test_absurd_array_count_fails_fast_without_allocating():
    data = frame(3, 1, body=struct.pack(">i", 2**31 - 1))  # Metadata v1: topics count, 20-byte frame
    assert len(data) == 4 + 15
    tracemalloc.start()
    try:
        assert_fatal(KafkaServerConnection(), data, 42)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert peak < 256 * 1024
    # also an array of fixed-size items (int32 partition indexes) and a nested struct array
    body = struct.pack(">h", 1) + b"g" + struct.pack(">i", 1) + struct.pack(">h", 1) + b"t" + struct.pack(">i", 10**9)
    assert_fatal(KafkaServerConnection(), frame(9, 1, body=body), 42)
    assert_fatal(KafkaServerConnection(), frame(0, 3, body=struct.pack(">hhii", -1, 1, 10, 2**31 - 1)), 42)


def test_string_and_bytes_lengths_beyond_the_frame_fail():
    assert_fatal(KafkaServerConnection(), frame(10, 0, body=struct.pack(">h", 300) + b"abc"), 42)
    topic = struct.pack(">h", 1) + b"t" + struct.pack(">i", 1) + struct.pack(">ii", 0, 10**6) + b"xx"
    assert_fatal(KafkaServerConnection(), frame(0, 2, body=struct.pack(">hii", 1, 10, 1) + topic), 42)
    # the header's client_id is bounded too
    assert_fatal(KafkaServerConnection(), frame(10, 0, client_id=struct.pack(">h", 5000) + b"ab"), 42)


def test_invalid_utf8_and_null_in_non_nullable_fields_fail():
    assert_fatal(KafkaServerConnection(), frame(10, 0, body=struct.pack(">h", 2) + b"\xff\xfe"), 42)
    assert_fatal(KafkaServerConnection(), frame(10, 0, body=struct.pack(">h", -1)), 42)  # key is not nullable
    assert_fatal(KafkaServerConnection(), frame(3, 0, body=struct.pack(">i", -1)), 42)  # v0 topics not nullable


def test_trailing_bytes_after_the_body_are_malformed():
    assert_fatal(KafkaServerConnection(), frame(16, 1, body=b"\x00"), 42, api_key=16)


def test_trailing_bytes_after_a_flexible_body_are_ignored_as_kafka_does():
    """librdkafka's Metadata v9+ for every topic: an int32 placeholder where a compact null array (one byte) was
    meant, so 3 bytes follow the body; Kafka never reads them. (Captured from librdkafka 2.16 via AdminClient
    list_topics.)"""
    wire = bytes.fromhex("0003000d00000003000772646b61666b610000000000010000")
    server = KafkaServerConnection()
    server.receive_data(struct.pack(">i", len(wire)) + wire)
    request = server.next_event()
    assert (request.api_key, request.api_version, request.client_id) == (3, 13, "rdkafka")
    assert request.body == api.MetadataRequest(topics=None, allow_auto_topic_creation=False)


@pytest.mark.parametrize("key,version", [(17, 2), (4, 0), (999, 0), (-1, 0), (0, 14), (1, 19), (3, 14), (22, 6),
                                         (0, -1), (78, 0), (76, 2)])
def test_unsupported_key_or_version_is_fatal_code_35(key, version):
    err = assert_fatal(KafkaServerConnection(), frame(key, version, cid=31), 35, correlation_id=31)
    assert err.api_key == key and err.api_version == version


def test_api_versions_at_negative_or_huge_version_still_gets_the_fallback():
    server = KafkaServerConnection()
    server.receive_data(frame(18, 77, cid=3, body=b"whatever flexible bytes"))
    request = server.next_event()
    assert request.unsupported_version and request.api_version == 77
    out = server.send(KafkaResponse(3, body=None))
    assert struct.unpack_from(">iih", out)[1:] == (3, 35)


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(case=st.sampled_from(ALL), body=st.binary(max_size=64))
def test_random_bodies_parse_or_fail_cleanly(case, body):
    key, version = case
    server = KafkaServerConnection()
    server.receive_data(frame(key, version, body=body))
    try:
        event = server.next_event()
    except RemoteProtocolError as exc:
        assert exc.fatal and exc.code == 42
    else:
        assert isinstance(event, KafkaRequest)
        schema = request_schema(key, version)
        rebuilt = prim.build_bytes(schema, event.body)
        assert prim.parse_frame(schema, rebuilt) == (event.body, 0)
        if registry.is_flexible(key, version):
            # The header's tag section came from `body` too; tag sections are skipped and written empty, and
            # over-long varints written short: the rebuilt body is canonical, and shorter.
            assert len(rebuilt) < len(body)
        else:
            # Kafka reads any negative length of a nullable field as null, which we write back as -1: the
            # rebuilt bytes are the canonical form of the input, the same length.
            assert len(rebuilt) == len(body)


# ------------------------------------------------------------------------------------ deferred records

@dataclass
class FileSlice:
    """What the gateway passes: not bytes, with an integer `length` (sent with os.sendfile)."""

    data: bytes

    @property
    def length(self) -> int:
        return len(self.data)


def fetch_response(*records):
    return api.FetchResponse(throttle_time_ms=0, error_code=0, session_id=0, responses=[
        api.FetchableTopicResponse("t", [api.PartitionData(partition_index=i, high_watermark=100 + i,
                                                           last_stable_offset=100 + i, log_start_offset=0,
                                                           aborted_transactions=None, records=r)
                                         for i, r in enumerate(records)])])


def join(chunks):
    return b"".join(ch if isinstance(ch, bytes) else ch.data for ch in chunks)


@pytest.mark.parametrize("version", [0, 4, 11])
def test_deferred_records_in_a_fetch_response(version):
    client, server = KafkaClientConnection(), KafkaServerConnection()
    server.receive_data(client.send(KafkaRequest(1, version, body=api.FetchRequest(max_wait_ms=1, topics=[]))))
    request = server.next_event()
    batch_a, batch_b = b"A" * 1000, b"B" * 333
    chunks = server.send(KafkaResponse(request.correlation_id,
                                       body=fetch_response(FileSlice(batch_a), b"inline", FileSlice(batch_b))))
    kinds = [type(ch).__name__ for ch in chunks]
    assert kinds == ["bytes", "FileSlice", "bytes", "FileSlice"]  # the last deferred ends the response
    assert [ch.data for ch in chunks if isinstance(ch, FileSlice)] == [batch_a, batch_b]  # in order
    (size,) = struct.unpack_from(">i", chunks[0])
    assert size == sum(len(ch) if isinstance(ch, bytes) else ch.length for ch in chunks) - 4
    assert join(chunks) == answer(1, version, fetch_response(batch_a, b"inline", batch_b), request.correlation_id)
    client.receive_data(join(chunks))
    response = client.next_event()
    schema = response_schema(1, version)
    expected = prim.parse_frame(schema, prim.build_bytes(schema, fetch_response(batch_a, b"inline", batch_b)))[0]
    assert response.body == expected
    assert [p.records for p in response.body.responses[0].partitions] == [batch_a, b"inline", batch_b]


def test_one_deferred_followed_by_more_fields_is_three_chunks():
    server, _ = served(1, 11, 5)
    body = fetch_response(FileSlice(b"x" * 50))
    body.responses.append(api.FetchableTopicResponse("u", []))
    chunks = server.send(KafkaResponse(5, body=body))
    assert [type(ch).__name__ for ch in chunks] == ["bytes", "FileSlice", "bytes"]


def test_deferred_records_are_refused_where_they_cannot_go():
    with pytest.raises(LocalProtocolError):
        KafkaClientConnection().send(KafkaRequest(0, 3, body=api.ProduceRequest(acks=1, topic_data=[
            api.TopicProduceData("t", [api.PartitionProduceData(0, FileSlice(b"x"))])])))


def test_encoding_misuse_is_a_local_error_and_keeps_the_request_pending():
    server, _ = served(3, 1, 5)
    for body in (api.FetchResponse(),  # wrong body type
                 api.MetadataResponse(controller_id=2**40),  # out of the int32 range
                 api.MetadataResponse(brokers=[api.MetadataResponseBroker(host=None)])):
        with pytest.raises(LocalProtocolError):
            server.send(KafkaResponse(5, body=body))
    assert server.pending == 1  # a failed send forgets nothing: the caller may answer again
    with pytest.raises(LocalProtocolError, match="api key 3 v1"):
        server.send(KafkaResponse(5, api_key=3, api_version=2, body=api.MetadataResponse()))
    assert isinstance(server.send(KafkaResponse(5, api_key=3, api_version=1, body=api.MetadataResponse())), bytes)
    with pytest.raises(LocalProtocolError, match="correlation id 5"):  # answered already
        server.send(KafkaResponse(5, body=api.MetadataResponse()))
    with pytest.raises(LocalProtocolError):
        KafkaClientConnection().send(KafkaRequest(0, 14, body=api.ProduceRequest()))  # no such version
    with pytest.raises(LocalProtocolError):
        KafkaClientConnection().send(KafkaRequest(12, 0, 2**31, body=api.HeartbeatRequest()))  # not an int32
    with pytest.raises(LocalProtocolError):
        KafkaClientConnection().send(KafkaResponse(0, body=None))  # the wrong role
    with pytest.raises(LocalProtocolError):
        KafkaServerConnection().send(KafkaRequest(12, 0, body=api.HeartbeatRequest()))
    with pytest.raises(LocalProtocolError):
        KafkaServerConnection().send(b"bytes are not an event")


def test_server_remembers_each_request_by_correlation_id_and_reused_ids_in_order():
    client, server = KafkaClientConnection(), KafkaServerConnection()
    sent = [KafkaRequest(3, 1, 7, body=api.MetadataRequest(topics=None)),
            KafkaRequest(18, 2, 9, body=api.ApiVersionsRequest()),
            KafkaRequest(12, 0, 7, body=api.HeartbeatRequest("g", 1, "m"))]  # id 7 again, while 7 is pending
    server.receive_data(b"".join(client.send(r) for r in sent))
    assert [(e.api_key, e.correlation_id) for e in drain(server)] == [(3, 7), (18, 9), (12, 7)]
    assert server.pending == client.pending == 3
    answers = [(9, registry.api_versions_response()), (7, api.MetadataResponse(controller_id=4)),
               (7, api.HeartbeatResponse(error_code=27))]
    data = b"".join(server.send(KafkaResponse(cid, body=body)) for cid, body in answers)
    assert server.pending == 0
    got = whole(client, data)
    assert [(e.correlation_id, e.api_key, e.api_version, e.body) for e in got] == [
        (9, 18, 2, answers[0][1]), (7, 3, 1, answers[1][1]), (7, 12, 0, answers[2][1])]
    assert client.pending == 0


def test_raw_sasl_tokens_are_events_both_ways():
    client, server = KafkaClientConnection(), KafkaServerConnection()
    with pytest.raises(LocalProtocolError, match="SASL"):
        server.send(SaslToken(b""))  # no token was received
    server.expect_sasl_token()
    server.receive_data(client.send(SaslToken(b"\0user\0secret")))
    assert server.next_event() == SaslToken(b"\0user\0secret")
    out = server.send(SaslToken(b""))
    assert out == b"\0\0\0\0"
    with pytest.raises(LocalProtocolError):
        server.send(SaslToken(b""))  # answered already
    client.receive_data(out)
    assert client.next_event() == SaslToken(b"")
    server.receive_data(client.send(KafkaRequest(12, 0, body=api.HeartbeatRequest())))
    assert server.next_event().api_key == 12  # back to framed requests


def test_client_sends_an_explicit_correlation_id_without_moving_its_counter():
    client, server = KafkaClientConnection(), KafkaServerConnection()
    server.receive_data(client.send(KafkaRequest(12, 0, 99, body=api.HeartbeatRequest())))
    server.receive_data(client.send(KafkaRequest(12, 0, body=api.HeartbeatRequest())))
    assert [e.correlation_id for e in drain(server)] == [99, 0] and client.next_correlation_id == 1


def test_client_rejects_an_unexpected_correlation_id_and_leftover_bytes():
    client = KafkaClientConnection()
    client.receive_data(struct.pack(">ii", 4, 12345))
    with pytest.raises(RemoteProtocolError) as info:
        client.next_event()
    assert info.value.fatal and info.value.correlation_id == 12345
    client = KafkaClientConnection()
    client.send(KafkaRequest(12, 0, body=api.HeartbeatRequest()))
    client.receive_data(struct.pack(">iihb", 7, 0, 0, 1))  # heartbeat v0 body + one stray byte
    with pytest.raises(RemoteProtocolError):
        client.next_event()


# ------------------------------------------------------------------------------------- primitives

def test_primitive_bounds_and_minimum_sizes():
    assert prim.min_size(prim.Int64) == 8 and prim.min_size(prim.String) == 2 and prim.min_size(prim.Records) == 4
    partition = request_schema(0, 3).fields[3][1].subcon.fields[1][1].subcon  # PartitionProduceData
    assert prim.min_size(partition) == 8
    assert request_schema(0, 3).fields[3][1].subcon.min_size == 2 + 4  # name + partition count
    huge = prim.Array(prim.Int32)
    with pytest.raises(prim.BoundError):
        prim.parse_frame(huge, struct.pack(">i", 5) + b"\x00" * 19)  # 5 * 4 > 19
    assert prim.parse_frame(huge, struct.pack(">i", 5) + b"\x00" * 20) == ([0] * 5, 0)
    assert prim.parse_frame(prim.NullableArray(prim.Int32), struct.pack(">i", -1)) == (None, 0)
    assert prim.parse_frame(prim.Boolean, b"\x07") == (True, 0)  # Kafka reads any non-zero byte as true
    with pytest.raises(c.ConstructError):
        prim.Bytes.build(None)
    with pytest.raises(c.ConstructError):
        prim.String.build("x" * 40000)
    assert prim.String.parse(struct.pack(">h", 2) + "é".encode()) == "é"
    assert prim.versioned(3, {0: "a", 2: "b"}) == {0: "a", 1: "a", 2: "b", 3: "b"}


def test_error_code_table_matches_kafka():
    import kafka.errors as kerr

    by_number = {cls.errno: cls for cls in vars(kerr).values()
                 if inspect.isclass(cls) and issubclass(cls, kerr.BrokerResponseError) and cls.errno is not None}
    import confluent_kafka

    for code in ErrorCode:  # kafka-python's table, else librdkafka's (newer codes, with Kafka's names)
        assert code.value in by_number or getattr(confluent_kafka.KafkaError, code.name, None) == code.value, code
    contract = dict(NONE=0, OFFSET_OUT_OF_RANGE=1, CORRUPT_MESSAGE=2, UNKNOWN_TOPIC_OR_PARTITION=3,
                    INVALID_FETCH_SIZE=4, LEADER_NOT_AVAILABLE=5, NOT_LEADER_OR_FOLLOWER=6, REQUEST_TIMED_OUT=7,
                    MESSAGE_TOO_LARGE=10, COORDINATOR_LOAD_IN_PROGRESS=14, COORDINATOR_NOT_AVAILABLE=15,
                    NOT_COORDINATOR=16, INVALID_TOPIC_EXCEPTION=17, RECORD_LIST_TOO_LARGE=18,
                    INVALID_REQUIRED_ACKS=21, ILLEGAL_GENERATION=22, INCONSISTENT_GROUP_PROTOCOL=23,
                    INVALID_GROUP_ID=24, UNKNOWN_MEMBER_ID=25, INVALID_SESSION_TIMEOUT=26,
                    REBALANCE_IN_PROGRESS=27, INVALID_COMMIT_OFFSET_SIZE=28, TOPIC_AUTHORIZATION_FAILED=29,
                    GROUP_AUTHORIZATION_FAILED=30, UNSUPPORTED_VERSION=35, TOPIC_ALREADY_EXISTS=36,
                    INVALID_PARTITIONS=37, INVALID_REPLICATION_FACTOR=38, INVALID_REQUEST=42,
                    UNSUPPORTED_FOR_MESSAGE_FORMAT=43, INVALID_CONFIG=40, OUT_OF_ORDER_SEQUENCE_NUMBER=45,
                    DUPLICATE_SEQUENCE_NUMBER=46, INVALID_PRODUCER_EPOCH=47, UNKNOWN_PRODUCER_ID=59,
                    GROUP_ID_NOT_FOUND=69, MEMBER_ID_REQUIRED=79, FENCED_INSTANCE_ID=82, INVALID_RECORD=87,
                    UNKNOWN_SERVER_ERROR=-1)
    for name, value in contract.items():
        assert ErrorCode[name] == value
    assert ErrorCode.name_of(35) == "UNSUPPORTED_VERSION" and ErrorCode.name_of(9999) == "UNKNOWN_CODE_9999"
