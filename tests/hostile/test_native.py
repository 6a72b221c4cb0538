"""Hostile input to the native JSON protocol over a real socket (the shared gateway: see `conftest.py`).

Every native request kind answered (the control), then truncated (`eof` and `short`, see `wire.truncate`); frame
lengths over the 10 MiB limit; hostile JSON in well-framed requests (nested 100k deep, numbers out of range,
wrong types, duplicate keys, lone surrogates, a BOM); hostile topic names through every request that names a
topic, names that are no Unicode at all, hostile group ids and commit metadata over the limit.

Native answers every bad frame with an `Error`, and closes the connection only when the stream cannot be reframed
(EOF inside a frame, a frame over the limit); any other connection keeps going.
"""

from __future__ import annotations

import socket
import struct

import pytest

from logway.codecs import native as nv
from logway.codecs.records import Record
from logway.codecs.stream import CLOSED

from .wire import (GROUP, HOSTILE_NAMES, INVALID_UTF8, KT, NATIVE_ANSWERS, NATIVE_REQUESTS, NativeSock,
                   assert_native_alive, assert_nothing_escaped, log_state, native_frame, truncate,
                   truncation_params)

pytestmark = pytest.mark.usefixtures("gw")

NATIVE_FRAMES = {name: native_frame(req) for name, req in NATIVE_REQUESTS.items()}


# ============================================================================================ control

@pytest.mark.parametrize("name", NATIVE_REQUESTS)
def test_native_control_valid_request_is_answered(name):
    with NativeSock() as n:
        answer = n.request(NATIVE_REQUESTS[name])
        assert isinstance(answer, NATIVE_ANSWERS[name]), answer


# ============================================================================================ truncation

@pytest.mark.parametrize("name, mode, cut", truncation_params(NATIVE_FRAMES, 4))
def test_native_truncated_request(name, mode, cut):
    before = log_state()
    data = truncate(NATIVE_FRAMES[name], mode, cut, 4, lambda head, n: struct.pack(">I", n))
    with NativeSock() as n:
        n.send_raw(data)
        if mode == "eof":
            # EOF inside the frame: the error answer, then the gateway closes (the stream cannot be reframed).
            n.sock.shutdown(socket.SHUT_WR)
            answer = n.receive()
            assert isinstance(answer, nv.ErrorResponse) and answer.message.startswith("truncated frame"), answer
            assert n.receive() is CLOSED
        else:
            # A complete frame holding a short JSON text: answered, and the connection stays usable.
            answer = n.receive()
            assert isinstance(answer, nv.ErrorResponse), answer
            assert answer.message.startswith("failed to parse request"), answer
            assert n.request(nv.PingRequest()) == nv.PongResponse()
    assert log_state() == before  # nothing of a truncated request was applied
    assert_native_alive()


# ============================================================================================ absurd sizes

# -- frame lengths over the limit (refused from the header alone: no body is ever sent) -------------------------

@pytest.mark.parametrize("length", [10 * 1024 * 1024 + 1, 0xFFFFFFFF], ids=["10MiB+1", "u32-max"])
def test_native_frame_length_over_the_limit(length):
    with NativeSock() as n:
        n.send_raw(struct.pack(">I", length))  # refused from the header: the body is never waited for
        assert n.receive() == nv.ErrorResponse("max frame size exceeded")
        assert n.receive() is CLOSED
    assert_native_alive()


# -- the JSON itself is the hostile part -----------------------------------------------------------------------

def _nframe(text: bytes) -> bytes:
    return struct.pack(">I", len(text)) + text


NATIVE_HOSTILE_JSON = {
    "nesting-100k-deep": b"[" * 100_000 + b"]" * 100_000,
    "nesting-in-a-request": b'{"Produce": {"topic": "hk", "partition": 0, "records": ' + b"[" * 5000 + b"]" * 5000
                            + b"}}",
    "partition-2**64": b'{"Fetch": {"topic": "hk", "partition": 18446744073709551616, "offset": 0, "max_bytes": 1}}',
    "partition-negative": b'{"Fetch": {"topic": "hk", "partition": -1, "offset": 0, "max_bytes": 1}}',
    "offset-1e400": b'{"Fetch": {"topic": "hk", "partition": 0, "offset": 1e400, "max_bytes": 1}}',
    "offset-float": b'{"OffsetCommit": {"topic": "hk", "partition": 0, "group_id": "g", "offset": 1.5}}',
    "partitions-2**40": b'{"CreateTopic": {"topic": "hbig", "partitions": 1099511627776}}',
    "byte-256": b'{"Produce": {"topic": "hk", "partition": 0, "records": [[1, 256]]}}',
    "byte-true": b'{"Produce": {"topic": "hk", "partition": 0, "records": [[true]]}}',
    "records-not-array": b'{"Produce": {"topic": "hk", "partition": 0, "records": {"0": [1]}}}',
    "two-request-types": b'{"Ping": {}, "ListTopics": {}}',
    "body-not-object": b'{"Ping": []}',
    "duplicate-keys": b'{"Fetch": {"topic": "hk", "topic": 5, "partition": 0, "offset": 0, "max_bytes": 1}}',
    "lone-surrogate": b'{"DescribeTopic": {"topic": "\\ud800"}}',
    "nul-byte-in-text": b'{"Ping": {}}\x00',
    "utf8-bom": b'\xef\xbb\xbf{"Ping": {}}',
    "max_wait-2**31": b'{"Fetch": {"topic": "hk", "partition": 0, "offset": 0, "max_bytes": 1, '
                      b'"max_wait_ms": 2147483648}}',
}


