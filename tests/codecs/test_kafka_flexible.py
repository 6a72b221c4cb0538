"""Flexible versions (KIP-482): the compact primitives, tagged-field sections, `flexible()`, and the headers.

- Primitives: unsigned varints, compact strings / bytes / arrays (round trips, null forms, the non-nullable forms
  refusing null), bounds (huge compact lengths and counts refused before anything is allocated, varints over 5
  bytes or 32 bits refused), tagged-field sections skipped (and bounded), never written non-empty.
- `flexible(schema)`: compact forms recursively, a tag section per struct, byte-exact against a hand-made frame.
- Headers: request header v2 (client_id stays an int16 string, then tags) and response header v1 (tags after the
  correlation id) for flexible versions, both roles; the ApiVersions response header stays v0.
- A server that serves fewer keys than the codec knows (`api_versions=`).
"""

from __future__ import annotations

import io
import struct
import tracemalloc
from dataclasses import dataclass, field

import construct as c
import pytest

from logway.codecs.errors import RemoteProtocolError
from logway.codecs.kafka import api
from logway.codecs.kafka import primitives as prim
from logway.codecs.kafka.api import registry
from logway.codecs.kafka.api.headers import REQUEST_HEADER_V2, RESPONSE_HEADER_V1, RequestHeader, ResponseHeader
from logway.codecs.kafka.connection import (NEED_DATA, KafkaClientConnection, KafkaRequest, KafkaResponse,
                                            KafkaServerConnection)
from logway.codecs.varint import encode_unsigned_varint as uvarint


def parse(con, data):
    """Parse all of `data` with `con` (nothing may be left over)."""
    value, left = prim.parse_frame(con, data)
    assert left == 0
    return value


def low_memory(fn) -> int:
    """Peak bytes allocated while `fn()` runs (it must raise a BoundError)."""
    tracemalloc.start()
    try:
        with pytest.raises(prim.BoundError):
            fn()
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    return peak


# ------------------------------------------------------------------------------------------ unsigned varints

@pytest.mark.parametrize("value,wire", [(0, b"\x00"), (1, b"\x01"), (127, b"\x7f"), (128, b"\x80\x01"),
                                        (300, b"\xac\x02"), (2**14, b"\x80\x80\x01"),
                                        (2**32 - 1, b"\xff\xff\xff\xff\x0f")])
def test_unsigned_varint_round_trip(value, wire):
    assert prim.build_bytes(prim.UnsignedVarint, value) == wire
    assert parse(prim.UnsignedVarint, wire) == value
    assert prim.UnsignedVarint.parse(wire) == value  # through a BytesIO too


@pytest.mark.parametrize("wire", [
    b"\x80\x80\x80\x80\x80\x00",  # 6 bytes: longer than any 32-bit value needs
    b"\xff\xff\xff\xff\x1f",  # 5 bytes but 35 bits
    b"\x80\x80",  # truncated
    b"",
])
def test_unsigned_varint_over_5_bytes_32_bits_or_truncated_is_refused(wire):
    with pytest.raises(c.StreamError):
        prim.parse_frame(prim.UnsignedVarint, wire)
    with pytest.raises(c.StreamError):
        prim.UnsignedVarint.parse(wire)


@pytest.mark.parametrize("value", [-1, 2**32])
def test_unsigned_varint_out_of_range_is_not_built(value):
    with pytest.raises(c.StreamError):
        prim.build_bytes(prim.UnsignedVarint, value)


# ----------------------------------------------------------------------------------- compact strings and bytes

@pytest.mark.parametrize("text", ["", "abc", "é" * 100, "x" * prim.MAX_STRING_BYTES])
def test_compact_string_round_trip(text):
    data = text.encode()
    wire = uvarint(len(data) + 1) + data
    for con in (prim.CompactString, prim.CompactNullableString):
        assert prim.build_bytes(con, text) == wire
        assert parse(con, wire) == text
        assert con.parse(wire) == text


def test_compact_string_null_forms():
    assert prim.build_bytes(prim.CompactNullableString, None) == b"\x00"
    assert parse(prim.CompactNullableString, b"\x00") is None
    with pytest.raises(c.StringError):
        prim.parse_frame(prim.CompactString, b"\x00")  # null in a non-nullable string
    with pytest.raises(c.StringError):
        prim.build_bytes(prim.CompactString, None)
    with pytest.raises(c.StringError):
        prim.build_bytes(prim.CompactString, "x" * (prim.MAX_STRING_BYTES + 1))  # Kafka refuses it too


