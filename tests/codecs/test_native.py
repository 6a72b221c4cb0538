"""Tests of the native protocol's sans-I/O codec (logway.codecs.native) against fixtures/native/frames.json."""

from __future__ import annotations

import json
import re
import struct
import tracemalloc
from pathlib import Path

import pytest

from logway.codecs import native
from logway.codecs.errors import LocalProtocolError, RecordFormatError, RemoteProtocolError
from logway.codecs.native import (
    CLOSED,
    MAX_FRAME_BYTES,
    NEED_DATA,
    ErrorResponse,
    FetchRequest,
    FetchResponse,
    NativeConnection,
    PingRequest,
    PongResponse,
    ProduceRequest,
    ProduceResponse,
    RelayedResponse,
)
from logway.codecs.records import Record

MANIFEST = json.loads((Path(__file__).resolve().parent.parent.parent / "fixtures" / "native" / "frames.json").read_text())
FRAMES = {f["name"]: f for f in MANIFEST["frames"]}
PING = bytes.fromhex(FRAMES["ping"]["hex"])
PONG = bytes.fromhex(FRAMES["pong"]["hex"])


def _bytes(v):
    return None if v is None else bytes(v)


def build(expected: dict):
    """The event described by a fixture's `expected` form."""
    fields = {k: v for k, v in expected.items() if k != "event"}
    if "records" in fields:
        fields["records"] = [
            Record(_bytes(r["value"]), key=_bytes(r.get("key")), timestamp=r.get("timestamp"),
                   offset=r.get("offset", -1))
            for r in fields["records"]
        ]
    if "topics" in fields:
        fields["topics"] = [native.TopicSummary(**t) for t in fields["topics"]]
    if isinstance(fields.get("partitions"), list):
        fields["partitions"] = [native.PartitionSummary(**p) for p in fields["partitions"]]
    return getattr(native, expected["event"])(**fields)


def frame_of(text: str) -> bytes:
    payload = text.encode()
    return struct.pack(">I", len(payload)) + payload


def drain(conn: NativeConnection) -> list:
    events = []
    while (event := conn.next_event()) is not NEED_DATA and event is not CLOSED:
        events.append(event)
    return events


def frame_ids(entries):
    return [e["name"] for e in entries]


# ------------------------------------------------------------------------------------------- fixtures


def test_manifest_is_consistent():
    assert len(FRAMES) == len(MANIFEST["frames"]), "frame names must be unique"
    for f in MANIFEST["frames"] + MANIFEST["bad_frames"]:
        assert bytes.fromhex(f["hex"]) == frame_of(f["text"]), f["name"]
    for flow in MANIFEST["flows"]:
        assert all(step in FRAMES for step in flow["steps"]), flow["name"]


@pytest.mark.parametrize("fixture", MANIFEST["frames"], ids=frame_ids(MANIFEST["frames"]))
def test_fixture_fed_whole(fixture):
    conn = NativeConnection(fixture["parser"])
    conn.receive_data(bytes.fromhex(fixture["hex"]))
    assert conn.next_event() == build(fixture["expected"])
    assert conn.next_event() is NEED_DATA
    conn.receive_data(b"")
    assert conn.next_event() is CLOSED
    assert conn.next_event() is CLOSED


@pytest.mark.parametrize("fixture", MANIFEST["frames"], ids=frame_ids(MANIFEST["frames"]))
def test_fixture_fed_one_byte_at_a_time(fixture):
    conn = NativeConnection(fixture["parser"])
    data = bytes.fromhex(fixture["hex"])
    for i in range(len(data) - 1):
        conn.receive_data(data[i:i + 1])
        assert conn.next_event() is NEED_DATA
    conn.receive_data(data[-1:])
    assert conn.next_event() == build(fixture["expected"])
    assert conn.next_event() is NEED_DATA


