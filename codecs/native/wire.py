"""The native protocol's JSON <-> event mapping: the per-tag decoders and the per-type encoders.

A decoder takes one tag's body (and the frame's raw JSON) and returns an event from `events`; an encoder takes an
event and returns the wire dict, field order following the seed. Both validate with the same helpers, which raise
`_Invalid`; `connection` turns that into RemoteProtocolError (a bad frame) or LocalProtocolError (a bad event).
The tables `_REQUEST_DECODERS`, `_RESPONSE_DECODERS`, `_REQUEST_ENCODERS` and `_RESPONSE_ENCODERS` are what
`connection` picks from by role. The wire schema is described in the package docstring.
"""

from __future__ import annotations

import math

from typing import Any, Callable

import orjson

from logway.codecs.errors import RecordFormatError
from logway.codecs.native.events import (
    RESET_TARGETS,
    AlterTopicConfigRequest,
    AlterTopicConfigResponse,
    AuthRequest,
    AuthResponse,
    CreatePartitionsRequest,
    CreatePartitionsResponse,
    CreateTopicRequest,
    CreateTopicResponse,
    DeleteGroupOffsetsRequest,
    DeleteGroupOffsetsResponse,
    DeleteRecordsRequest,
    DeleteRecordsResponse,
    DeleteTopicRequest,
    DeleteTopicResponse,
    DescribeGroupRequest,
    DescribeGroupResponse,
    DescribeTopicConfigRequest,
    DescribeTopicConfigResponse,
    DescribeTopicRequest,
    DescribeTopicResponse,
    EncodedRecords,
    ErrorResponse,
    FetchRequest,
    FetchResponse,
    GroupMember,
    GroupOffsetReset,
    GroupPartition,
    GroupSummary,
    ListGroupsRequest,
    ListGroupsResponse,
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
    ResetGroupOffsetsRequest,
    ResetGroupOffsetsResponse,
    TopicConfigEntry,
    TopicSummary,
    TxnEndRequest,
    TxnQueryRequest,
    TxnResponse,
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
#: Kafka producer ids and epochs (the internal transaction requests).
MAX_PRODUCER_ID = 2**63 - 1
MAX_EPOCH = 2**15 - 1
#: Partitions named by one internal transaction request.
MAX_TXN_PARTITIONS = 100_000
#: The most records one Produce may carry: ten times librdkafka's largest batch (batch.num.messages), and an answer
#: of at most ~2 MB of offsets. The bound is also what keeps a frame's JSON parse short: orjson parses a frame in one
#: call that holds the interpreter, ~1 µs per one-byte record — a 10 MiB frame of 2.6 M of them held it for seconds
#: (`NativeConnection` counts a frame's arrays before parsing it: `MAX_ARRAYS`).
MAX_PRODUCE_RECORDS = 100_000
#: The most JSON arrays ("[") a request frame may hold, counted before it is parsed: a Produce's records with their
#: keys (two arrays each), and room for the other requests' lists.
MAX_ARRAYS = 2 * MAX_PRODUCE_RECORDS + 1024
#: The states a `TxnResponse` may carry.
TXN_STATES = ("ok", "ongoing", "committed", "aborted", "completing")
# Topic config values are int64 (ms, bytes) or strings, as Kafka's configs.
MIN_CONFIG_INT, MAX_CONFIG_INT = -(2**63), 2**63 - 1

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


def _offset_or_end(value: Any, name: str) -> int:
    """An offset, or -1 (the end: the high watermark)."""
    if value == -1 and type(value) is int:
        return -1
    return _int(value, name, MAX_OFFSET)


def _config_value(value: Any, name: str) -> int | float | str:
    """A topic config value: an int64, a finite number (min.cleanable.dirty.ratio) or a string (Kafka sends every
    value as a string)."""
    if type(value) is str:
        return value
    if type(value) is float and not math.isfinite(value):
        raise _Invalid(f"`{name}` = {value} is not a finite number")
    if type(value) not in (int, float):
        raise _Invalid(f"`{name}` must be an integer, a number or a string, got {_kind(value)}")
    if not MIN_CONFIG_INT <= value <= MAX_CONFIG_INT:
        raise _Invalid(f"`{name}` = {value} is out of range {MIN_CONFIG_INT}..{MAX_CONFIG_INT}")
    return value


def _opt_bool(value: Any, name: str) -> bool:
    return False if value is None else _bool(value, name)


def _opt_strs(value: Any, name: str) -> list[str] | None:
    if value is None:
        return None
    return _each(_list(value, name), name, lambda v: _str(v, "name"))


def _opt_str(value: Any, name: str) -> str | None:
    return None if value is None else _str(value, name)


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
        _opt_bytes(payload, "payload", mb),  # (null: a record without a value, a compacted topic's tombstone)
        key=_opt_bytes(item.get("key"), "key", mb),
        timestamp=_opt_int(item.get("timestamp"), "timestamp", MAX_TIMESTAMP),
    )


