"""The native protocol's JSON <-> event mapping: the per-tag decoders and the per-type encoders.

A decoder takes one tag's body (and the frame's raw JSON) and returns an event from `events`; an encoder takes an
event and returns the wire dict, field order following the seed. Both validate with the same helpers, which raise
`_Invalid`; `connection` turns that into RemoteProtocolError (a bad frame) or LocalProtocolError (a bad event).
The tables `_REQUEST_DECODERS`, `_RESPONSE_DECODERS`, `_REQUEST_ENCODERS` and `_RESPONSE_ENCODERS` are what
`connection` picks from by role. The wire schema is described in the package docstring.
"""

from __future__ import annotations

from typing import Any, Callable

from logway.codecs.native.events import (
    AuthRequest,
    AuthResponse,
    CreateTopicRequest,
    CreateTopicResponse,
    DeleteTopicRequest,
    DeleteTopicResponse,
    DescribeTopicRequest,
    DescribeTopicResponse,
    ErrorResponse,
    FetchRequest,
    FetchResponse,
    ListTopicsRequest,
    ListTopicsResponse,
    OffsetCommitRequest,
    OffsetCommitResponse,
    OffsetFetchRequest,
    OffsetFetchResponse,
    PartitionSummary,
    PingRequest,
    PongResponse,
    ProduceRequest,
    ProduceResponse,
    TopicSummary,
)
from logway.codecs.records import Record

# --------------------------------------------------------------------------------------------- bounds

# Kafka offsets are int64, and every protocol shares one offset numbering in storage.
MAX_OFFSET = 2**63 - 1
# Kafka partition ids (and counts) are int32; the native protocol shares the same topics.
MAX_PARTITION = 2**31 - 1
# max_bytes is a usize in the seed; anything up to int64 is accepted and clamped by the gateway.
MAX_FETCH_BYTES = 2**63 - 1
# Long-poll wait and min_bytes are int32 in Kafka's Fetch, which the gateway's long-poll shares.
MAX_WAIT_MS = 2**31 - 1
MAX_MIN_BYTES = 2**31 - 1
# Timestamps are ms since the epoch, int64 as in Kafka records.
MAX_TIMESTAMP = 2**63 - 1

# ------------------------------------------------------------------------------------------ validation


class _Invalid(Exception):
    """Internal: a value failed validation; str(exc) is the detail after "failed to parse ...: "."""


_MISSING = object()
_KINDS = {type(None): "null", bool: "a boolean", int: "an integer", float: "a number", str: "a string",
          list: "an array", dict: "an object"}


def _kind(value: Any) -> str:
    return _KINDS.get(type(value), type(value).__name__)


def _get(body: dict, name: str) -> Any:
    value = body.get(name, _MISSING)
    if value is _MISSING:
        raise _Invalid(f"missing field `{name}`")
    return value


def _int(value: Any, name: str, hi: int) -> int:
    if type(value) is not int:  # bool is a subclass of int and is refused here on purpose
        raise _Invalid(f"`{name}` must be an integer, got {_kind(value)}")
    if value < 0 or value > hi:
        raise _Invalid(f"`{name}` = {value} is out of range 0..{hi}")
    return value


def _opt_int(value: Any, name: str, hi: int) -> int | None:
    return None if value is None else _int(value, name, hi)


def _str(value: Any, name: str) -> str:
    if type(value) is not str:
        raise _Invalid(f"`{name}` must be a string, got {_kind(value)}")
    return value


def _bool(value: Any, name: str) -> bool:
    if type(value) is not bool:
        raise _Invalid(f"`{name}` must be a boolean, got {_kind(value)}")
    return value


def _list(value: Any, name: str) -> list:
    if type(value) is not list:
        raise _Invalid(f"`{name}` must be an array, got {_kind(value)}")
    return value


def _obj(value: Any, name: str) -> dict:
    if type(value) is not dict:
        raise _Invalid(f"`{name}` must be an object, got {_kind(value)}")
    return value


