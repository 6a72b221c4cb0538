"""Storage failures as Kafka error codes: one table by `ErrorKind` (and the two places that read a kind
differently: a record a topic's format cannot carry is INVALID_RECORD on produce, CORRUPT_MESSAGE on fetch)."""

from __future__ import annotations

from logway.codecs.kafka.error_codes import ErrorCode as E

from ...errors import ErrorKind, kind_of

ERRORS: dict[ErrorKind, int] = {
    ErrorKind.UNKNOWN_TOPIC: E.UNKNOWN_TOPIC_OR_PARTITION,
    ErrorKind.UNKNOWN_PARTITION: E.UNKNOWN_TOPIC_OR_PARTITION,
    ErrorKind.OFFSET_OUT_OF_RANGE: E.OFFSET_OUT_OF_RANGE,
    ErrorKind.TOPIC_EXISTS: E.TOPIC_ALREADY_EXISTS,
    ErrorKind.INVALID_TOPIC_NAME: E.INVALID_TOPIC_EXCEPTION,
    ErrorKind.INVALID_PARTITIONS: E.INVALID_PARTITIONS,
    ErrorKind.LIMIT_REACHED: E.POLICY_VIOLATION,  # as Kafka refuses too many partitions (KAFKA-17870)
    ErrorKind.INVALID_CONFIG: E.INVALID_CONFIG,
    ErrorKind.CORRUPT_BATCH: E.CORRUPT_MESSAGE,
    ErrorKind.BATCH_TOO_LARGE: E.MESSAGE_TOO_LARGE,
    ErrorKind.UNSUPPORTED_RECORD: E.CORRUPT_MESSAGE,  # stored records a fetch cannot convert
    ErrorKind.STORAGE_FAILURE: E.KAFKA_STORAGE_ERROR,  # nothing was written: the client may retry
    ErrorKind.NOT_HERE: E.NOT_LEADER_OR_FOLLOWER,  # (cluster) the partition's leader moved: the client looks again
}
#: On produce, a record the topic's format cannot carry (headers into a TANK topic) is the client's to fix.
PRODUCE_ERRORS: dict[ErrorKind, int] = {**ERRORS, ErrorKind.UNSUPPORTED_RECORD: E.INVALID_RECORD}


def error_code(exc: BaseException, table: dict[ErrorKind, int] = ERRORS) -> int:
    """The Kafka error code answering a storage or record-format failure (UNKNOWN_SERVER_ERROR if unmapped)."""
    return table.get(kind_of(exc), E.UNKNOWN_SERVER_ERROR)