def _produce_request(body: dict, payload: bytearray) -> ProduceRequest:
    topic = _str(_get(body, "topic"), "topic")
    partition = _int(_get(body, "partition"), "partition", MAX_PARTITION)
    raw = _list(_get(body, "records"), "records")
    if len(raw) > MAX_PRODUCE_RECORDS:
        raise _Invalid(f"{len(raw)} records in one Produce: at most {MAX_PRODUCE_RECORDS}; send them in several")
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
    partitions = body.get("partitions")
    if partitions is not None:
        partitions = _each(_list(partitions, "partitions"), "partitions",
                           lambda v: _int(v, "partition", MAX_PARTITION))
    return DescribeTopicRequest(_str(_get(body, "topic"), "topic"), _opt_bool(body.get("details"), "details"),
                                partitions, _opt_int(body.get("at_timestamp"), "at_timestamp", MAX_TIMESTAMP))


def _create_partitions_request(body: dict, _raw: bytearray) -> CreatePartitionsRequest:
    partitions = _int(_get(body, "partitions"), "partitions", MAX_PARTITION)
    if partitions == 0:
        raise _Invalid("`partitions` must be at least 1")
    return CreatePartitionsRequest(_str(_get(body, "topic"), "topic"), partitions,
                                   _opt_bool(body.get("validate_only"), "validate_only"))


def _delete_records_request(body: dict, _raw: bytearray) -> DeleteRecordsRequest:
    return DeleteRecordsRequest(
        topic=_str(_get(body, "topic"), "topic"),
        partition=_int(_get(body, "partition"), "partition", MAX_PARTITION),
        offset=_offset_or_end(_get(body, "offset"), "offset"),
    )


def _config_set(value: Any) -> dict[str, int | str]:
    if value is None:
        return {}
    items = _obj(value, "set")
    return {key: _config_value(v, f"set.{key}") for key, v in items.items()}


def _alter_topic_config_request(body: dict, _raw: bytearray) -> AlterTopicConfigRequest:
    return AlterTopicConfigRequest(
        topic=_str(_get(body, "topic"), "topic"),
        set=_config_set(body.get("set")),
        delete=_opt_strs(body.get("delete"), "delete") or [],
        validate_only=_opt_bool(body.get("validate_only"), "validate_only"),
    )


def _describe_topic_config_request(body: dict, _raw: bytearray) -> DescribeTopicConfigRequest:
    return DescribeTopicConfigRequest(_str(_get(body, "topic"), "topic"), _opt_strs(body.get("keys"), "keys"))


def _topic_partition(item: Any) -> tuple[str, int]:
    item = _obj(item, "partition")
    return _str(_get(item, "topic"), "topic"), _int(_get(item, "partition"), "partition", MAX_PARTITION)


def _delete_group_offsets_request(body: dict, _raw: bytearray) -> DeleteGroupOffsetsRequest:
    partitions = body.get("partitions")
    return DeleteGroupOffsetsRequest(
        _str(_get(body, "group_id"), "group_id"),
        None if partitions is None else _each(_list(partitions, "partitions"), "partitions", _topic_partition),
    )