@pytest.mark.parametrize("fixture", MANIFEST["frames"], ids=frame_ids(MANIFEST["frames"]))
def test_fixture_with_trailing_bytes(fixture):
    conn = NativeConnection(fixture["parser"])
    follow_up = PING if fixture["parser"] == "server" else PONG
    conn.receive_data(bytes.fromhex(fixture["hex"]) + follow_up[:3])
    assert conn.next_event() == build(fixture["expected"])
    assert conn.next_event() is NEED_DATA
    assert conn.trailing_data == (follow_up[:3], False)
    conn.receive_data(follow_up[3:])
    assert conn.next_event() == (PingRequest() if fixture["parser"] == "server" else PongResponse())


@pytest.mark.parametrize("fixture", [f for f in MANIFEST["frames"] if f["canonical"]],
                         ids=frame_ids(f for f in MANIFEST["frames"] if f["canonical"]))
def test_send_reproduces_canonical_fixture(fixture):
    sender = NativeConnection("client" if fixture["parser"] == "server" else "server")
    assert sender.send(build(fixture["expected"])) == bytes.fromhex(fixture["hex"])


@pytest.mark.parametrize("flow", MANIFEST["flows"], ids=[f["name"] for f in MANIFEST["flows"]])
def test_seed_flows(flow):
    """Each direction of a flow arrives as one stream; events come out in order."""
    server, client = NativeConnection("server"), NativeConnection("client")
    steps = [FRAMES[name] for name in flow["steps"]]
    for step in steps:
        (server if step["parser"] == "server" else client).receive_data(bytes.fromhex(step["hex"]))
    server.receive_data(b"")
    client.receive_data(b"")
    assert drain(server) == [build(s["expected"]) for s in steps if s["parser"] == "server"]
    assert drain(client) == [build(s["expected"]) for s in steps if s["parser"] == "client"]
    assert server.next_event() is CLOSED and client.next_event() is CLOSED


def test_decoded_values_are_real():
    """Spot-check a decoded fixture field by field (not only via the fixture's own expected form)."""
    conn = NativeConnection("server")
    conn.receive_data(bytes.fromhex(FRAMES["produce_orders"]["hex"]))
    event = conn.next_event()
    assert isinstance(event, ProduceRequest)
    assert (event.topic, event.partition) == ("orders", 0)
    assert [r.value for r in event.records] == [b"bytes", b"more"]
    assert all(r.key is None and r.timestamp is None and r.headers == () for r in event.records)

    conn.receive_data(bytes.fromhex(FRAMES["produce_object_form"]["hex"]))
    event = conn.next_event()
    assert [(r.value, r.key, r.timestamp) for r in event.records] == [
        (b"\x01\x02", b"k", 1700000000000), (b"\x03", None, None), (b"\x04", None, 5), (b"", b"", None)
    ]

    client = NativeConnection("client")
    client.receive_data(bytes.fromhex(FRAMES["fetch_response_key_timestamp_tombstone"]["hex"]))
    event = client.next_event()
    assert [(r.offset, r.value, r.key) for r in event.records] == [
        (7, b"\x01", b"\x02\x03"), (8, b"", None), (9, None, b"\x01")
    ]
    assert event.next_offset == 10


# ----------------------------------------------------------------------------------------- round trips

