"""What went wrong, protocol-neutral: every storage (and record-format) error mapped once to an `ErrorKind`.

Each protocol answers a kind with its own error through a dict (`protocols/kafka/errors.py`, …): the handlers
catch one family of exceptions and look the answer up, instead of one `except` clause per error and protocol.
"""

from __future__ import annotations

import errno
import os
import resource
import socket
from enum import Enum

from logway.codecs.errors import RecordFormatError
from logway.storage import (BatchTooLarge, CorruptBatch, InvalidBatchOffset, InvalidConfig, InvalidPartitions,
                            InvalidRecord, InvalidTopicName, LimitReached, OffsetOutOfRange, PartitionNotOwned,
                            StorageClosed, StorageError, TopicExists, UnknownFormat, UnknownPartition, UnknownTopic)

__all__ = ["ErrorKind", "kind_of", "FAILURES", "ListenerError", "running_out_line"]


class ErrorKind(Enum):
    UNKNOWN_TOPIC = "unknown topic"
    UNKNOWN_PARTITION = "unknown partition"
    OFFSET_OUT_OF_RANGE = "offset out of range"
    TOPIC_EXISTS = "topic exists"
    INVALID_TOPIC_NAME = "invalid topic name"
    INVALID_PARTITIONS = "invalid partition count"
    LIMIT_REACHED = "limit reached"  # the gateway's topics or partitions in all (limits.max_topics, max_partitions)
    INVALID_CONFIG = "invalid config"
    CORRUPT_BATCH = "corrupt batch"
    BATCH_TOO_LARGE = "batch too large"
    INVALID_OFFSET = "invalid batch offset"
    #: e.g. Kafka headers into a TANK topic, a record without a key into a compacted topic: refused
    UNSUPPORTED_RECORD = "record the topic cannot take"
    STORAGE_FAILURE = "storage failure"  # an I/O error (disk full, EIO): nothing was acknowledged, retry later
    UNAVAILABLE = "storage closed"
    #: another member of the cluster leads the partition (or coordinates) now: nothing was written, ask it
    NOT_HERE = "served by another member"
    OTHER = "storage error"


_KINDS: dict[type, ErrorKind] = {
    UnknownTopic: ErrorKind.UNKNOWN_TOPIC,
    UnknownPartition: ErrorKind.UNKNOWN_PARTITION,
    OffsetOutOfRange: ErrorKind.OFFSET_OUT_OF_RANGE,
    TopicExists: ErrorKind.TOPIC_EXISTS,
    InvalidTopicName: ErrorKind.INVALID_TOPIC_NAME,
    InvalidPartitions: ErrorKind.INVALID_PARTITIONS,
    LimitReached: ErrorKind.LIMIT_REACHED,
    InvalidConfig: ErrorKind.INVALID_CONFIG,
    UnknownFormat: ErrorKind.INVALID_CONFIG,
    CorruptBatch: ErrorKind.CORRUPT_BATCH,
    BatchTooLarge: ErrorKind.BATCH_TOO_LARGE,
    InvalidBatchOffset: ErrorKind.INVALID_OFFSET,
    RecordFormatError: ErrorKind.UNSUPPORTED_RECORD,
    InvalidRecord: ErrorKind.UNSUPPORTED_RECORD,
    StorageClosed: ErrorKind.UNAVAILABLE,
    PartitionNotOwned: ErrorKind.NOT_HERE,
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


# -- start-up ------------------------------------------------------------------------------------------------------
class ListenerError(OSError):
    """A listener could not be bound. Names the listener, the address and what to change, in one line:
    `kafka listener cannot listen on 127.0.0.1:9092: address already in use (another process listens there): stop
    it or set listeners.kafka.port`. An OSError (errno of the cause), so callers that catch OSError still do."""

    def __init__(self, listener: str, host: str, port: int, cause: OSError) -> None:
        super().__init__(cause.errno, cause.strerror or str(cause))
        self.listener = listener
        self.host = host
        self.port = port
        self.cause = cause

    def __reduce__(self):
        return type(self), (self.listener, self.host, self.port, self.cause)

    @property
    def address(self) -> str:
        return f"[{self.host}]:{self.port}" if ":" in self.host else f"{self.host}:{self.port}"

    def __str__(self) -> str:
        key = f"listeners.{self.listener}"
        cause = self.cause
        reason = (cause.strerror or str(cause)).rstrip(".")
        if isinstance(cause, socket.gaierror):
            what = f"cannot resolve host {self.host!r} ({reason}): set {key}.host"
        elif cause.errno == errno.EADDRINUSE:
            what = f"address already in use (another process listens there): stop it or set {key}.port"
        elif cause.errno == errno.EACCES:
            what = f"permission denied (ports below 1024 need privileges): set {key}.port"
        elif cause.errno == errno.EADDRNOTAVAIL:
            what = f"the address is not one of this host's: set {key}.host"
        elif cause.errno in (errno.EMFILE, errno.ENFILE):
            what = _out_of_descriptors(cause.errno)
        else:
            what = f"{reason}: check {key}.host and {key}.port"
        return f"{self.listener} listener cannot listen on {self.address}: {what}"


# -- running out -----------------------------------------------------------------------------------------------------
def running_out_line(exc: OSError, data_dir: str) -> str:
    """One line for an OSError of `logway.storage.errors.RUNNING_OUT` (or any other): which resource ran out, or
    which device or file system refused, its limit where there is one, and what to do. Running out is never damage:
    what failed is left as it is, and the gateway works again once the resource is back."""
    where = exc.filename or data_dir
    reason = exc.strerror or str(exc)
    code = exc.errno
    if code in (errno.EMFILE, errno.ENFILE):
        return f"{_out_of_descriptors(code)} ({where})"
    if code in (errno.ENOSPC, errno.EDQUOT):
        what = "disk quota exceeded" if code == errno.EDQUOT else "disk full"
        try:
            st = os.statvfs(data_dir)
            room = f"{st.f_bavail * st.f_frsize} of {st.f_blocks * st.f_frsize} bytes free"
        except OSError:
            room = "free space unknown"
        return (f"{what} ({where}): the file system holding {data_dir} has {room}: free space (lower retention, "
                f"delete topics) or grow it; writes are refused until there is room, then resume by themselves")
    if code == errno.ENOMEM:
        return f"out of memory ({where}): give the process more memory or lower the limits that hold it"
    if code == errno.EIO:
        return (f"I/O error ({where}): the device failed a read or write; check it (dmesg, SMART) — what is stored "
                f"there is left as it is")
    if code == errno.EROFS:
        return f"read-only file system ({where}): remount the file system holding {data_dir} read-write"
    if code in (errno.EACCES, errno.EPERM):
        return f"permission denied ({where}): let the gateway's user (uid {os.geteuid()}) read and write {data_dir}"
    return f"{reason} ({where})"


def _out_of_descriptors(code: int) -> str:
    """EMFILE (this process) or ENFILE (the system): the limit and what to do."""
    if code == errno.ENFILE:
        return (f"the system is out of file descriptors (fs.file-max {_read('/proc/sys/fs/file-max')}): raise "
                f"fs.file-max or stop what holds them")
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    limit = "unlimited" if hard == resource.RLIM_INFINITY else hard
    return (f"out of file descriptors: this process may have {soft} open (RLIMIT_NOFILE, ulimit -n; hard limit "
            f"{limit}): raise the limit (LimitNOFILE= in a systemd unit, ulimit -n) or lower limits.max_connections "
            f"and limits.open_segment_files")


def _read(path: str) -> str:
    try:
        with open(path) as f:
            return f.read().strip()
    except OSError:
        return "unknown"