def _reset_topic(item: Any) -> tuple[str, list[int] | None]:
    item = _obj(item, "topic")
    partitions = item.get("partitions")
    return (_str(_get(item, "topic"), "topic"),
            None if partitions is None else _each(_list(partitions, "partitions"), "partitions",
                                                   lambda p: _int(p, "partition", MAX_PARTITION)))


def _reset_target(to: Any, value: Any) -> tuple[str, int | None]:
    """`to` one of RESET_TARGETS, with a `value` (0..2**63-1) exactly when it needs one."""
    to = _str(to, "to")
    if to not in RESET_TARGETS:
        raise _Invalid(f"`to` must be one of {', '.join(RESET_TARGETS)}, got {to!r}")
    if not RESET_TARGETS[to]:
        if value is not None:
            raise _Invalid(f"`value` is not taken with `to` = {to!r}")
        return to, None
    if value is None:
        raise _Invalid(f"`to` = {to!r} needs a `value`")
    return to, _int(value, "value", MAX_OFFSET)


def _reset_group_offsets_request(body: dict, _raw: bytearray) -> ResetGroupOffsetsRequest:
    to, value = _reset_target(_get(body, "to"), body.get("value"))
    topics = body.get("topics")
    return ResetGroupOffsetsRequest(
        group_id=_str(_get(body, "group_id"), "group_id"),
        to=to,
        value=value,
        topics=None if topics is None else _each(_list(topics, "topics"), "topics", _reset_topic),
        validate_only=_opt_bool(body.get("validate_only"), "validate_only"),
    )


def _txn_partitions(body: dict) -> list[tuple[str, int]]:
    items = _list(_get(body, "partitions"), "partitions")
    if len(items) > MAX_TXN_PARTITIONS:
        raise _Invalid(f"`partitions` names {len(items)} partitions, more than {MAX_TXN_PARTITIONS}")
    return _each(items, "partitions", _topic_partition)


def _txn_producer(body: dict) -> tuple[int, int]:
    return (_int(_get(body, "producer_id"), "producer_id", MAX_PRODUCER_ID),
            _int(_get(body, "epoch"), "epoch", MAX_EPOCH))


def _txn_state(value: Any) -> str:
    state = _str(value, "state")
    if state not in TXN_STATES:
        raise _Invalid(f"`state` must be one of {', '.join(TXN_STATES)}, got {state!r}")
    return state


def _auth_request(body: dict, _raw) -> AuthRequest:
    """One of the three logins (see `AuthRequest`); a mix of them is refused."""
    given = {k: _str(body[k], k) for k in ("token", "user", "password", "mechanism", "message")
             if body.get(k) is not None}
    if set(given) not in ({"token"}, {"user", "password"}, {"mechanism", "message"}):
        raise _Invalid("Auth takes `token`, or `user` and `password`, or `mechanism` and `message` (SCRAM)")
    return AuthRequest(**given)