REQUESTS = [
    native.ProduceRequest("orders", 0, [Record(b"a"), Record(b"", key=b"k", timestamp=0), Record(bytes(range(256)))]),
    native.ProduceRequest("t", 2**31 - 1, []),
    native.FetchRequest("orders", 1, 2**63 - 1, 0),
    native.FetchRequest("orders", 1, 5, 1024, group_id="g", max_wait_ms=100, min_bytes=10),
    native.FetchRequest("orders", 1, 5, 1024, group_id=""),
    native.OffsetCommitRequest("orders", 0, "g", 3),
    native.OffsetCommitRequest("orders", 0, "g", 3, metadata="m"),
    native.OffsetFetchRequest("orders", 0, "g"),
    native.CreateTopicRequest("new"),
    native.CreateTopicRequest("new", partitions=8),
    native.ListTopicsRequest(),
    native.DescribeTopicRequest("orders"),
    native.DescribeTopicRequest("orders", partitions=[3, 0]),
    native.DescribeTopicRequest("orders", details=True, partitions=[]),
    native.DescribeTopicRequest("orders", partitions=[1], at_timestamp=1_700_000_000_000),
    native.DescribeTopicRequest("orders", at_timestamp=0),
    native.PingRequest(),
    native.TxnEndRequest(2**63 - 1, 2**15 - 1, True, [("orders", 0), ("t", 2**31 - 1)]),
    native.TxnEndRequest(0, 0, False, []),
    native.TxnQueryRequest(7, 3, "orders", 1),
    native.DescribeQuotasRequest(),
    native.DescribeQuotasRequest([native.QuotaComponent("user", "alice"), native.QuotaComponent("client-id")], True),
    native.DescribeQuotasRequest([native.QuotaComponent("user", default=True)]),
    native.AlterQuotasRequest([("user", None), ("client-id", "etl")], {"producer_byte_rate": 1024.0}),
    native.AlterQuotasRequest([("user", "alice")], delete=["request_percentage"], validate_only=True),
]
RESPONSES = [
    native.ProduceResponse([0, 1, 2**63 - 1]),
    native.ProduceResponse([]),
    native.FetchResponse([Record(b"x", offset=0), Record(b"y", key=b"k", timestamp=7, offset=1),
                          Record(None, key=b"gone", offset=2)], 3),
    native.FetchResponse([], 0),
    native.OffsetCommitResponse(True),
    native.OffsetCommitResponse(False),
    native.OffsetFetchResponse(None),
    native.OffsetFetchResponse(12),
    native.CreateTopicResponse(False),
    native.ListTopicsResponse([native.TopicSummary("a", 1), native.TopicSummary("ü", 3)]),
    native.ListTopicsResponse([]),
    native.DescribeTopicResponse("a", [native.PartitionSummary(0, 10, 20)]),
    native.DescribeTopicResponse("a", [native.PartitionSummary(0, 10, 20, timestamp_offset=15),
                                       native.PartitionSummary(1, 0, 0, 4096, 1, 0)], "kafka"),
    native.DescribeTopicResponse("a", [native.PartitionSummary(0, 10, 20, 4096, 1, last_stable_offset=17)], "tank"),
    native.PongResponse(),
    *(native.TxnResponse(state) for state in ("ok", "ongoing", "completing", "committed", "aborted")),
    native.ErrorResponse("offset out of range"),
    native.QuotasResponse([native.QuotaEntry([("user", "alice")], {"producer_byte_rate": 1024.0,
                                                                    "request_percentage": 12.5}),
                           native.QuotaEntry([("client-id", None), ("user", None)], {})]),
    native.QuotasResponse([]),
    native.AlterQuotasResponse(False),
]


@pytest.mark.parametrize("event", REQUESTS, ids=repr)
def test_request_round_trip(event):
    frame = NativeConnection("client").send(event)
    server = NativeConnection("server")
    server.receive_data(frame)
    assert server.next_event() == event


@pytest.mark.parametrize("event", RESPONSES, ids=repr)
def test_response_round_trip(event):
    frame = NativeConnection("server").send(event)
    client = NativeConnection("client")
    client.receive_data(frame)
    assert client.next_event() == event


def test_many_frames_in_one_buffer_and_compaction():
    """Enough frames to cross the compaction threshold, fed in odd-sized chunks."""
    sender = NativeConnection("client")
    events = [native.ProduceRequest("t", i % 3, [Record(bytes([i % 256]) * (i % 700))]) for i in range(400)]
    stream = b"".join(sender.send(e) for e in events)
    server = NativeConnection("server")
    received = []
    for start in range(0, len(stream), 7919):
        server.receive_data(stream[start:start + 7919])
        received.extend(drain(server))
    assert received == events
    assert server.trailing_data == (b"", False)


