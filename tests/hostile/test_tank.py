"""Hostile input to the TANK protocol over a real socket (the shared gateway: see `conftest.py`).

Every TANK request type the broker accepts answered (the control; Consume with and without the flags byte), then
truncated (`eof` and `short`, see `wire.truncate`); frame lengths over 256 MiB; u8 counts of 255, huge,
overlong and unterminated varints, str8 lengths past the payload; Produce bundles whose header lies (into a
tank-format and a kafka-format topic); hostile topic names (invalid UTF-8 among them: TANK names are bytes)
through every request that names a topic.

TANK closes a connection on a truncated or malformed payload, answering nothing — except a truncation that is
still a complete request (an optional tail cut off), which is answered like one. A bundle is a record format,
not framing: a lying one gets an error for its partition on a connection that stays.
"""

from __future__ import annotations

import socket
import struct

import pytest

from logway.codecs import tank as tk
from logway.codecs.errors import RemoteProtocolError
from logway.codecs.stream import CLOSED, NEED_DATA
from logway.codecs.tank.varint import encode_varint

from .wire import (HOSTILE_NAMES, INVALID_UTF8, KT, TANK_ANSWERS, TANK_REQUESTS, TT, assert_nothing_escaped,
                   assert_tank_alive, connect, log_state, read_to_eof, send_and_close, tank_bundle, tank_client,
                   tank_frame, tank_responses, tank_responses_for, truncate, truncation_params)

pytestmark = pytest.mark.usefixtures("gw")

TANK_FRAMES = {name: tank_frame(req) for name, req in TANK_REQUESTS.items()}


def tank_parses(frame: bytes) -> bool:
    """Whether the broker's codec reads `frame` as a complete request (TANK ignores bytes after the layout and
    some payloads have optional tails, so a truncation can still be a valid request)."""
    server = tk.TankServerConnection()
    server.receive_data(frame)
    try:
        return server.next_event() not in (NEED_DATA, CLOSED)
    except RemoteProtocolError:
        return False


# ============================================================================================ control

@pytest.mark.parametrize("name", TANK_REQUESTS)
def test_tank_control_valid_request_is_answered(name):
    s = connect("tank")
    try:
        client = tk.TankClientConnection()
        s.sendall(client.send(TANK_REQUESTS[name]) + client.send(tk.StatusRequest(99)))
        s.shutdown(socket.SHUT_WR)
        answers = tank_responses(read_to_eof(s), client)
    finally:
        s.close()
    expected = TANK_ANSWERS[name]
    if expected is None:  # a client's Ping is ignored: only the Status answer comes back
        assert [type(a) for a in answers] == [tk.StatusResponse]
    else:
        assert [type(a) for a in answers] == [expected, tk.StatusResponse]
        assert answers[0].request_id == 7


# ============================================================================================ truncation

@pytest.mark.parametrize("name, mode, cut", truncation_params(TANK_FRAMES, 5))
def test_tank_truncated_request(name, mode, cut):
    before = log_state()
    frame = TANK_FRAMES[name]
    data = truncate(frame, mode, cut, 5, lambda head, n: struct.pack("<BI", head[0], n))
    if mode == "short" and tank_parses(data):
        # Still a whole request (an optional tail was cut off): answered like one, the connection stays open.
        assert name in ("DiscoverPartitions", "DiscoverTopics", "DiscoverTopology"), "unexpected valid prefix"
        s = connect("tank")
        try:
            s.sendall(data + tank_frame(tk.StatusRequest(99)))
            s.shutdown(socket.SHUT_WR)
            answers = tank_responses(read_to_eof(s))
        finally:
            s.close()
        assert [type(a) for a in answers] == [TANK_ANSWERS[name], tk.StatusResponse]
    else:
        # TANK closes a connection on a truncated or malformed payload; nothing is answered.
        assert send_and_close("tank", data, half_close=mode == "eof") == b""
    assert log_state() == before  # nothing of a truncated request was applied
    assert_tank_alive()


# ============================================================================================ absurd sizes

# -- frame lengths over the limit (refused from the header alone) ----------------------------------------------

@pytest.mark.parametrize("name", TANK_FRAMES)
def test_tank_frame_length_over_256mib(name):
    frame = TANK_FRAMES[name]
    assert send_and_close("tank", struct.pack("<BI", frame[0], 0xFFFFFFFF) + frame[5:], half_close=False) == b""
    assert_tank_alive()