_REQUEST_DECODERS: dict[str, Decoder] = {
    "Produce": _produce_request,
    "Fetch": _fetch_request,
    "OffsetCommit": _offset_commit_request,
    "OffsetFetch": _offset_fetch_request,
    "CreateTopic": _create_topic_request,
    "ListTopics": lambda body, _raw: ListTopicsRequest(),
    "DescribeTopic": _describe_topic_request,
    "DeleteTopic": lambda body, _raw: DeleteTopicRequest(_str(_get(body, "topic"), "topic")),
    "CreatePartitions": _create_partitions_request,
    "DeleteRecords": _delete_records_request,
    "AlterTopicConfig": _alter_topic_config_request,
    "DescribeTopicConfig": _describe_topic_config_request,
    "DeleteGroupOffsets": _delete_group_offsets_request,
    "ListGroups": lambda body, _raw: ListGroupsRequest(_opt_str(body.get("after"), "after")),
    "DescribeGroup": lambda body, _raw: DescribeGroupRequest(_str(_get(body, "group_id"), "group_id")),
    "ResetGroupOffsets": _reset_group_offsets_request,
    "Ping": lambda body, _raw: PingRequest(),
    "Auth": _auth_request,
    "TxnEnd": lambda body, _raw: TxnEndRequest(*_txn_producer(body), _bool(_get(body, "committed"), "committed"),
                                               _txn_partitions(body)),
    "TxnQuery": lambda body, _raw: TxnQueryRequest(*_txn_producer(body), *_topic_partition(body)),
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
    if len(raw) > MAX_PRODUCE_RECORDS:
        raise _Invalid(f"{len(raw)} records in one Produce: at most {MAX_PRODUCE_RECORDS}; send them in several")
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
        _opt_int(item.get("size_bytes"), "size_bytes", MAX_OFFSET),
        _opt_int(item.get("segments"), "segments", MAX_OFFSET),
        _opt_int(item.get("timestamp_offset"), "timestamp_offset", MAX_OFFSET),
        _opt_int(item.get("last_stable_offset"), "last_stable_offset", MAX_OFFSET),
    )


def _describe_topic_response(body: dict, _raw: bytearray) -> DescribeTopicResponse:
    raw = _list(_get(body, "partitions"), "partitions")
    fmt = body.get("format")
    return DescribeTopicResponse(_str(_get(body, "topic"), "topic"), _each(raw, "partitions", _partition_summary),
                                 None if fmt is None else _str(fmt, "format"))


def _group_summary(item: Any) -> GroupSummary:
    item = _obj(item, "group")
    return GroupSummary(_str(_get(item, "group_id"), "group_id"), _str(_get(item, "state"), "state"),
                        _str(_get(item, "protocol_type"), "protocol_type"),
                        _int(_get(item, "members"), "members", MAX_PARTITION), _str(item.get("type", ""), "type"))


def _group_member(item: Any) -> GroupMember:
    item = _obj(item, "member")
    return GroupMember(_str(_get(item, "member_id"), "member_id"), _str(_get(item, "client_id"), "client_id"),
                       _str(_get(item, "client_host"), "client_host"),
                       _each(_list(item.get("partitions") or [], "partitions"), "partitions", _topic_partition))


def _group_partition(item: Any) -> GroupPartition:
    item = _obj(item, "partition")
    metadata = item.get("metadata")
    return GroupPartition(
        _str(_get(item, "topic"), "topic"),
        _int(_get(item, "partition"), "partition", MAX_PARTITION),
        _opt_int(_get(item, "committed_offset"), "committed_offset", MAX_OFFSET),
        _opt_int(_get(item, "log_end_offset"), "log_end_offset", MAX_OFFSET),
        "" if metadata is None else _str(metadata, "metadata"),
    )


def _describe_group_response(body: dict, _raw: bytearray) -> DescribeGroupResponse:
    return DescribeGroupResponse(
        _str(_get(body, "group_id"), "group_id"),
        _str(_get(body, "state"), "state"),
        _str(_get(body, "protocol_type"), "protocol_type"),
        _each(_list(_get(body, "members"), "members"), "members", _group_member),
        _each(_list(_get(body, "partitions"), "partitions"), "partitions", _group_partition),
        _str(body.get("type", ""), "type"),
    )


def _offset_reset(item: Any) -> GroupOffsetReset:
    item = _obj(item, "offset")
    return GroupOffsetReset(
        _str(_get(item, "topic"), "topic"),
        _int(_get(item, "partition"), "partition", MAX_PARTITION),
        _opt_int(_get(item, "previous_offset"), "previous_offset", MAX_OFFSET),
        _int(_get(item, "offset"), "offset", MAX_OFFSET),
    )


def _reset_group_offsets_response(body: dict, _raw: bytearray) -> ResetGroupOffsetsResponse:
    return ResetGroupOffsetsResponse(
        _str(_get(body, "group_id"), "group_id"),
        _each(_list(_get(body, "offsets"), "offsets"), "offsets", _offset_reset),
        _bool(_get(body, "reset"), "reset"),
    )


