"""logway.storage — the segmented, indexed, crash-safe log, the committed-offset store and the transaction state.

Synchronous and format-agnostic: it knows files, offsets, batches and bytes, never a wire protocol, trio or a
codec. Storage formats plug in through `BatchFormat` adapters (see `formats`).
"""

from .cleaner import CleanPlan, CleanStats, CleanerSettings, Throttle
from .config import MAX_PARTITIONS, EngineLimits, TopicConfig
from .engine import LogEngine, Topic
from .errors import (BatchTooLarge, CleaningStopped, CorruptBatch, DataDirLocked, InvalidBatchOffset, InvalidConfig,
                     InvalidPartitions, InvalidRecord, InvalidTopicName, LimitReached, NotAnOffsetLog,
                     OffsetOutOfRange, StorageClosed, StorageError, StorageIOError, TopicExists, UnknownFormat,
                     UnknownPartition, UnknownTopic, running_out)
from .formats import BatchFormat, BatchInfo, BatchKeys, CompactionFormat
from .names import validate_topic_name
from .offsets import CommittedOffset, OffsetStore
from .partition import AppendResult, PartitionLog, ReadSlice, RecoveryReport
from .sequences import IdAllocator
from .transactions import TransactionStore
from .txnindex import AbortedTxn, TxnIndex

__all__ = [
    "AppendResult", "BatchFormat", "BatchInfo", "BatchKeys", "BatchTooLarge", "CleanPlan", "CleanStats",
    "CleanerSettings", "CleaningStopped", "CommittedOffset", "CompactionFormat", "CorruptBatch", "DataDirLocked",
    "EngineLimits", "IdAllocator", "InvalidBatchOffset", "InvalidConfig", "InvalidPartitions", "InvalidRecord",
    "InvalidTopicName", "Throttle",
    "LimitReached", "LogEngine", "MAX_PARTITIONS",
    "NotAnOffsetLog", "OffsetOutOfRange", "OffsetStore", "PartitionLog", "ReadSlice", "RecoveryReport",
    "StorageClosed", "StorageError", "StorageIOError", "Topic", "TopicConfig", "TopicExists", "TransactionStore",
    "TxnIndex", "AbortedTxn", "UnknownFormat",
    "UnknownPartition", "UnknownTopic", "running_out", "validate_topic_name",
]