def test_compact_string_lengths_are_bounded_before_reading():
    # longer than any string Kafka accepts, even when the frame holds it
    big = prim.MAX_STRING_BYTES + 1
    with pytest.raises(prim.BoundError, match="exceeds 32767"):
        prim.parse_frame(prim.CompactString, uvarint(big + 1) + b"a" * big)
    with pytest.raises(prim.BoundError):
        prim.parse_frame(prim.CompactNullableString, uvarint(11) + b"abc")  # beyond the frame
    assert low_memory(lambda: prim.parse_frame(prim.CompactString, uvarint(2**32 - 1) + b"abc")) < 64 * 1024
    with pytest.raises(c.StringError):
        prim.parse_frame(prim.CompactString, b"\x03\xff\xfe")  # invalid UTF-8


@pytest.mark.parametrize("con", [prim.CompactBytes, prim.CompactNullableBytes, prim.CompactRecords])
@pytest.mark.parametrize("data", [b"", b"xyz", bytes(range(256)) * 3])
def test_compact_bytes_round_trip(con, data):
    wire = uvarint(len(data) + 1) + data
    assert prim.build_bytes(con, data) == wire
    assert parse(con, wire) == data
    assert con.parse(wire) == data


def test_compact_bytes_null_forms_and_bounds():
    for con in (prim.CompactNullableBytes, prim.CompactRecords):
        assert prim.build_bytes(con, None) == b"\x00" and parse(con, b"\x00") is None
    with pytest.raises(c.StreamError):
        prim.parse_frame(prim.CompactBytes, b"\x00")
    with pytest.raises(c.StreamError):
        prim.build_bytes(prim.CompactBytes, None)
    with pytest.raises(prim.BoundError):
        prim.parse_frame(prim.CompactBytes, uvarint(5) + b"abc")
    assert low_memory(lambda: prim.parse_frame(prim.CompactRecords, uvarint(2**32 - 1) + b"abc")) < 64 * 1024


def test_compact_records_may_be_deferred():
    @dataclass
    class Slice:
        length: int

    out = prim.FrameWriter()
    deferred = prim.build_chunks(prim.CompactRecords, Slice(300), out)
    assert out.getvalue() == uvarint(301) and deferred == [(2, Slice(300))]


# ------------------------------------------------------------------------------------------------ compact arrays

def test_compact_array_round_trip_and_null_forms():
    ints = prim.CompactArray(prim.Int32)
    assert prim.build_bytes(ints, [1, 2, 3]) == b"\x04" + struct.pack(">iii", 1, 2, 3)
    assert parse(ints, b"\x04" + struct.pack(">iii", 1, 2, 3)) == [1, 2, 3]
    assert prim.build_bytes(ints, []) == b"\x01" and parse(ints, b"\x01") == []
    strings = prim.CompactNullableArray(prim.CompactString)
    assert prim.build_bytes(strings, ["a", "bc"]) == b"\x03\x02a\x03bc"
    assert parse(strings, b"\x03\x02a\x03bc") == ["a", "bc"]
    assert strings.parse(b"\x03\x02a\x03bc") == ["a", "bc"]
    assert prim.build_bytes(strings, None) == b"\x00" and parse(strings, b"\x00") is None
    with pytest.raises(c.RangeError):
        prim.parse_frame(ints, b"\x00")  # null in a non-nullable array
    with pytest.raises(c.RangeError):
        prim.build_bytes(ints, None)
    assert repr(strings) == "CompactNullableArray(CompactString)"


def test_compact_array_counts_are_bounded_before_allocating():
    ints = prim.CompactArray(prim.Int32)
    with pytest.raises(prim.BoundError):
        prim.parse_frame(ints, uvarint(6) + b"\x00" * 19)  # 5 items * 4 bytes > 19
    assert parse(ints, uvarint(6) + b"\x00" * 20) == [0] * 5
    for con in (ints, prim.CompactArray(prim.CompactString), prim.CompactNullableArray(prim.Int8)):
        assert low_memory(lambda con=con: prim.parse_frame(con, uvarint(2**32 - 1) + b"\x00" * 16)) < 64 * 1024


# ------------------------------------------------------------------------------------------------ tagged fields

def tag(number: int, data: bytes) -> bytes:
    return uvarint(number) + uvarint(len(data)) + data