def _config_entry(item: Any) -> TopicConfigEntry:
    item = _obj(item, "config")
    return TopicConfigEntry(
        _str(_get(item, "name"), "name"),
        _config_value(_get(item, "value"), "value"),
        _str(_get(item, "source"), "source"),
        _config_value(_get(item, "default"), "default"),
        _bool(_get(item, "read_only"), "read_only"),
    )


def _describe_topic_config_response(body: dict, _raw: bytearray) -> DescribeTopicConfigResponse:
    raw = _list(_get(body, "configs"), "configs")
    return DescribeTopicConfigResponse(_str(_get(body, "topic"), "topic"), _each(raw, "configs", _config_entry))


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
    "CreatePartitions": lambda body, _raw: CreatePartitionsResponse(
        _str(_get(body, "topic"), "topic"), _int(_get(body, "partitions"), "partitions", MAX_PARTITION)),
    "DeleteRecords": lambda body, _raw: DeleteRecordsResponse(
        _int(_get(body, "log_start_offset"), "log_start_offset", MAX_OFFSET)),
    "AlterTopicConfig": lambda body, _raw: AlterTopicConfigResponse(_bool(_get(body, "altered"), "altered")),
    "DescribeTopicConfig": _describe_topic_config_response,
    "DeleteGroupOffsets": lambda body, _raw: DeleteGroupOffsetsResponse(
        _int(_get(body, "deleted"), "deleted", MAX_OFFSET)),
    "ListGroups": lambda body, _raw: ListGroupsResponse(
        _each(_list(_get(body, "groups"), "groups"), "groups", _group_summary), _opt_str(body.get("next"), "next")),
    "DescribeGroup": _describe_group_response,
    "ResetGroupOffsets": _reset_group_offsets_response,
    "Pong": lambda body, _raw: PongResponse(),
    "Auth": lambda body, _raw: AuthResponse(_bool(_get(body, "authenticated"), "authenticated"),
                                            _opt_str(body.get("message"), "message"),
                                            _opt_str(body.get("principal"), "principal")),
    "Txn": lambda body, _raw: TxnResponse(_txn_state(_get(body, "state"))),
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
    payload = None if r.value is None else _enc_bytes(r.value, "value")
    if r.key is None and r.timestamp is None and payload is not None:
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


def encode_fetched(records) -> EncodedRecords:
    """Records (with their offsets) as the items of a Fetch answer, encoded now: `FetchResponse(EncodedRecords)`
    sends them as they are. Raises RecordFormatError for a record the answer cannot carry (a negative
    timestamp)."""
    try:
        text = orjson.dumps([_enc_fetched_record(r) for r in records])[1:-1]  # (a copy: orjson's result keeps
    except _Invalid as exc:  # the capacity it was allocated with, KiBs)
        raise RecordFormatError(f"a record the native protocol cannot carry: {exc}") from None
    # An item is an object of numbers and arrays of numbers: its "}" is the only one, and ends it.
    ends, offsets, sizes = [], [], []
    find = text.find
    end = 0
    for r in records:
        end = find(b"}", end) + 1
        ends.append(end)
        offsets.append(r.offset)
        sizes.append(0 if r.value is None else len(r.value))
    return EncodedRecords(text, tuple(ends), tuple(offsets), tuple(sizes))


def _enc_records(records) -> Any:
    if type(records) is EncodedRecords:
        return orjson.Fragment(b"[" + records.text + b"]")
    return _each(records, "records", _enc_fetched_record)


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


def _enc_create_partitions_request(e: CreatePartitionsRequest) -> dict:
    if _int(e.partitions, "partitions", MAX_PARTITION) == 0:
        raise _Invalid("`partitions` must be at least 1")
    body: dict[str, Any] = {"topic": _str(e.topic, "topic"), "partitions": e.partitions}
    if _bool(e.validate_only, "validate_only"):
        body["validate_only"] = True
    return {"CreatePartitions": body}