def test_fetch_response_drops_headers_but_produce_refuses_them():
    record = Record(b"v", headers=(("h", b"1"),), offset=4)
    frame = NativeConnection("server").send(FetchResponse([record], 5))
    assert json.loads(frame[4:]) == {"Fetch": {"records": [{"offset": 4, "payload": [118]}], "next_offset": 5}}
    with pytest.raises(LocalProtocolError, match="headers"):
        NativeConnection("client").send(ProduceRequest("t", 0, [record]))


# ------------------------------------------------------------------------------------------ error paths


@pytest.mark.parametrize("fields, message", [
    ('"partitions": "0"', "`partitions` must be an array, got a string"),
    ('"partitions": [0, -1]', "`partition` = -1 is out of range"),
    ('"partitions": [true]', "`partition` must be an integer, got"),
    ('"at_timestamp": -1', "`at_timestamp` = -1 is out of range"),
    ('"at_timestamp": "yesterday"', "`at_timestamp` must be an integer, got"),
    ('"at_timestamp": 1e3', "`at_timestamp` must be an integer, got"),
    ('"at_timestamp": 9223372036854775808', "`at_timestamp` = 9223372036854775808 is out of range"),
])
def test_describe_topic_partitions_and_timestamp_are_checked(fields, message):
    body = ('{"DescribeTopic": {"topic": "t", %s}}' % fields).encode()
    conn = NativeConnection("server")
    conn.receive_data(len(body).to_bytes(4, "big") + body + PING)
    with pytest.raises(RemoteProtocolError, match=re.escape(message)) as info:
        conn.next_event()
    assert info.value.fatal is False and conn.next_event() == PingRequest()


@pytest.mark.parametrize("body, message", [
    ('{"TxnEnd": {"producer_id": 1, "epoch": 0, "partitions": []}}', "missing field `committed`"),
    ('{"TxnEnd": {"producer_id": -1, "epoch": 0, "committed": true, "partitions": []}}',
     "`producer_id` = -1 is out of range"),
    ('{"TxnEnd": {"producer_id": 1, "epoch": 32768, "committed": true, "partitions": []}}',
     "`epoch` = 32768 is out of range"),
    ('{"TxnEnd": {"producer_id": 1, "epoch": 0, "committed": 1, "partitions": []}}', "`committed` must be a boolean"),
    ('{"TxnEnd": {"producer_id": 1, "epoch": 0, "committed": true, "partitions": [["t", 0]]}}',
     "`partition` must be an object, got an array"),
    ('{"TxnEnd": {"producer_id": 1, "epoch": 0, "committed": true, "partitions": [{"topic": "t"}]}}',
     "missing field `partition`"),
    ('{"TxnEnd": {"producer_id": 1, "epoch": 0, "committed": true, "partitions": %s}}'
     % json.dumps([{"topic": "t", "partition": 0}] * 100_001), "more than 100000"),
    ('{"TxnQuery": {"producer_id": true, "epoch": 0, "topic": "t", "partition": 0}}',
     "`producer_id` must be an integer"),
    ('{"TxnQuery": {"producer_id": 1, "epoch": 0, "topic": "t"}}', "missing field `partition`"),
])
def test_internal_transaction_requests_are_checked(body, message):
    body = body.encode()
    conn = NativeConnection("server", max_frame=8 << 20)
    conn.receive_data(len(body).to_bytes(4, "big") + body + PING)
    with pytest.raises(RemoteProtocolError, match=re.escape(message)) as info:
        conn.next_event()
    assert info.value.fatal is False and conn.next_event() == PingRequest()