# -- u8 counts of 255, huge and overlong varints, str8 lengths past the payload -------------------------------

def _str8(name: bytes) -> bytes:
    return bytes((len(name),)) + name


def tank_produce_payload(*, with_seqnum=False, topics_cnt=None, client_id=b"c++", name_len=None, parts_cnt=None,
                         bundle_len=None, bundle=None, topic=TT) -> bytes:
    bundle = tank_bundle() if bundle is None else bundle
    name = topic.encode()
    out = struct.pack("<HI", 2, 7) + _str8(client_id) + struct.pack("<BI", 0, 0)
    out += bytes((1 if topics_cnt is None else topics_cnt,))
    out += bytes((len(name) if name_len is None else name_len,)) + name
    out += bytes((1 if parts_cnt is None else parts_cnt,))
    out += struct.pack("<H", 0) + (encode_varint(len(bundle)) if bundle_len is None else bundle_len)
    if with_seqnum:
        out += struct.pack("<Q", 10**6)
    return out + bundle


def tank_consume_payload(*, topics_cnt=None, parts_cnt=None, name_len=None) -> bytes:
    name = TT.encode()
    out = struct.pack("<HI", 2, 7) + _str8(b"") + struct.pack("<QI", 0, 0)
    out += bytes((1 if topics_cnt is None else topics_cnt,))
    out += bytes((len(name) if name_len is None else name_len,)) + name
    out += bytes((1 if parts_cnt is None else parts_cnt,))
    return out + struct.pack("<HQI", 0, 1, 4096)


def _tank(msg_type: int, payload: bytes) -> bytes:
    return struct.pack("<BI", msg_type, len(payload)) + payload


_HUGE_VARINT = b"\xff\xff\xff\xff\x0f"  # 2**32 - 1, the largest varuint32
_OVERLONG_VARINT = b"\xff\xff\xff\xff\xff\x01"  # six bytes: more than a varuint32 can have

TANK_MALFORMED = {
    "Produce-topics_cnt-255": _tank(0x01, tank_produce_payload(topics_cnt=255)),
    "Produce-partitions_cnt-255": _tank(0x01, tank_produce_payload(parts_cnt=255)),
    "Produce-client_id-len-past-end": _tank(0x01, struct.pack("<HI", 2, 7) + b"\xff" + b"c++"),
    "Produce-topic-name-len-255": _tank(0x01, tank_produce_payload(name_len=255)),
    "Produce-bundle_len-u32-max": _tank(0x01, tank_produce_payload(bundle_len=_HUGE_VARINT)),
    "Produce-bundle_len-overlong-varint": _tank(0x01, tank_produce_payload(bundle_len=_OVERLONG_VARINT)),
    "Produce-bundle_len-unterminated-varint": _tank(0x01, tank_produce_payload(bundle_len=b"\xff\xff", bundle=b"")),
    "ProduceWithSeqnum-partitions_cnt-255": _tank(0x05, tank_produce_payload(with_seqnum=True, parts_cnt=255)),
    "ProduceWithSeqnum-bundle_len-u32-max": _tank(0x05, tank_produce_payload(with_seqnum=True,
                                                                             bundle_len=_HUGE_VARINT)),
    "ProduceWithSeqnum-no-base_seqnum": _tank(0x05, tank_produce_payload(bundle=b"")),
    "Consume-topics_cnt-255": _tank(0x02, tank_consume_payload(topics_cnt=255)),
    "Consume-partitions_cnt-255": _tank(0x02, tank_consume_payload(parts_cnt=255)),
    "Consume-topic-name-len-255": _tank(0x02, tank_consume_payload(name_len=255)),
    "DiscoverPartitions-odd-partition-list": _tank(0x06, struct.pack("<I", 7) + _str8(TT.encode()) + b"\x00\x00\x01"),
    "DiscoverPartitions-topic-len-255": _tank(0x06, struct.pack("<I", 7) + b"\xff" + TT.encode()),
    "CreateTopic-config_len-u32-max": _tank(0x07, struct.pack("<I", 7) + _str8(b"hx") + struct.pack("<H", 1)
                                             + _HUGE_VARINT + b"a=b"),
    "CreateTopic-config_len-overlong-varint": _tank(0x07, struct.pack("<I", 7) + _str8(b"hx")
                                                     + struct.pack("<H", 1) + _OVERLONG_VARINT),
    "ReloadConf-topic-len-255": _tank(0x08, struct.pack("<I", 7) + b"\xff" + TT.encode() + b"\x00\x00"),
}