def _enc_alter_topic_config_request(e: AlterTopicConfigRequest) -> dict:
    body: dict[str, Any] = {
        "topic": _str(e.topic, "topic"),
        "set": {_str(k, "set key"): _config_value(v, f"set.{k}") for k, v in _obj(e.set, "set").items()},
        "delete": _each(_list(e.delete, "delete"), "delete", lambda v: _str(v, "name")),
    }
    if _bool(e.validate_only, "validate_only"):
        body["validate_only"] = True
    return {"AlterTopicConfig": body}


def _enc_describe_topic_config_request(e: DescribeTopicConfigRequest) -> dict:
    body: dict[str, Any] = {"topic": _str(e.topic, "topic")}
    if e.keys is not None:
        body["keys"] = _each(_list(e.keys, "keys"), "keys", lambda v: _str(v, "name"))
    return {"DescribeTopicConfig": body}


def _enc_delete_group_offsets_request(e: DeleteGroupOffsetsRequest) -> dict:
    body: dict[str, Any] = {"group_id": _str(e.group_id, "group_id")}
    if e.partitions is not None:
        body["partitions"] = _each(_list(e.partitions, "partitions"), "partitions", _enc_topic_partition)
    return {"DeleteGroupOffsets": body}


def _enc_topic_partition(item: Any) -> dict:
    if type(item) not in (tuple, list) or len(item) != 2:
        raise _Invalid(f"a partition must be a (topic, partition) pair, got {_kind(item)}")
    return {"topic": _str(item[0], "topic"), "partition": _int(item[1], "partition", MAX_PARTITION)}


def _enc_describe_topic_request(e: DescribeTopicRequest) -> dict:
    body: dict[str, Any] = {"topic": _str(e.topic, "topic")}
    if _bool(e.details, "details"):  # sent only when asked for: seed brokers see the seed's frame
        body["details"] = True
    if e.partitions is not None:
        body["partitions"] = _each(_list(list(e.partitions), "partitions"), "partitions",
                                   lambda v: _int(v, "partition", MAX_PARTITION))
    if e.at_timestamp is not None:
        body["at_timestamp"] = _int(e.at_timestamp, "at_timestamp", MAX_TIMESTAMP)
    return {"DescribeTopic": body}


def _enc_reset_topic(item: Any) -> dict:
    if type(item) not in (tuple, list) or len(item) != 2:
        raise _Invalid(f"a topic must be a (topic, partitions or None) pair, got {_kind(item)}")
    body: dict[str, Any] = {"topic": _str(item[0], "topic")}
    if item[1] is not None:
        body["partitions"] = _each(_list(item[1], "partitions"), "partitions",
                                   lambda p: _int(p, "partition", MAX_PARTITION))
    return body


def _enc_reset_group_offsets_request(e: ResetGroupOffsetsRequest) -> dict:
    to, value = _reset_target(e.to, e.value)
    body: dict[str, Any] = {"group_id": _str(e.group_id, "group_id"), "to": to}
    if value is not None:
        body["value"] = value
    if e.topics is not None:
        body["topics"] = _each(_list(e.topics, "topics"), "topics", _enc_reset_topic)
    if _bool(e.validate_only, "validate_only"):
        body["validate_only"] = True
    return {"ResetGroupOffsets": body}


def _enc_partition_summary(p: PartitionSummary) -> dict:
    item: dict[str, Any] = {
        "partition": _int(p.partition, "partition", MAX_PARTITION),
        "log_start_offset": _int(p.log_start_offset, "log_start_offset", MAX_OFFSET),
        "log_end_offset": _int(p.log_end_offset, "log_end_offset", MAX_OFFSET),
    }
    if p.size_bytes is not None:
        item["size_bytes"] = _int(p.size_bytes, "size_bytes", MAX_OFFSET)
    if p.segments is not None:
        item["segments"] = _int(p.segments, "segments", MAX_OFFSET)
    if p.timestamp_offset is not None:
        item["timestamp_offset"] = _int(p.timestamp_offset, "timestamp_offset", MAX_OFFSET)
    if p.last_stable_offset is not None:
        item["last_stable_offset"] = _int(p.last_stable_offset, "last_stable_offset", MAX_OFFSET)
    return item