def _bytes(value: Any, name: str, maybe_bools: bool) -> bytes:
    """A JSON array of ints 0..255 -> bytes, converted by `bytes(list)` at C speed.

    `bytes()` also takes True/False as 1/0, so arrays are searched for booleans only when the frame's text
    holds a `true`/`false` token (`maybe_bools`): the common path has no per-byte Python work.
    """
    if type(value) is not list:
        raise _Invalid(f"`{name}` must be an array of bytes, got {_kind(value)}")
    try:
        data = bytes(value)
    except (ValueError, TypeError):
        raise _Invalid(_byte_error(value, name)) from None
    if maybe_bools and bool in set(map(type, value)):
        raise _Invalid(_byte_error(value, name))
    return data


def _byte_error(value: list, name: str) -> str:
    """Explain why `value` is not a byte array (slow path, only after a failure)."""
    for i, item in enumerate(value):
        if type(item) is not int or not 0 <= item <= 255:
            return f"`{name}[{i}]` must be a byte 0..255, got {item!r}"
    return f"`{name}` must be an array of bytes 0..255"


def _may_hold_bools(payload: bytearray) -> bool:
    """Whether a frame's JSON text could contain a boolean (a false positive only costs a slower check)."""
    return b"true" in payload or b"false" in payload


def _opt_bytes(value: Any, name: str, maybe_bools: bool) -> bytes | None:
    return None if value is None else _bytes(value, name, maybe_bools)


# ------------------------------------------------------------------------------------ decoding requests

# A decoder gets the tag's body and the frame's raw JSON (to decide whether byte arrays need a bool check).
Decoder = Callable[[dict, bytearray], Any]


def _each(items: list, name: str, convert: Callable[[Any], Any]) -> list:
    """Convert every element; the failing index is named only on failure (no f-string per element)."""
    try:
        return [convert(item) for item in items]
    except _Invalid:
        for i, item in enumerate(items):
            try:
                convert(item)
            except _Invalid as exc:
                raise _Invalid(f"{name}[{i}]: {exc}") from None
        raise


def _produce_record(item: Any, mb: bool) -> Record:
    """The object form of a produced record (our extension); the seed's bare arrays never come here."""
    if type(item) is not dict:
        raise _Invalid(f"a record must be a byte array or an object, got {_kind(item)}")
    payload = item.get("payload", _MISSING)
    if payload is _MISSING:
        payload = item.get("value", _MISSING)
        if payload is _MISSING:
            raise _Invalid("missing field `payload`")
    elif "value" in item:
        raise _Invalid("both `payload` and its alias `value` are present")
    return Record(
        _bytes(payload, "payload", mb),
        key=_opt_bytes(item.get("key"), "key", mb),
        timestamp=_opt_int(item.get("timestamp"), "timestamp", MAX_TIMESTAMP),
    )


def _produce_request(body: dict, payload: bytearray) -> ProduceRequest:
    topic = _str(_get(body, "topic"), "topic")
    partition = _int(_get(body, "partition"), "partition", MAX_PARTITION)
    raw = _list(_get(body, "records"), "records")
    mb = bool(raw) and _may_hold_bools(payload)
    records: list[Record] = []
    append = records.append
    for i, item in enumerate(raw):  # the hot loop: 1000 records of 100 bytes must stay well under 5 ms
        if type(item) is list:
            try:
                append(Record(bytes(item)))
            except (ValueError, TypeError):
                raise _Invalid(_byte_error(item, f"records[{i}]")) from None
            if mb and bool in set(map(type, item)):
                raise _Invalid(_byte_error(item, f"records[{i}]"))
        else:
            try:
                append(_produce_record(item, mb))
            except _Invalid as exc:
                raise _Invalid(f"records[{i}]: {exc}") from None
    return ProduceRequest(topic, partition, records)


def _fetch_request(body: dict, _raw: bytearray) -> FetchRequest:
    group_id = body.get("group_id")
    return FetchRequest(
        topic=_str(_get(body, "topic"), "topic"),
        partition=_int(_get(body, "partition"), "partition", MAX_PARTITION),
        offset=_int(_get(body, "offset"), "offset", MAX_OFFSET),
        max_bytes=_int(_get(body, "max_bytes"), "max_bytes", MAX_FETCH_BYTES),
        group_id=None if group_id is None else _str(group_id, "group_id"),
        max_wait_ms=_opt_int(body.get("max_wait_ms"), "max_wait_ms", MAX_WAIT_MS) or 0,
        min_bytes=_opt_int(body.get("min_bytes"), "min_bytes", MAX_MIN_BYTES) or 0,
    )