def test_tagged_fields_are_skipped_and_written_empty():
    assert parse(prim.TaggedFields, b"\x00") is None
    section = uvarint(3) + tag(0, b"abc") + tag(5, b"") + tag(300, b"x" * 200)
    assert parse(prim.TaggedFields, section) is None
    assert prim.TaggedFields.parse(section) is None  # BytesIO
    assert prim.parse_frame(prim.TaggedFields, section + b"rest") == (None, 4)
    assert prim.build_bytes(prim.TaggedFields, {"anything": 1}) == prim.EMPTY_TAGGED_FIELDS == b"\x00"


@pytest.mark.parametrize("section", [
    uvarint(1000) + tag(0, b"ab"),  # more fields than the bytes left could hold
    uvarint(2**32 - 1),
    uvarint(1) + uvarint(0) + uvarint(10) + b"abc",  # a field longer than the frame
    uvarint(1) + uvarint(0) + uvarint(2**32 - 1),
])
def test_tagged_field_counts_and_sizes_are_bounded(section):
    assert low_memory(lambda: prim.parse_frame(prim.TaggedFields, section)) < 64 * 1024


def test_tagged_field_varints_are_bounded():
    with pytest.raises(c.StreamError):
        prim.parse_frame(prim.TaggedFields, b"\x01" + b"\x80" * 5 + b"\x00" + b"\x00" * 8)  # 6-byte tag
    with pytest.raises(c.StreamError):
        prim.parse_frame(prim.TaggedFields, b"\x01\x00")  # truncated: no size


# ------------------------------------------------------------------------------------------------- flexible()

@dataclass(slots=True)
class Item:
    x: int = 0
    note: str | None = None


@dataclass(slots=True)
class Message:
    name: str = ""
    blob: bytes | None = None
    items: list[Item] | None = field(default_factory=list)
    flag: bool = False


CLASSIC = prim.schema(Message, name=prim.String, blob=prim.NullableBytes,
                      items=prim.NullableArray(prim.schema(Item, x=prim.Int32, note=prim.NullableString)),
                      flag=prim.Boolean)
FLEX = prim.flexible(CLASSIC)


def test_flexible_turns_every_field_compact_and_adds_tag_sections():
    assert FLEX.flexible and not CLASSIC.flexible
    types = dict(FLEX.fields)
    assert types["name"].compact and not types["name"].nullable
    assert types["blob"].compact and types["blob"].nullable
    assert types["items"].compact and types["items"].nullable
    assert types["items"].subcon.flexible and dict(types["items"].subcon.fields)["note"].compact
    assert types["flag"] is prim.Boolean
    assert FLEX.min_size == 1 + 1 + 1 + 1 + 1  # name, blob, items, flag, tags
    assert types["items"].subcon.min_size == 4 + 1 + 1  # x, note, tags
    assert prim.flexible(FLEX) is FLEX
    assert prim.flexible(prim.Int64) is prim.Int64 and prim.flexible(prim.TaggedFields) is prim.TaggedFields
    assert repr(FLEX).startswith("flexible(schema(Message, name=CompactString")
    with pytest.raises(TypeError):
        prim.flexible(c.Bytes(3))
    with pytest.raises(c.SizeofError):
        FLEX.sizeof()


def test_flexible_bytes_are_exact_and_tags_anywhere_are_skipped():
    msg = Message(name="ab", blob=b"\x01\x02", items=[Item(7, "n"), Item(-1, None)], flag=True)
    wire = (b"\x03ab" + b"\x03\x01\x02" + b"\x03" + struct.pack(">i", 7) + b"\x02n" + b"\x00"
            + struct.pack(">i", -1) + b"\x00" + b"\x00" + b"\x01" + b"\x00")
    assert prim.build_bytes(FLEX, msg) == wire
    assert parse(FLEX, wire) == msg
    assert FLEX.parse(wire) == msg
    # the same message with tags in the nested structs and at the end: parsed the same, rebuilt without them
    tagged = (b"\x03ab" + b"\x03\x01\x02" + b"\x03" + struct.pack(">i", 7) + b"\x02n" + b"\x01" + tag(1, b"zz")
              + struct.pack(">i", -1) + b"\x00" + b"\x02" + tag(0, b"") + tag(9, b"abc") + b"\x01"
              + b"\x01" + tag(4, b"q"))
    assert parse(FLEX, tagged) == msg
    empty = Message(name="", blob=None, items=None, flag=False)
    assert prim.build_bytes(FLEX, empty) == b"\x01\x00\x00\x00\x00"
    assert parse(FLEX, b"\x01\x00\x00\x00\x00") == empty


