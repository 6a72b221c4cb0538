"""logway.storage — the segmented, indexed, crash-safe log, the committed-offset store and the transaction state.

Synchronous and format-agnostic: it knows files (or rows), offsets, batches and bytes, never a wire protocol, trio
or a codec. Storage formats plug in through `BatchFormat` adapters (see `formats`). `LogEngine` keeps everything
in a data directory; `logway.storage.pg.PgEngine` (imported on its own: it needs psycopg) in PostgreSQL, behind the
same interface (`topics.Engine`).
"""

from .cleaner import CleanPlan, CleanStats, CleanerSettings, Throttle
from .config import MAX_PARTITIONS, EngineLimits, TopicConfig
from .engine import LogEngine, Topic
from .errors import (BatchTooLarge, CleaningStopped, CorruptBatch, DatabaseAuthFailed, DatabaseError, DatabaseInUse,
                     DatabaseUnreachable, DataDirLocked, InvalidBatchOffset, InvalidConfig, InvalidPartitions,
                     InvalidRecord, InvalidTopicName, LimitReached, MigrationRefused,
                     MigrationUnfinished, NotAnOffsetLog, OffsetOutOfRange, ReadWouldWait,
                     SchemaTooNew, StorageClosed, StorageError, StorageIOError, TopicExists, UnknownFormat,
                     UnknownPartition, UnknownTopic, running_out)
from .formats import BatchFormat, BatchInfo, BatchKeys, CompactionFormat
from .names import validate_topic_name
from .offsets import CommittedOffset, OffsetMap, OffsetStore
from .partition import AppendResult, PartitionLog, ReadSlice, RecoveryReport
from .sequences import IdAllocator
from .transactions import TransactionStore
from .topics import Engine
from .txnindex import AbortedTxn, TxnIndex, TxnState

__all__ = [
    "AppendResult", "BatchFormat", "BatchInfo", "BatchKeys", "BatchTooLarge", "CleanPlan", "CleanStats",
    "CleanerSettings", "CleaningStopped", "CommittedOffset", "CompactionFormat", "CorruptBatch", "DatabaseAuthFailed",
    "DatabaseError", "DatabaseInUse", "DatabaseUnreachable", "DataDirLocked", "Engine", "EngineLimits", "IdAllocator",
    "InvalidBatchOffset", "InvalidConfig", "InvalidPartitions", "InvalidRecord", "InvalidTopicName", "Throttle",
    "LimitReached", "LogEngine", "MigrationRefused", "MigrationUnfinished", "MAX_PARTITIONS", "NotAnOffsetLog", "OffsetMap", "OffsetOutOfRange", "OffsetStore",
    "PartitionLog", "ReadSlice", "ReadWouldWait", "RecoveryReport", "SchemaTooNew", "StorageClosed", "StorageError",
    "StorageIOError", "Topic", "TopicConfig", "TopicExists", "TransactionStore", "TxnIndex", "TxnState", "AbortedTxn",
    "UnknownFormat", "UnknownPartition", "UnknownTopic", "running_out", "validate_topic_name"
]