def _offset_commit_request(body: dict, _raw: bytearray) -> OffsetCommitRequest:
    metadata = body.get("metadata")
    return OffsetCommitRequest(
        topic=_str(_get(body, "topic"), "topic"),
        partition=_int(_get(body, "partition"), "partition", MAX_PARTITION),
        group_id=_str(_get(body, "group_id"), "group_id"),
        offset=_int(_get(body, "offset"), "offset", MAX_OFFSET),
        metadata="" if metadata is None else _str(metadata, "metadata"),
    )


def _offset_fetch_request(body: dict, _raw: bytearray) -> OffsetFetchRequest:
    return OffsetFetchRequest(
        topic=_str(_get(body, "topic"), "topic"),
        partition=_int(_get(body, "partition"), "partition", MAX_PARTITION),
        group_id=_str(_get(body, "group_id"), "group_id"),
    )


def _create_topic_request(body: dict, _raw: bytearray) -> CreateTopicRequest:
    partitions = _opt_int(body.get("partitions"), "partitions", MAX_PARTITION)
    if partitions == 0:
        raise _Invalid("`partitions` must be at least 1")
    return CreateTopicRequest(_str(_get(body, "topic"), "topic"), 1 if partitions is None else partitions)


def _describe_topic_request(body: dict, _raw: bytearray) -> DescribeTopicRequest:
    return DescribeTopicRequest(_str(_get(body, "topic"), "topic"))


_REQUEST_DECODERS: dict[str, Decoder] = {
    "Produce": _produce_request,
    "Fetch": _fetch_request,
    "OffsetCommit": _offset_commit_request,
    "OffsetFetch": _offset_fetch_request,
    "CreateTopic": _create_topic_request,
    "ListTopics": lambda body, _raw: ListTopicsRequest(),
    "DescribeTopic": _describe_topic_request,
    "DeleteTopic": lambda body, _raw: DeleteTopicRequest(_str(_get(body, "topic"), "topic")),
    "Ping": lambda body, _raw: PingRequest(),
    "Auth": lambda body, _raw: AuthRequest(_str(_get(body, "token"), "token")),
}

# ----------------------------------------------------------------------------------- decoding responses


def _fetched_record(item: Any, mb: bool) -> Record:
    item = _obj(item, "record")
    return Record(
        _opt_bytes(_get(item, "payload"), "payload", mb),
        key=_opt_bytes(item.get("key"), "key", mb),
        timestamp=_opt_int(item.get("timestamp"), "timestamp", MAX_TIMESTAMP),
        offset=_int(_get(item, "offset"), "offset", MAX_OFFSET),
    )


def _produce_response(body: dict, _raw: bytearray) -> ProduceResponse:
    offsets = _list(_get(body, "offsets"), "offsets")
    return ProduceResponse(_each(offsets, "offsets", lambda o: _int(o, "offset", MAX_OFFSET)))


def _fetch_response(body: dict, payload: bytearray) -> FetchResponse:
    raw = _list(_get(body, "records"), "records")
    mb = bool(raw) and _may_hold_bools(payload)
    return FetchResponse(
        records=_each(raw, "records", lambda item: _fetched_record(item, mb)),
        next_offset=_int(_get(body, "next_offset"), "next_offset", MAX_OFFSET),
    )


def _topic_summary(item: Any) -> TopicSummary:
    item = _obj(item, "topic")
    return TopicSummary(_str(_get(item, "name"), "name"), _int(_get(item, "partitions"), "partitions", MAX_PARTITION))


def _partition_summary(item: Any) -> PartitionSummary:
    item = _obj(item, "partition")
    return PartitionSummary(
        _int(_get(item, "partition"), "partition", MAX_PARTITION),
        _int(_get(item, "log_start_offset"), "log_start_offset", MAX_OFFSET),
        _int(_get(item, "log_end_offset"), "log_end_offset", MAX_OFFSET),
    )