def test_flexible_struct_array_count_bound_uses_the_flexible_item_size():
    with pytest.raises(prim.BoundError, match="needs at least 12 bytes"):  # 2 items * (4 + 1 + 1)
        prim.parse_frame(FLEX, b"\x01\x00\x03" + b"\x00" * 10)
    assert low_memory(lambda: prim.parse_frame(FLEX, b"\x01\x00" + uvarint(2**32 - 1) + b"\x00" * 8)) < 64 * 1024


# ------------------------------------------------------------------------------------------------------ headers

def test_header_schemas():
    header = RequestHeader(44, 1, 7, "me")
    assert prim.build_bytes(REQUEST_HEADER_V2, header) == struct.pack(">hhih", 44, 1, 7, 2) + b"me\x00"
    assert parse(REQUEST_HEADER_V2, struct.pack(">hhih", 44, 1, 7, -1) + b"\x01" + tag(0, b"x")) == RequestHeader(
        44, 1, 7, None)  # client_id stays an int16 string; header tags skipped
    assert prim.build_bytes(RESPONSE_HEADER_V1, ResponseHeader(5)) == b"\x00\x00\x00\x05\x00"


FLEX_BODY = api.IncrementalAlterConfigsRequest(resources=[api.IncrementalAlterConfigsResource(
    resource_type=2, resource_name="t", configs=[api.IncrementalAlterableConfig("retention.ms", 0, "1000"),
                                                 api.IncrementalAlterableConfig("cleanup.policy", 1, None)])],
    validate_only=True)


def test_flexible_request_uses_header_v2_both_ways():
    frame = KafkaClientConnection().send(KafkaRequest(44, 1, 3, "cli", FLEX_BODY))
    body = prim.build_bytes(registry.request_schema(44, 1), FLEX_BODY)
    assert frame == struct.pack(">ihhih", len(frame) - 4, 44, 1, 3, 3) + b"cli" + b"\x00" + body
    server = KafkaServerConnection()
    server.receive_data(frame)
    request = server.next_event()
    assert (request.api_key, request.api_version, request.correlation_id, request.client_id) == (44, 1, 3, "cli")
    assert request.body == FLEX_BODY
    # a header tag section with fields (which no client sends today) is skipped
    payload = struct.pack(">hhih", 44, 1, 4, 3) + b"cli" + b"\x02" + tag(0, b"a") + tag(7, b"bcd") + body
    server.receive_data(struct.pack(">i", len(payload)) + payload)
    assert server.next_event().body == FLEX_BODY
    # the non-flexible v0 of the same API: header v1, no tag byte
    frame0 = KafkaClientConnection().send(KafkaRequest(44, 0, 3, "cli", FLEX_BODY))
    body0 = prim.build_bytes(registry.request_schema(44, 0), FLEX_BODY)
    assert frame0 == struct.pack(">ihhih", len(frame0) - 4, 44, 0, 3, 3) + b"cli" + body0


def test_flexible_response_uses_header_v1_both_ways():
    client, server = KafkaClientConnection(), KafkaServerConnection()
    server.receive_data(client.send(KafkaRequest(60, 0, body=api.DescribeClusterRequest(True))))
    assert server.next_event().body == api.DescribeClusterRequest(True)
    answer = api.DescribeClusterResponse(cluster_id="logway", controller_id=0, brokers=[
        api.DescribeClusterBroker(0, "localhost", 9092, None)])
    out = server.send(KafkaResponse(0, body=answer))
    body = prim.build_bytes(registry.response_schema(60, 0), answer)
    assert out == struct.pack(">ii", len(out) - 4, 0) + b"\x00" + body
    client.receive_data(out)
    assert client.next_event().body == answer
    # a response header with tags is skipped by our client
    client.send(KafkaRequest(60, 0, 9, body=api.DescribeClusterRequest()))
    payload = struct.pack(">i", 9) + b"\x01" + tag(0, b"xyz") + body
    client.receive_data(struct.pack(">i", len(payload)) + payload)
    response = client.next_event()
    assert (response.correlation_id, response.body) == (9, answer)
    assert client.next_event() is NEED_DATA


def test_non_flexible_responses_and_api_versions_keep_header_v0():
    for key, version, request, response in [
            (44, 0, FLEX_BODY, api.IncrementalAlterConfigsResponse()),
            (18, 2, api.ApiVersionsRequest(), registry.api_versions_response())]:
        client, server = KafkaClientConnection(), KafkaServerConnection()
        server.receive_data(client.send(KafkaRequest(key, version, body=request)))
        server.next_event()
        out = server.send(KafkaResponse(0, body=response))
        assert out[8:] == prim.build_bytes(registry.response_schema(key, version), response)
        client.receive_data(out)
        assert client.next_event().body == response