def _enc_describe_topic_response(e: DescribeTopicResponse) -> dict:
    body: dict[str, Any] = {"topic": _str(e.topic, "topic"),
                            "partitions": _each(e.partitions, "partitions", _enc_partition_summary)}
    if e.format is not None:
        body["format"] = _str(e.format, "format")
    return {"DescribeTopic": body}


def _enc_group_member(m: GroupMember) -> dict:
    return {"member_id": _str(m.member_id, "member_id"), "client_id": _str(m.client_id, "client_id"),
            "client_host": _str(m.client_host, "client_host"),
            "partitions": _each(_list(m.partitions, "partitions"), "partitions", _enc_topic_partition)}


def _enc_group_partition(p: GroupPartition) -> dict:
    return {"topic": _str(p.topic, "topic"), "partition": _int(p.partition, "partition", MAX_PARTITION),
            "committed_offset": _opt_int(p.committed_offset, "committed_offset", MAX_OFFSET),
            "log_end_offset": _opt_int(p.log_end_offset, "log_end_offset", MAX_OFFSET),
            "metadata": _str(p.metadata, "metadata")}


def _enc_describe_group_response(e: DescribeGroupResponse) -> dict:
    return {"DescribeGroup": {
        "group_id": _str(e.group_id, "group_id"),
        "state": _str(e.state, "state"),
        "protocol_type": _str(e.protocol_type, "protocol_type"),
        "members": _each(e.members, "members", _enc_group_member),
        "partitions": _each(e.partitions, "partitions", _enc_group_partition),
        "type": _str(e.type, "type"),
    }}


def _enc_offset_reset(r: GroupOffsetReset) -> dict:
    return {"topic": _str(r.topic, "topic"), "partition": _int(r.partition, "partition", MAX_PARTITION),
            "previous_offset": _opt_int(r.previous_offset, "previous_offset", MAX_OFFSET),
            "offset": _int(r.offset, "offset", MAX_OFFSET)}


def _enc_txn_end(e: TxnEndRequest) -> dict:
    partitions = _list(e.partitions, "partitions")
    if len(partitions) > MAX_TXN_PARTITIONS:
        raise _Invalid(f"`partitions` names {len(partitions)} partitions, more than {MAX_TXN_PARTITIONS}")
    return {"TxnEnd": {"producer_id": _int(e.producer_id, "producer_id", MAX_PRODUCER_ID),
                       "epoch": _int(e.epoch, "epoch", MAX_EPOCH), "committed": _bool(e.committed, "committed"),
                       "partitions": _each(partitions, "partitions", _enc_topic_partition)}}