def _describe_topic_response(body: dict, _raw: bytearray) -> DescribeTopicResponse:
    raw = _list(_get(body, "partitions"), "partitions")
    return DescribeTopicResponse(_str(_get(body, "topic"), "topic"), _each(raw, "partitions", _partition_summary))


_RESPONSE_DECODERS: dict[str, Decoder] = {
    "Produce": _produce_response,
    "Fetch": _fetch_response,
    "OffsetCommit": lambda body, _raw: OffsetCommitResponse(_bool(_get(body, "success"), "success")),
    "OffsetFetch": lambda body, _raw: OffsetFetchResponse(_opt_int(_get(body, "offset"), "offset", MAX_OFFSET)),
    "CreateTopic": lambda body, _raw: CreateTopicResponse(_bool(_get(body, "created"), "created")),
    "DeleteTopic": lambda body, _raw: DeleteTopicResponse(_bool(_get(body, "deleted"), "deleted")),
    "ListTopics": lambda body, _raw: ListTopicsResponse(
        _each(_list(_get(body, "topics"), "topics"), "topics", _topic_summary)
    ),
    "DescribeTopic": _describe_topic_response,
    "Pong": lambda body, _raw: PongResponse(),
    "Auth": lambda body, _raw: AuthResponse(_bool(_get(body, "authenticated"), "authenticated")),
    "Error": lambda body, _raw: ErrorResponse(_str(_get(body, "message"), "message")),
}

# ------------------------------------------------------------------------------------------- encoding
# Encoders return the wire dict; field order follows the seed so our frames match its examples byte for byte.
# They validate with the same helpers as the decoders (an `_Invalid` becomes a LocalProtocolError in send()).


def _enc_bytes(value: Any, name: str) -> list[int]:
    if not isinstance(value, (bytes, bytearray, memoryview)):
        raise _Invalid(f"`{name}` must be bytes, got {type(value).__name__}")
    return list(value)


def _enc_produce_record(r: Record) -> Any:
    if r.headers:
        raise _Invalid("record headers cannot be carried by the native protocol")
    payload = _enc_bytes(r.value, "value")
    if r.key is None and r.timestamp is None:
        return payload  # the seed's form, understood by every native broker
    item: dict[str, Any] = {"payload": payload}
    if r.key is not None:
        item["key"] = _enc_bytes(r.key, "key")
    if r.timestamp is not None:
        item["timestamp"] = _int(r.timestamp, "timestamp", MAX_TIMESTAMP)
    return item


def _enc_fetched_record(r: Record) -> dict[str, Any]:
    # Headers are not part of the native record and are left out of fetches (reading never loses stored data).
    item: dict[str, Any] = {
        "offset": _int(r.offset, "offset", MAX_OFFSET),
        "payload": None if r.value is None else _enc_bytes(r.value, "value"),
    }
    if r.key is not None:
        item["key"] = _enc_bytes(r.key, "key")
    if r.timestamp is not None:
        item["timestamp"] = _int(r.timestamp, "timestamp", MAX_TIMESTAMP)
    return item


def _enc_produce_request(e: ProduceRequest) -> dict:
    return {"Produce": {
        "topic": _str(e.topic, "topic"),
        "partition": _int(e.partition, "partition", MAX_PARTITION),
        "records": _each(e.records, "records", _enc_produce_record),
    }}


def _enc_fetch_request(e: FetchRequest) -> dict:
    body: dict[str, Any] = {
        "topic": _str(e.topic, "topic"),
        "partition": _int(e.partition, "partition", MAX_PARTITION),
        "offset": _int(e.offset, "offset", MAX_OFFSET),
        "max_bytes": _int(e.max_bytes, "max_bytes", MAX_FETCH_BYTES),
        "group_id": None if e.group_id is None else _str(e.group_id, "group_id"),
    }
    if e.max_wait_ms:  # extensions are sent only when used, so seed brokers see the seed's frame
        body["max_wait_ms"] = _int(e.max_wait_ms, "max_wait_ms", MAX_WAIT_MS)
    if e.min_bytes:
        body["min_bytes"] = _int(e.min_bytes, "min_bytes", MAX_MIN_BYTES)
    return {"Fetch": body}


