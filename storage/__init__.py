"""logway.storage — the segmented, indexed, crash-safe log, the committed-offset store and the transaction state.

Synchronous and format-agnostic: it knows files (or rows), offsets, batches and bytes, never a wire protocol, trio
or a codec. Storage formats plug in through `BatchFormat` adapters (see `formats`). `LogEngine` keeps everything
in a data directory; `logway.storage.pg.PgEngine` (imported on its own: it needs psycopg) in PostgreSQL, behind the
same interface (`topics.Engine`).
"""

from importlib import import_module

#: Where each public name lives: loaded on first use (PEP 562), so that importing one module of the package — the
#: configuration's `storage.config`, say, for a command-line tool — does not load the whole engine.
_WHERE = {
    "CleanPlan": "cleaner", "CleanStats": "cleaner", "CleanerSettings": "cleaner", "Throttle": "cleaner",
    "EngineLimits": "config", "MAX_PARTITIONS": "config", "TopicConfig": "config",
    "LogEngine": "engine", "PartitionNotOwned": "engine", "Topic": "engine",
    "BatchTooLarge": "errors", "CleaningStopped": "errors", "CorruptBatch": "errors", "DataDirLocked": "errors",
    "DatabaseAuthFailed": "errors", "DatabaseError": "errors", "DatabaseInUse": "errors",
    "DatabaseUnreachable": "errors", "InvalidBatchOffset": "errors", "InvalidConfig": "errors",
    "InvalidPartitions": "errors", "InvalidRecord": "errors", "InvalidTopicName": "errors", "LimitReached": "errors",
    "MigrationRefused": "errors", "MigrationUnfinished": "errors", "NotAnOffsetLog": "errors",
    "OffsetOutOfRange": "errors", "ReadWouldWait": "errors", "SchemaTooNew": "errors", "StorageClosed": "errors",
    "StorageError": "errors", "StorageIOError": "errors", "TopicExists": "errors", "UnknownFormat": "errors",
    "UnknownPartition": "errors", "UnknownTopic": "errors", "running_out": "errors",
    "BatchFormat": "formats", "BatchInfo": "formats", "BatchKeys": "formats", "CompactionFormat": "formats",
    "validate_topic_name": "names",
    "CommittedOffset": "offsets", "OffsetMap": "offsets", "OffsetStore": "offsets",
    "AppendResult": "partition", "PartitionLog": "partition", "ReadSlice": "partition",
    "RecoveryReport": "partition",
    "IdAllocator": "sequences",
    "Engine": "topics",
    "TransactionStore": "transactions",
    "AbortedTxn": "txnindex", "TxnIndex": "txnindex", "TxnState": "txnindex",
}


def __getattr__(name: str):
    module = _WHERE.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(import_module(f".{module}", __name__), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(_WHERE))


__all__ = sorted(_WHERE)