@pytest.mark.parametrize("body, message", [
    ('{"DescribeQuotas": {"entity": {"type": "user"}}}', "`entity` must be an array, got an object"),
    ('{"DescribeQuotas": {"entity": [{"name": "alice"}]}}', "missing field `type`"),
    ('{"DescribeQuotas": {"entity": [{"type": "user", "name": "a", "default": true}]}}', "not both"),
    ('{"DescribeQuotas": {"entity": %s}}' % json.dumps([{"type": "user"}] * 9), "at most 8"),
    ('{"DescribeQuotas": {"strict": 1}}', "`strict` must be a boolean"),
    ('{"AlterQuotas": {"entity": [{"type": "user"}], "set": {"producer_byte_rate": 1}}}',
     'needs a `name` or `"default": true`'),
    ('{"AlterQuotas": {"entity": [{"type": "user", "name": "a"}]}}', "nothing to alter"),
    ('{"AlterQuotas": {"entity": [{"type": "user", "name": "a"}], "set": {"producer_byte_rate": "1k"}}}',
     "`producer_byte_rate` must be a number, got a string"),
    ('{"AlterQuotas": {"entity": [{"type": "user", "name": "a"}], "set": %s}}'
     % json.dumps({f"k{i}": 1 for i in range(65)}), "at most 64"),
    ('{"AlterQuotas": {"entity": [{"type": "user", "name": "a"}], "delete": "producer_byte_rate"}}',
     "`delete` must be an array"),
    ('{"AlterQuotas": {"set": {"producer_byte_rate": 1}}}', "missing field `entity`"),
])
def test_quota_requests_are_checked(body, message):
    body = body.encode()
    conn = NativeConnection("server")
    conn.receive_data(len(body).to_bytes(4, "big") + body + PING)
    with pytest.raises(RemoteProtocolError, match=re.escape(message)) as info:
        conn.next_event()
    assert info.value.fatal is False and conn.next_event() == PingRequest()


def test_a_txn_answer_with_another_state_is_refused():
    body = b'{"Txn": {"state": "maybe"}}'
    conn = NativeConnection("client")
    conn.receive_data(len(body).to_bytes(4, "big") + body)
    with pytest.raises(RemoteProtocolError, match="`state` must be one of ok, ongoing"):
        conn.next_event()
    with pytest.raises(LocalProtocolError, match="`state` must be one of"):
        NativeConnection("server").send(native.TxnResponse("maybe"))
    with pytest.raises(LocalProtocolError, match="more than 100000"):
        NativeConnection("client").send(native.TxnEndRequest(1, 0, True, [("t", 0)] * 100_001))


@pytest.mark.parametrize("bad", MANIFEST["bad_frames"], ids=frame_ids(MANIFEST["bad_frames"]))
def test_bad_frame_is_consumed_and_connection_stays_usable(bad):
    conn = NativeConnection(bad["parser"])
    follow_up = PING if bad["parser"] == "server" else PONG
    conn.receive_data(bytes.fromhex(bad["hex"]) + follow_up)
    with pytest.raises(RemoteProtocolError) as info:
        conn.next_event()
    assert info.value.fatal is False
    if bad["exact"]:
        assert info.value.message == bad["message"]
    else:
        assert info.value.message.startswith(bad["message"])
    assert conn.next_event() == (PingRequest() if bad["parser"] == "server" else PongResponse())
    assert conn.next_event() is NEED_DATA


def test_invalid_json_then_valid_frame_byte_by_byte():
    conn = NativeConnection("server")
    data = frame_of("{oops") + bytes.fromhex(FRAMES["ex1_produce_b"]["hex"])
    results = []
    for i in range(len(data)):
        conn.receive_data(data[i:i + 1])
        try:
            event = conn.next_event()
        except RemoteProtocolError as exc:
            results.append(("error", exc.message.split(":")[0], exc.fatal))
        else:
            if event is not NEED_DATA:
                results.append(event)
    assert results == [("error", "failed to parse request", False), build(FRAMES["ex1_produce_b"]["expected"])]


def test_oversized_length_refused_immediately_without_allocation():
    conn = NativeConnection("server")
    tracemalloc.start()
    try:
        conn.receive_data(b"\xff\xff\xff\xff")  # declares 4 GiB - 1; no body follows
        with pytest.raises(RemoteProtocolError) as info:
            conn.next_event()
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert info.value.message == "max frame size exceeded"
    assert info.value.fatal is True
    assert peak < 1024 * 1024
    # the connection stays broken: later calls raise again, even when valid frames arrive
    conn.receive_data(PING)
    for _ in range(2):
        with pytest.raises(RemoteProtocolError, match="^max frame size exceeded$") as again:
            conn.next_event()
        assert again.value.fatal is True