def _enc_offset_commit_request(e: OffsetCommitRequest) -> dict:
    body: dict[str, Any] = {
        "topic": _str(e.topic, "topic"),
        "partition": _int(e.partition, "partition", MAX_PARTITION),
        "group_id": _str(e.group_id, "group_id"),
        "offset": _int(e.offset, "offset", MAX_OFFSET),
    }
    if e.metadata:
        body["metadata"] = _str(e.metadata, "metadata")
    return {"OffsetCommit": body}


def _enc_offset_fetch_request(e: OffsetFetchRequest) -> dict:
    return {"OffsetFetch": {
        "topic": _str(e.topic, "topic"),
        "partition": _int(e.partition, "partition", MAX_PARTITION),
        "group_id": _str(e.group_id, "group_id"),
    }}


def _enc_create_topic_request(e: CreateTopicRequest) -> dict:
    if _int(e.partitions, "partitions", MAX_PARTITION) == 0:
        raise _Invalid("`partitions` must be at least 1")
    return {"CreateTopic": {"topic": _str(e.topic, "topic"), "partitions": e.partitions}}


_REQUEST_ENCODERS: dict[type, Callable[[Any], dict]] = {
    ProduceRequest: _enc_produce_request,
    FetchRequest: _enc_fetch_request,
    OffsetCommitRequest: _enc_offset_commit_request,
    OffsetFetchRequest: _enc_offset_fetch_request,
    CreateTopicRequest: _enc_create_topic_request,
    ListTopicsRequest: lambda e: {"ListTopics": {}},
    DescribeTopicRequest: lambda e: {"DescribeTopic": {"topic": _str(e.topic, "topic")}},
    DeleteTopicRequest: lambda e: {"DeleteTopic": {"topic": _str(e.topic, "topic")}},
    PingRequest: lambda e: {"Ping": {}},
    AuthRequest: lambda e: {"Auth": {"token": _str(e.token, "token")}},
}

_RESPONSE_ENCODERS: dict[type, Callable[[Any], dict]] = {
    ProduceResponse: lambda e: {"Produce": {
        "offsets": _each(e.offsets, "offsets", lambda o: _int(o, "offset", MAX_OFFSET)),
    }},
    FetchResponse: lambda e: {"Fetch": {
        "records": _each(e.records, "records", _enc_fetched_record),
        "next_offset": _int(e.next_offset, "next_offset", MAX_OFFSET),
    }},
    OffsetCommitResponse: lambda e: {"OffsetCommit": {"success": _bool(e.success, "success")}},
    OffsetFetchResponse: lambda e: {"OffsetFetch": {"offset": _opt_int(e.offset, "offset", MAX_OFFSET)}},
    CreateTopicResponse: lambda e: {"CreateTopic": {"created": _bool(e.created, "created")}},
    DeleteTopicResponse: lambda e: {"DeleteTopic": {"deleted": _bool(e.deleted, "deleted")}},
    ListTopicsResponse: lambda e: {"ListTopics": {"topics": [
        {"name": _str(t.name, "name"), "partitions": _int(t.partitions, "partitions", MAX_PARTITION)}
        for t in e.topics
    ]}},
    DescribeTopicResponse: lambda e: {"DescribeTopic": {"topic": _str(e.topic, "topic"), "partitions": [
        {
            "partition": _int(p.partition, "partition", MAX_PARTITION),
            "log_start_offset": _int(p.log_start_offset, "log_start_offset", MAX_OFFSET),
            "log_end_offset": _int(p.log_end_offset, "log_end_offset", MAX_OFFSET),
        }
        for p in e.partitions
    ]}},
    PongResponse: lambda e: {"Pong": {}},
    AuthResponse: lambda e: {"Auth": {"authenticated": _bool(e.authenticated, "authenticated")}},
    ErrorResponse: lambda e: {"Error": {"message": _str(e.message, "message")}},
}