_REQUEST_ENCODERS: dict[type, Callable[[Any], dict]] = {
    ProduceRequest: _enc_produce_request,
    FetchRequest: _enc_fetch_request,
    OffsetCommitRequest: _enc_offset_commit_request,
    OffsetFetchRequest: _enc_offset_fetch_request,
    CreateTopicRequest: _enc_create_topic_request,
    ListTopicsRequest: lambda e: {"ListTopics": {}},
    DescribeTopicRequest: _enc_describe_topic_request,
    DeleteTopicRequest: lambda e: {"DeleteTopic": {"topic": _str(e.topic, "topic")}},
    CreatePartitionsRequest: _enc_create_partitions_request,
    DeleteRecordsRequest: lambda e: {"DeleteRecords": {
        "topic": _str(e.topic, "topic"),
        "partition": _int(e.partition, "partition", MAX_PARTITION),
        "offset": _offset_or_end(e.offset, "offset"),
    }},
    AlterTopicConfigRequest: _enc_alter_topic_config_request,
    DescribeTopicConfigRequest: _enc_describe_topic_config_request,
    DeleteGroupOffsetsRequest: _enc_delete_group_offsets_request,
    ListGroupsRequest: lambda e: {"ListGroups": {} if e.after is None else {"after": _str(e.after, "after")}},
    DescribeGroupRequest: lambda e: {"DescribeGroup": {"group_id": _str(e.group_id, "group_id")}},
    ResetGroupOffsetsRequest: _enc_reset_group_offsets_request,
    PingRequest: lambda e: {"Ping": {}},
    AuthRequest: lambda e: {"Auth": {k: _str(v, k) for k, v in (("token", e.token), ("user", e.user),
                                                                  ("password", e.password),
                                                                  ("mechanism", e.mechanism),
                                                                  ("message", e.message)) if v is not None}},
    TxnEndRequest: _enc_txn_end,
    TxnQueryRequest: lambda e: {"TxnQuery": {
        "producer_id": _int(e.producer_id, "producer_id", MAX_PRODUCER_ID), "epoch": _int(e.epoch, "epoch", MAX_EPOCH),
        **_enc_topic_partition((e.topic, e.partition))}},
}

_RESPONSE_ENCODERS: dict[type, Callable[[Any], dict]] = {
    ProduceResponse: lambda e: {"Produce": {
        "offsets": _each(e.offsets, "offsets", lambda o: _int(o, "offset", MAX_OFFSET)),
    }},
    FetchResponse: lambda e: {"Fetch": {
        "records": _enc_records(e.records),
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
    DescribeTopicResponse: _enc_describe_topic_response,
    CreatePartitionsResponse: lambda e: {"CreatePartitions": {
        "topic": _str(e.topic, "topic"), "partitions": _int(e.partitions, "partitions", MAX_PARTITION)}},
    DeleteRecordsResponse: lambda e: {"DeleteRecords": {
        "log_start_offset": _int(e.log_start_offset, "log_start_offset", MAX_OFFSET)}},
    AlterTopicConfigResponse: lambda e: {"AlterTopicConfig": {"altered": _bool(e.altered, "altered")}},
    DescribeTopicConfigResponse: lambda e: {"DescribeTopicConfig": {"topic": _str(e.topic, "topic"), "configs": [
        {
            "name": _str(c.name, "name"),
            "value": _config_value(c.value, "value"),
            "source": _str(c.source, "source"),
            "default": _config_value(c.default, "default"),
            "read_only": _bool(c.read_only, "read_only"),
        }
        for c in e.configs
    ]}},
    DeleteGroupOffsetsResponse: lambda e: {"DeleteGroupOffsets": {"deleted": _int(e.deleted, "deleted", MAX_OFFSET)}},
    ListGroupsResponse: lambda e: {"ListGroups": {"groups": [
        {"group_id": _str(g.group_id, "group_id"), "state": _str(g.state, "state"),
         "protocol_type": _str(g.protocol_type, "protocol_type"), "members": _int(g.members, "members", MAX_PARTITION),
         "type": _str(g.type, "type")}
        for g in e.groups
    ], **({} if e.next is None else {"next": _str(e.next, "next")})}},
    DescribeGroupResponse: _enc_describe_group_response,
    ResetGroupOffsetsResponse: lambda e: {"ResetGroupOffsets": {
        "group_id": _str(e.group_id, "group_id"),
        "offsets": _each(e.offsets, "offsets", _enc_offset_reset),
        "reset": _bool(e.reset, "reset"),
    }},
    PongResponse: lambda e: {"Pong": {}},
    AuthResponse: lambda e: {"Auth": {"authenticated": _bool(e.authenticated, "authenticated"),
                                      **{k: _str(v, k) for k, v in (("message", e.message),
                                                                    ("principal", e.principal)) if v is not None}}},
    TxnResponse: lambda e: {"Txn": {"state": _txn_state(e.state)}},
    ErrorResponse: lambda e: {"Error": {"message": _str(e.message, "message")}},
}