@pytest.mark.parametrize("bad_tags", [uvarint(2**31) + b"\x00" * 8, b"\x01\x00\x7f", b"\x80\x80\x80\x80\x80\x01"])
def test_malformed_header_tag_sections_are_fatal_invalid_request(bad_tags):
    body = prim.build_bytes(registry.request_schema(60, 0), api.DescribeClusterRequest())
    payload = struct.pack(">hhih", 60, 0, 11, -1) + bad_tags + body
    server = KafkaServerConnection()
    server.receive_data(struct.pack(">i", len(payload)) + payload)
    with pytest.raises(RemoteProtocolError) as info:
        server.next_event()
    assert (info.value.fatal, info.value.code, info.value.correlation_id) == (True, 42, 11)


def test_malformed_response_header_tags_are_fatal_for_the_client():
    client = KafkaClientConnection()
    client.send(KafkaRequest(60, 0, body=api.DescribeClusterRequest()))
    client.receive_data(struct.pack(">ii", 5, 0) + b"\x05")  # 5 tags, no bytes
    with pytest.raises(RemoteProtocolError) as info:
        client.next_event()
    assert info.value.fatal


def test_kafka_python_flexible_messages_read_our_bytes_and_we_read_theirs():
    from kafka.protocol.admin import DescribeClusterRequest as KpRequest
    from kafka.protocol.admin import DescribeClusterResponse as KpResponse

    message = KpRequest(version=0, include_cluster_authorized_operations=True)
    message.with_header(correlation_id=5, client_id="kafka-python")
    server = KafkaServerConnection()
    server.receive_data(bytes(message.encode(header=True, framed=True)))
    request = server.next_event()
    assert (request.correlation_id, request.client_id, request.body) == (
        5, "kafka-python", api.DescribeClusterRequest(True))
    out = server.send(KafkaResponse(5, body=api.DescribeClusterResponse(
        error_message="m", cluster_id="c", controller_id=3, brokers=[api.DescribeClusterBroker(3, "h", 1, "r")])))
    decoded = KpResponse.decode(out[9:], version=0)
    assert (decoded.cluster_id, decoded.controller_id, decoded.error_message) == ("c", 3, "m")
    assert [(b.broker_id, b.host, b.port, b.rack) for b in decoded.brokers] == [(3, "h", 1, "r")]


# ------------------------------------------------------------------------------- a server serving fewer keys

def test_a_server_refuses_keys_and_versions_it_does_not_serve():
    served = registry.advertised([18, 3, 12])
    client = KafkaClientConnection()
    server = KafkaServerConnection(api_versions=served)
    server.receive_data(client.send(KafkaRequest(3, 8, body=api.MetadataRequest(topics=None))))
    assert server.next_event().api_key == 3
    for key, version, body in [(26, 0, api.EndTxnRequest("t", 1, 0, True)), (44, 1, FLEX_BODY)]:
        server = KafkaServerConnection(api_versions=served)
        server.receive_data(client.send(KafkaRequest(key, version, 77, body=body)))
        with pytest.raises(RemoteProtocolError) as info:
            server.next_event()
        assert (info.value.fatal, info.value.code, info.value.api_key) == (True, 35, key)
    # the ApiVersions v3+ fallback lists what this server serves
    server = KafkaServerConnection(api_versions={**served, 18: (0, 1)})
    server.receive_data(struct.pack(">ihhih", 11, 18, 2, 1, 1) + b"c")  # v2 is above this server's 0-1
    assert server.next_event().unsupported_version
    out = server.send(KafkaResponse(1, body=None))
    keys = prim.parse_frame(api.api_versions.RESPONSE_V0, out, 8)[0].api_keys
    assert {k.api_key: (k.min_version, k.max_version) for k in keys} == {3: (0, 13), 12: (0, 4), 18: (0, 1)}
    with pytest.raises(ValueError):
        KafkaServerConnection(api_versions={0: (0, 14)})  # beyond what the codec implements
    with pytest.raises(ValueError):
        KafkaServerConnection(api_versions={4: (0, 0)})


def test_construct_streams_other_than_frames_work_for_flexible_schemas():
    schema = registry.request_schema(44, 1)
    data = prim.build_bytes(schema, FLEX_BODY)
    assert schema.parse_stream(io.BytesIO(data)) == FLEX_BODY