def test_length_limit_is_inclusive_and_configurable():
    conn = NativeConnection("server", max_frame=len(PING) - 4)
    conn.receive_data(PING)
    assert conn.next_event() == PingRequest()  # exactly max_frame bytes: accepted
    conn = NativeConnection("server", max_frame=len(PING) - 5)
    conn.receive_data(PING[:4])  # refused on the header alone
    with pytest.raises(RemoteProtocolError, match="max frame size exceeded"):
        conn.next_event()
    conn = NativeConnection("server")
    conn.receive_data(struct.pack(">I", MAX_FRAME_BYTES + 1))
    with pytest.raises(RemoteProtocolError, match="max frame size exceeded"):
        conn.next_event()
    conn = NativeConnection("server")
    conn.receive_data(struct.pack(">I", MAX_FRAME_BYTES))
    assert conn.next_event() is NEED_DATA  # legal length: waits for the body
    assert MAX_FRAME_BYTES == 10_485_760


@pytest.mark.parametrize("cut", [1, 3, 4, 10, len(PING) - 1])
def test_truncated_frame_at_eof(cut):
    conn = NativeConnection("server")
    conn.receive_data(PING + PING[:cut])
    conn.receive_data(b"")
    assert conn.next_event() == PingRequest()  # complete frames before EOF still parse
    with pytest.raises(RemoteProtocolError) as info:
        conn.next_event()
    assert info.value.fatal is True
    assert info.value.message.startswith("truncated frame")
    with pytest.raises(RemoteProtocolError, match="^truncated frame"):
        conn.next_event()


def test_data_after_eof_is_a_local_error():
    conn = NativeConnection("server")
    conn.receive_data(b"")
    with pytest.raises(LocalProtocolError):
        conn.receive_data(PING)


@pytest.mark.parametrize("event", RESPONSES, ids=repr)
def test_client_cannot_send_responses(event):
    with pytest.raises(LocalProtocolError, match="a client cannot send"):
        NativeConnection("client").send(event)


@pytest.mark.parametrize("event", REQUESTS, ids=repr)
def test_server_cannot_send_requests(event):
    with pytest.raises(LocalProtocolError, match="a server cannot send"):
        NativeConnection("server").send(event)


@pytest.mark.parametrize("role, event", [
    ("client", "not an event"),
    ("client", Record(b"x")),
    ("client", ProduceRequest("t", 0, [Record("text")])),  # str is not bytes
    ("client", ProduceRequest("t", -1, [])),
    ("client", FetchRequest("t", 0, True, 10)),
    ("client", native.CreateTopicRequest("t", 0)),
    ("server", FetchResponse([Record(b"x")], 1)),  # offset never assigned
    ("server", ProduceResponse([2**63])),
    ("server", ErrorResponse(None)),
    ("server", native.OffsetCommitResponse(1)),
])
def test_unencodable_events_are_local_errors(role, event):
    with pytest.raises(LocalProtocolError):
        NativeConnection(role).send(event)


def test_send_refuses_frames_over_max_frame():
    conn = NativeConnection("server", max_frame=64)
    conn.send(ErrorResponse("x" * 20))
    with pytest.raises(LocalProtocolError, match="exceeds 64"):
        conn.send(ErrorResponse("x" * 64))


@pytest.mark.parametrize("kwargs", [{"role": "broker"}, {"role": "server", "max_frame": 0},
                                    {"role": "server", "max_frame": 2**32}])
def test_constructor_validates_arguments(kwargs):
    with pytest.raises(ValueError):
        NativeConnection(**kwargs)