@pytest.mark.parametrize("name", NATIVE_HOSTILE_JSON)
def test_native_hostile_json_is_answered_and_the_connection_stays_usable(name):
    with NativeSock() as n:
        n.send_raw(_nframe(NATIVE_HOSTILE_JSON[name]))
        answer = n.receive()
        assert isinstance(answer, nv.ErrorResponse), answer
        assert answer.message.startswith(("failed to parse request", "unknown request type", "invalid request")), \
            answer
        assert n.request(nv.PingRequest()) == nv.PongResponse()
    assert_native_alive()


# ============================================================================================ hostile names

def _native_topic_paths(name: str) -> dict[str, tuple[object, str]]:
    """Every native request that names a topic -> (request, what the error message starts with)."""
    return {
        "CreateTopic": (nv.CreateTopicRequest(name, 1), "invalid topic name"),
        "Produce": (nv.ProduceRequest(name, 0, [Record(b"x")]), "partition not found"),
        "Fetch": (nv.FetchRequest(name, 0, 0, 1024), "partition not found"),
        "OffsetCommit": (nv.OffsetCommitRequest(name, 0, GROUP, 1), "partition not found"),
        "OffsetFetch": (nv.OffsetFetchRequest(name, 0, GROUP), "partition not found"),
        "DescribeTopic": (nv.DescribeTopicRequest(name), "topic not found"),
        "DeleteTopic": (nv.DeleteTopicRequest(name), "topic not found"),
    }


@pytest.mark.parametrize("path", list(_native_topic_paths("x")))
@pytest.mark.parametrize("label", HOSTILE_NAMES)
def test_native_hostile_topic_name(label, path):
    request, expected = _native_topic_paths(HOSTILE_NAMES[label])[path]
    with NativeSock() as n:
        answer = n.request(request)
        assert isinstance(answer, nv.ErrorResponse) and answer.message.startswith(expected), answer
        assert n.request(nv.PingRequest()) == nv.PongResponse()
    assert_nothing_escaped()
    assert_native_alive()


@pytest.mark.parametrize("path", list(_native_topic_paths("x")))
@pytest.mark.parametrize("raw", [INVALID_UTF8, b"\\ud800", b"\\udfff\\ud800"],
                         ids=["invalid-utf8", "lone-high-surrogate", "reversed-surrogates"])
def test_native_topic_name_that_is_no_unicode(raw, path):
    """JSON text must be UTF-8 and escapes must make characters: either is a parse error, the connection stays."""
    placeholder = "QQQQQQQQ"
    text = native_frame(_native_topic_paths(placeholder)[path][0])[4:]
    assert text.count(placeholder.encode()) == 1
    with NativeSock() as n:
        n.send_raw(_nframe(text.replace(placeholder.encode(), raw)))
        answer = n.receive()
        assert isinstance(answer, nv.ErrorResponse) and answer.message.startswith("failed to parse request"), \
            answer
        assert n.request(nv.PingRequest()) == nv.PongResponse()
    assert_nothing_escaped()
    assert_native_alive()


def _native_group_params():
    params = []
    for label, group in {**HOSTILE_NAMES, "overlong-32768": "g" * 32768}.items():
        bad = group == "" or len(group.encode()) > 32767  # what the offset store refuses
        params.append(pytest.param(group, bad, id=label))
    return params


@pytest.mark.parametrize("group, refused", _native_group_params())
def test_native_hostile_group_id(group, refused):
    """A group id is never a path (the offset store is one log file): any non-empty id round-trips; what the
    store cannot hold is refused with an Error. Either way the connection stays usable."""
    with NativeSock() as n:
        answer = n.request(nv.OffsetCommitRequest(KT, 1, group, 5, metadata="m"))
        if refused:
            assert isinstance(answer, nv.ErrorResponse) and answer.message.startswith("invalid request"), answer
        else:
            assert answer == nv.OffsetCommitResponse(True), answer
            assert n.request(nv.OffsetFetchRequest(KT, 1, group)) == nv.OffsetFetchResponse(5)
            fetched = n.request(nv.FetchRequest(KT, 1, 0, 1 << 20, group_id=group))
            assert isinstance(fetched, nv.FetchResponse), fetched
        assert n.request(nv.PingRequest()) == nv.PongResponse()
    assert_nothing_escaped()
    assert_native_alive()


def test_native_commit_metadata_over_the_limit_is_an_error():
    with NativeSock() as n:
        answer = n.request(nv.OffsetCommitRequest(KT, 0, GROUP, 1, metadata="m" * 4097))
        assert isinstance(answer, nv.ErrorResponse), answer
        assert n.request(nv.PingRequest()) == nv.PongResponse()
    assert_native_alive()
