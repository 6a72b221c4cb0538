"""What went wrong, protocol-neutral: every storage (and record-format) error mapped once to an `ErrorKind`.

Each protocol answers a kind with its own error through a dict (`protocols/kafka/errors.py`, …): the handlers
catch one family of exceptions and look the answer up, instead of one `except` clause per error and protocol.
"""

from __future__ import annotations

from enum import Enum

from logway.codecs.errors import RecordFormatError
from logway.storage import (BatchTooLarge, CorruptBatch, InvalidBatchOffset, InvalidConfig, InvalidPartitions,
                            InvalidTopicName, OffsetOutOfRange, StorageClosed, StorageError, TopicExists,
                            UnknownFormat, UnknownPartition, UnknownTopic)

__all__ = ["ErrorKind", "kind_of", "FAILURES"]


class ErrorKind(Enum):
    UNKNOWN_TOPIC = "unknown topic"
    UNKNOWN_PARTITION = "unknown partition"
    OFFSET_OUT_OF_RANGE = "offset out of range"
    TOPIC_EXISTS = "topic exists"
    INVALID_TOPIC_NAME = "invalid topic name"
    INVALID_PARTITIONS = "invalid partition count"
    INVALID_CONFIG = "invalid config"
    CORRUPT_BATCH = "corrupt batch"
    BATCH_TOO_LARGE = "batch too large"
    INVALID_OFFSET = "invalid batch offset"
    UNSUPPORTED_RECORD = "record the format cannot carry"  # e.g. Kafka headers into a TANK topic: refused
    STORAGE_FAILURE = "storage failure"  # an I/O error (disk full, EIO): nothing was acknowledged, retry later
    UNAVAILABLE = "storage closed"
    OTHER = "storage error"


_KINDS: dict[type, ErrorKind] = {
    UnknownTopic: ErrorKind.UNKNOWN_TOPIC,
    UnknownPartition: ErrorKind.UNKNOWN_PARTITION,
    OffsetOutOfRange: ErrorKind.OFFSET_OUT_OF_RANGE,
    TopicExists: ErrorKind.TOPIC_EXISTS,
    InvalidTopicName: ErrorKind.INVALID_TOPIC_NAME,
    InvalidPartitions: ErrorKind.INVALID_PARTITIONS,
    InvalidConfig: ErrorKind.INVALID_CONFIG,
    UnknownFormat: ErrorKind.INVALID_CONFIG,
    CorruptBatch: ErrorKind.CORRUPT_BATCH,
    BatchTooLarge: ErrorKind.BATCH_TOO_LARGE,
    InvalidBatchOffset: ErrorKind.INVALID_OFFSET,
    RecordFormatError: ErrorKind.UNSUPPORTED_RECORD,
    StorageClosed: ErrorKind.UNAVAILABLE,
    StorageError: ErrorKind.OTHER,
    OSError: ErrorKind.STORAGE_FAILURE,
}

#: The exceptions a request handler turns into its protocol's error answer (everything else is a bug).
FAILURES = (StorageError, RecordFormatError, OSError)


def kind_of(exc: BaseException) -> ErrorKind:
    """The kind of a storage or record-format failure (`ErrorKind.OTHER` for an unexpected StorageError). An
    OSError — StorageIOError included, though it is a StorageError too — is a STORAGE_FAILURE."""
    if isinstance(exc, OSError):
        return ErrorKind.STORAGE_FAILURE
    for cls in type(exc).__mro__:
        kind = _KINDS.get(cls)
        if kind is not None:
            return kind
    return ErrorKind.OTHER