def test_encoded_records_are_sent_as_the_records_themselves_would_be():
    records = [Record(b"abc", b"k", 5, (), 10), Record(None, None, None, (), 11),
               Record(b"\x00\xff" * 3, None, 7, (("dropped", b"header"),), 12), Record(b"", b"", 0, (), 13)]
    server = NativeConnection("server")
    encoded = native.encode_fetched(records)
    assert server.send(FetchResponse(encoded, 14)) == server.send(FetchResponse(records, 14))
    assert server.send(FetchResponse(native.encode_fetched([]), 3)) == server.send(FetchResponse([], 3))
    client = NativeConnection("client")
    client.receive_data(server.send(FetchResponse(encoded.head(2), 12)))
    got = client.next_event()
    assert [(r.offset, r.value, r.key) for r in got.records] == [(10, b"abc", b"k"), (11, None, None)]
    # What a native fetch keeps of them under max_bytes: values up to it, at least one record.
    assert (encoded.offsets, encoded.sizes, encoded.value_bytes) == ((10, 11, 12, 13), (3, 0, 6, 0), 9)
    assert [encoded.fitting(n) for n in (0, 2, 3, 8, 9, 100)] == [1, 1, 2, 2, 4, 4]
    assert encoded.head(9) is encoded and len(encoded.head(1)) == 1


def test_a_record_the_native_answer_cannot_carry_is_refused_when_encoded():
    with pytest.raises(RecordFormatError, match="timestamp"):
        native.encode_fetched([Record(b"x", None, -1, (), 0)])


def test_encoded_records_keep_about_their_text_in_memory():
    """orjson's results keep the capacity they were allocated with (KiBs for a record of a hundred bytes): kept
    per record, a cache of encoded answers weighed ~40x its text."""
    records = [Record(bytes(range(100)), None, 1_700_000_000_000, (), i) for i in range(200)]
    tracemalloc.start()
    try:
        before = tracemalloc.get_traced_memory()[0]
        encoded = native.encode_fetched(records)
        kept = tracemalloc.get_traced_memory()[0] - before
    finally:
        tracemalloc.stop()
    assert len(encoded.text) > 200 * 300
    assert kept < 2 * len(encoded.text) + 200 * 3 * 40, (kept, len(encoded.text))


def test_relayed_answers_go_out_as_they_are_and_payloads_come_in_unparsed():
    """A worker relays another worker's answer: the client side hands over the frame's payload unparsed
    (`next_payload`), the server side sends it as it is (`RelayedResponse`), errors counted as errors."""
    owner, relay_in = NativeConnection("server"), NativeConnection("client")
    frame = owner.send(FetchResponse([Record(b"v", offset=4)], 5))
    relay_in.receive_data(frame[:7])
    assert relay_in.next_payload() is NEED_DATA
    relay_in.receive_data(frame[7:] + owner.send(ErrorResponse("offset out of range: x")))
    payload = relay_in.next_payload()
    assert payload == frame[4:] and type(payload) is bytes
    error = RelayedResponse.of(relay_in.next_payload())
    assert error.error_code == 1 and RelayedResponse.of(payload).error_code == 0
    relay_out, client = NativeConnection("server"), NativeConnection("client")
    client.receive_data(relay_out.send(RelayedResponse.of(payload)) + relay_out.send(error))
    assert client.next_event() == FetchResponse([Record(b"v", offset=4)], 5)
    assert client.next_event() == ErrorResponse("offset out of range: x")
    with pytest.raises(LocalProtocolError, match="not a native protocol event"):  # a client relays nothing
        client.send(error)
    with pytest.raises(LocalProtocolError, match="exceeds 16"):
        NativeConnection("server", max_frame=16).send(RelayedResponse(b"x" * 17))
    big = NativeConnection("client", max_frame=16)
    big.receive_data(struct.pack(">I", 17))
    with pytest.raises(RemoteProtocolError, match="max frame size exceeded"):
        big.next_payload()
    short = NativeConnection("client")
    short.receive_data(frame[:9])
    short.receive_data(b"")
    with pytest.raises(RemoteProtocolError, match="truncated"):
        short.next_payload()
    ended = NativeConnection("client")
    ended.receive_data(b"")
    assert ended.next_payload() is CLOSED
