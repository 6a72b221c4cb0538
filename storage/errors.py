"""Every error the storage package raises, defined once.

Callers (the gateway) map these to each protocol's wire errors; storage never knows a wire code.
"""

from __future__ import annotations

import errno


class StorageError(Exception):
    """Base of every storage error."""


class DataDirLocked(StorageError):
    """Another process holds the data directory's lock; `holder` is the pid it recorded there (None: unknown)."""

    def __init__(self, message: str, holder: int | None = None) -> None:
        super().__init__(message)
        self.holder = holder


class InvalidTopicName(StorageError):
    """The name breaks Kafka's rules: 1–249 characters of [a-zA-Z0-9._-], not '.' or '..'."""


class TopicExists(StorageError):
    pass


class UnknownTopic(StorageError):
    pass


class UnknownPartition(StorageError):
    pass


class InvalidPartitions(StorageError):
    """A partition count that is not in 1..MAX_PARTITIONS (or the engine's smaller limit per topic)."""


class LimitReached(StorageError):
    """Creating the topic or partitions would take the engine past its limit of topics or of partitions in all
    (`EngineLimits`): nothing was created."""


class InvalidConfig(StorageError):
    """A topic or engine configuration value that is out of range or unknown."""


class OffsetOutOfRange(StorageError):
    """The offset is below the log start offset (or above the log end, where the caller asks for that check)."""

    def __init__(self, message: str, *, log_start: int, log_end: int) -> None:
        super().__init__(message)
        self.log_start = log_start
        self.log_end = log_end


class CorruptBatch(StorageError):
    """A batch handed to append is malformed or fails its format's checksum."""


class InvalidBatchOffset(StorageError):
    """A batch that carries its own offsets starts below the log end, or reaches past the largest offset
    (2^63 - 1)."""


class InvalidRecord(StorageError):
    """A record the topic refuses whatever its format: one without a key in a compacted topic (the cleaner keeps
    the last record of each key, and a record without one has none to keep)."""


class CleaningStopped(StorageError):
    """The log cleaner was told to stop (the gateway shuts down, the partition is closed or deleted): the segments
    it was writing are discarded, the log is as before them."""


class BatchTooLarge(StorageError):
    """A batch larger than the topic's max_batch_bytes (or than a segment can hold)."""


class UnknownFormat(StorageError):
    """The topic's storage format has no registered adapter."""


class StorageClosed(StorageError):
    pass


class NotAnOffsetLog(StorageError):
    """The offset store's file has a header this build does not read (another file, or another format version).
    The store leaves it untouched; the engine sets the directory aside and starts an empty store."""


class ReadWouldWait(StorageError):
    """A read asked not to wait (`wait=False`) would: its bytes are not in memory (the postgres backend fetches
    them from the database). Read again where waiting is fine (a worker thread)."""


class DatabaseError(StorageError):
    """The postgres backend cannot open its database: the base of the errors that stop a start, each one line
    that says what to do."""


class DatabaseUnreachable(DatabaseError):
    """No connection to the database: the server is down or unreachable, or the database does not exist."""


class DatabaseAuthFailed(DatabaseError):
    """The database refused the user or its password."""


class SchemaTooNew(DatabaseError):
    """The database holds a logway schema of a newer version than this logway reads."""


class DatabaseInUse(DatabaseError):
    """Another logway gateway writes to the database (one gateway per database until gateways form a cluster)."""


class MigrationUnfinished(DatabaseError):
    """The database holds a `logway migrate` that did not finish: no gateway opens it until a run finishes it."""


class MigrationRefused(StorageError):
    """`logway migrate` will not copy (a target that holds other topics, a compacted topic, a topic the target
    holds under another id) or found the copy unequal to its source: one line that says which and what to do."""


class StorageIOError(StorageError, OSError):
    """A write or sync failed at the file system (disk full, EIO) or the database (a lost connection, a commit
    that failed): nothing was acknowledged, retry later.

    Also an OSError (with the failing call's `errno`), so a caller that handles I/O failures of appends and
    syncs handles these the same way."""


#: The errors of the operating system that say a resource ran out (descriptors, space, quota, memory) or that the
#: device or the file system refused (an I/O error, read-only, permissions) — never that the data is damaged: what
#: failed with one of them is reported as that and left where it is, never quarantined or cut.
RUNNING_OUT = frozenset({errno.EMFILE, errno.ENFILE, errno.ENOSPC, errno.EDQUOT, errno.ENOMEM, errno.EIO,
                         errno.EROFS, errno.EACCES, errno.EPERM})


def running_out(exc: BaseException) -> bool:
    """Whether `exc` is an OSError of `RUNNING_OUT`."""
    return isinstance(exc, OSError) and exc.errno in RUNNING_OUT