@pytest.mark.parametrize("name", TANK_MALFORMED)
def test_tank_absurd_count_or_length(name):
    before = log_state()
    assert not tank_parses(TANK_MALFORMED[name])  # the case is what it says: malformed for the broker's codec
    assert send_and_close("tank", TANK_MALFORMED[name], half_close=False) == b""
    assert log_state() == before
    assert_tank_alive()


# -- bundles whose header lies ---------------------------------------------------------------------------------
# Bundles are a record format, not framing: a well-framed Produce whose bundle header lies is answered with an
# error for its partition (TANK keeps the connection), and nothing is appended.

TANK_BAD_BUNDLES = {
    "empty-bundle": b"",
    "message-count-u32-max": b"\x00" + _HUGE_VARINT + b"\x00\x01x",
    "message-count-overlong-varint": b"\x00" + _OVERLONG_VARINT,
    "codec-3": b"\x07",
    "snappy-set-of-4GiB": b"\x05" + b"\xff\xff\xff\xff\x0fgarbage",
}


@pytest.mark.parametrize("topic", [TT, KT], ids=["tank-format", "kafka-format"])
@pytest.mark.parametrize("bundle", TANK_BAD_BUNDLES)
def test_tank_produce_of_a_lying_bundle_is_refused(bundle, topic):
    with tank_client() as t:
        before = t.discover_partitions(topic, [0])
        results = tank_responses_for(tk.ProduceRequest(7, [tk.ProduceEntry(topic, 0, TANK_BAD_BUNDLES[bundle])]))
        assert len(results) == 1 and isinstance(results[0], tk.ProduceResponse), results
        assert [r.error for r in results[0].results] == [tk.ProduceError.SYSTEM_ERROR], results
        assert t.discover_partitions(topic, [0]) == before
    assert_tank_alive()


# ============================================================================================ hostile names

def _tank_name_requests(name: str) -> dict[str, object]:
    return {
        "CreateTopic": tk.CreateTopicRequest(7, name, 1),
        "Produce": tk.ProduceRequest(7, [tk.ProduceEntry(name, 0, tank_bundle())]),
        "ProduceWithSeqnum": tk.ProduceRequest(7, [tk.ProduceEntry(name, 0, tank_bundle(), base_seqnum=5)],
                                               with_seqnum=True),
        "Consume": tk.ConsumeRequest(7, 0, 0, [tk.ConsumeTopic(name, [tk.ConsumePartition(0, 1, 4096)])]),
        "Consume-long-poll": tk.ConsumeRequest(7, 60_000, 1, [tk.ConsumeTopic(name, [tk.ConsumePartition(0, 0, 1)])]),
        "DiscoverPartitions": tk.DiscoverPartitionsRequest(7, name),
        "ReloadConf": tk.ReloadConfRequest(7, name, 0),
    }


def _tank_name_answer_ok(path: str, answer) -> bool:
    """The answer TANK gives for a topic that cannot exist."""
    if path == "CreateTopic":
        return answer.error == tk.CreateTopicError.INVALID_REQUEST
    if path.startswith("Produce"):
        return [r.error for r in answer.results] == [tk.ProduceError.UNKNOWN_TOPIC]
    if path.startswith("Consume"):
        return [(t.unknown, t.requested_count) for t in answer.topics] == [(True, 1)]
    if path == "DiscoverPartitions":
        return answer.partitions == []
    return answer.error == tk.ReloadConfError.UNKNOWN_TOPIC


_TANK_NAMES = {label: name for label, name in HOSTILE_NAMES.items() if len(name.encode()) <= 255}
_TANK_NAMES["invalid-utf8"] = INVALID_UTF8.decode("utf-8", "surrogateescape")  # sent as these very bytes
_TANK_NAMES["len-255"] = "t" * 255
_TANK_NAMES["tank-rule-dash-first"] = "-hescape"


@pytest.mark.parametrize("path", list(_tank_name_requests("x")))
@pytest.mark.parametrize("label", _TANK_NAMES)
def test_tank_hostile_topic_name(label, path):
    name = _TANK_NAMES[label]
    answers = tank_responses_for(_tank_name_requests(name)[path])
    assert len(answers) == 1, answers
    assert _tank_name_answer_ok(path, answers[0]), answers[0]
    if hasattr(answers[0], "topic"):
        assert answers[0].topic == name  # echoed byte for byte
    assert_nothing_escaped()
    assert_tank_alive()
