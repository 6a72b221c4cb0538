"""Batch and streaming writers: every row of a DataFrame becomes one record in a logway topic.

Columns (by name, as in Spark's Kafka sink; others are ignored):

  value      binary or string, required (null = a null value)
  key        binary or string (null = no key; the partition is then chosen per batch, Kafka's sticky way)
  topic      string; required unless the option `topic` is given, which then wins for every row
  partition  int; null or absent = Kafka's default partitioner (murmur2 of the key)
  headers    array<struct<key string, value binary or string>>
  timestamp  timestamp: the record's CreateTime (absent or null = the time of writing)

Each Spark task writes its rows in ONE Kafka transaction (`Producer(transactional_id=...)`), committed when the
task's last row is sent, and returns a `WriteResult`. The transactional id names the task, not the attempt:

- batch writes (and streaming writes without `exactlyOnce`): `logway-spark-{write_id}-{stage}-{partition}`, where
  `write_id` is made once on the driver for the write (each micro-batch of a stream is a write of its own);
- streaming writes with `exactlyOnce`: `logway-spark-{queryId}-{partition}` — Spark's query id survives restarts
  from the checkpoint — and the micro-batch id comes from the task's local property `streaming.sql.batchId`.

So every attempt of a task has the same transactional id, and its InitProducerId fences the attempts before it:
the gateway aborts what an earlier attempt left open (a task that failed mid-way), and an older attempt still
running (a zombie, a speculative copy) can no longer write or commit. Before writing, a task looks for a durable
"done" marker: the transaction also commits, for consumer group = its transactional id, the offset `marker` of
partition 0 of every topic it wrote (1 for batch tasks, micro-batch id + 1 with `exactlyOnce`). A task whose group
already holds an offset >= its marker was committed by an earlier attempt (or, with `exactlyOnce`, the
micro-batch was committed before the query restarted): it writes nothing. A task with no rows starts no
transaction at all. A task that fails aborts its transaction (best effort; otherwise the next attempt's fencing or
the transaction timeout, option `transactionTimeoutMs`, does).

What readers see: read_committed readers (this data source's reader, Kafka consumers with
isolation.level=read_committed, native and TANK clients) see each row of a finished write once — a retried task,
a re-run of a task that had committed, and, with `exactlyOnce`, a micro-batch re-run after a restart add nothing.
read_uncommitted Kafka readers also see the records of aborted attempts. Tasks commit independently: a write that
fails keeps the rows of the tasks that had committed (as Spark's Kafka sink does), and the driver's commit and
abort have nothing to do. With `exactlyOnce`, a re-run micro-batch must give every task the rows it had before
(Spark re-runs it on the same source offsets; the query's plan must partition them deterministically).

A record the gateway refuses fails the task with the gateway's error (`KafkaError`: code, topic, partition,
message), and Spark reports it as the job's failure.
"""

from __future__ import annotations

import contextlib
import uuid
from dataclasses import dataclass
from typing import Iterator

import pyarrow as pa
import pyarrow.compute as pc
from pyspark.sql.datasource import DataSourceArrowWriter, DataSourceStreamArrowWriter, WriterCommitMessage
from pyspark.sql.types import (ArrayType, BinaryType, ByteType, IntegerType, LongType, ShortType, StringType,
                               StructType, TimestampNTZType, TimestampType)

from logway.clients.kafka import KafkaClient

from .errors import OptionError, PipelineError
from .options import WriteOptions
from .producer import Producer

__all__ = ["LogwayBatchWriter", "LogwayStreamWriter", "TaskTransaction", "WriteResult", "check_columns",
           "task_transaction", "write_batches"]

_BYTES = (BinaryType, StringType)
_INTEGERS = (ByteType, ShortType, IntegerType, LongType)


@dataclass
class WriteResult(WriterCommitMessage):
    """What one task wrote: `skipped` when an earlier attempt had committed the task already."""

    records: int = 0
    batches: int = 0
    skipped: bool = False
    transactional_id: str | None = None


@dataclass(frozen=True, slots=True)
class TaskTransaction:
    """How a task writes: in one transaction of `transactional_id`, which commits the offset `marker` for
    consumer group = `transactional_id` (partition 0 of each topic written); a group holding an offset >= `marker`
    means the task was committed already."""

    transactional_id: str
    marker: int = 1


def check_columns(schema: StructType, opts: WriteOptions) -> None:
    """Fail on the driver, before any task runs, when the DataFrame cannot be written."""
    fields = {f.name: f.dataType for f in schema.fields}

    def require(name: str, ok: bool, expected: str) -> None:
        if not ok:
            raise OptionError(f"column '{name}' must be {expected}, not {fields[name].simpleString()}")

    if "value" not in fields:
        raise OptionError("writing to logway needs a 'value' column (binary or string); columns: "
                          + ", ".join(fields))
    require("value", isinstance(fields["value"], _BYTES), "binary or string")
    if "key" in fields:
        require("key", isinstance(fields["key"], _BYTES), "binary or string")
    if "topic" in fields:
        require("topic", isinstance(fields["topic"], StringType), "string")
    elif opts.topic is None:
        raise OptionError("no topic: give the option 'topic' or a string column 'topic'")
    if "partition" in fields:
        require("partition", isinstance(fields["partition"], _INTEGERS), "an integer")
    if "timestamp" in fields:
        require("timestamp", isinstance(fields["timestamp"], (TimestampType, TimestampNTZType)), "a timestamp")
    if "headers" in fields:
        t = fields["headers"]
        ok = (isinstance(t, ArrayType) and isinstance(t.elementType, StructType)
              and [f.name for f in t.elementType.fields] == ["key", "value"]
              and isinstance(t.elementType.fields[0].dataType, StringType)
              and isinstance(t.elementType.fields[1].dataType, _BYTES))
        require("headers", ok, "array<struct<key string, value binary>>")


def _column(batch: pa.RecordBatch, name: str) -> list | None:
    """A column as Python values (strings as UTF-8 bytes, timestamps as ms), or None when absent."""
    index = batch.schema.get_field_index(name)
    if index < 0:
        return None
    arr = batch.column(index)
    if pa.types.is_string(arr.type) or pa.types.is_large_string(arr.type):
        if name != "topic":
            arr = arr.cast(pa.binary())
    elif pa.types.is_timestamp(arr.type):
        micros = arr.cast(pa.int64())
        arr = pc.floor(pc.divide(micros.cast(pa.float64()), pa.scalar(1000.0))).cast(pa.int64())
    return arr.to_pylist()


def _headers(raw) -> tuple:
    if not raw:
        return ()
    out = []
    for h in raw:
        if h is None or h.get("key") is None:
            raise PipelineError("a header with a null key cannot be written (Kafka header keys are strings)")
        value = h.get("value")
        out.append((h["key"], value.encode() if isinstance(value, str) else value))
    return tuple(out)


def task_transaction(write_id: str, *, exactly_once: bool = False) -> TaskTransaction | None:
    """The transaction of the running Spark task (None outside Spark): the same for every attempt of the task
    (stage and partition ids survive retries), different for every task of this write (`write_id`, made on the
    driver). `exactly_once` (streaming): named after the query and partition instead, with the micro-batch id in
    the marker (see the module doc)."""
    from pyspark import TaskContext

    ctx = TaskContext.get()
    if ctx is None:
        return None
    if not exactly_once:
        return TaskTransaction(f"logway-spark-{write_id}-{ctx.stageId()}-{ctx.partitionId()}")
    query_id = ctx.getLocalProperty("sql.streaming.queryId")
    batch_id = ctx.getLocalProperty("streaming.sql.batchId")
    if not query_id or batch_id is None:
        raise PipelineError("option exactlyOnce: this task is not part of a streaming query's micro-batch (Spark "
                            "set no sql.streaming.queryId / streaming.sql.batchId)")
    return TaskTransaction(f"logway-spark-{query_id}-{ctx.partitionId()}", int(batch_id) + 1)


def _committed_before(client: KafkaClient, txn: TaskTransaction) -> bool:
    """Whether an earlier attempt committed this task (its group holds the marker, or a later one)."""
    return any(offset >= txn.marker for offset in client.offset_fetch(txn.transactional_id).values())


def write_batches(opts: WriteOptions, batches: Iterator[pa.RecordBatch], *,
                  txn: TaskTransaction | None = None) -> WriteResult:
    """Produce every row of `batches` (the body of a write task): with `txn`, in one transaction, or nothing when
    an earlier attempt committed it (see the module doc); without, as an idempotent producer."""
    with KafkaClient(opts.client) as client:
        producer: Producer | None = None
        topics: set[str] = set()
        try:
            for batch in batches:
                n = batch.num_rows
                if not n:
                    continue
                if producer is None:  # the first row: start (rows-less tasks never reach the gateway)
                    producer = Producer(client, batch_bytes=opts.batch_bytes, compression=opts.compression,
                                        transactional_id=txn and txn.transactional_id,
                                        transaction_timeout_ms=opts.transaction_timeout_ms)
                    if txn is not None:
                        producer.init()  # fences earlier attempts first: a commit of theirs is then final
                        if _committed_before(client, txn):
                            for _ in batches:  # let Spark's worker read its input to the end
                                pass
                            return WriteResult(skipped=True, transactional_id=txn.transactional_id)
                        producer.begin()
                values = _column(batch, "value")
                keys = _column(batch, "key") or [None] * n
                batch_topics = [opts.topic] * n if opts.topic is not None else _column(batch, "topic")
                partitions = _column(batch, "partition") or [None] * n
                headers = _column(batch, "headers") or [None] * n
                stamps = _column(batch, "timestamp") or [None] * n
                for value, key, topic, partition, hdrs, ts in zip(values, keys, batch_topics, partitions, headers,
                                                                  stamps):
                    if topic is None:
                        raise PipelineError("a row has a null 'topic' and no option 'topic' was given")
                    producer.send(topic, value, key, partition=partition, headers=_headers(hdrs), timestamp=ts)
                topics.update(batch_topics)
            if producer is None:
                return WriteResult(transactional_id=txn and txn.transactional_id)
            if txn is None:
                producer.flush()
            else:
                producer.send_offsets(txn.transactional_id, {(t, 0): txn.marker for t in sorted(topics)})
                producer.commit()
        except BaseException:
            if producer is not None and producer.in_transaction:
                with contextlib.suppress(Exception):  # fenced, or the gateway is gone: the timeout aborts it
                    producer.abort()
            raise
        return WriteResult(producer.records_sent, producer.batches_sent, transactional_id=txn and txn.transactional_id)


class LogwayBatchWriter(DataSourceArrowWriter):
    """`df.write.format("logway")`: one transaction per task, named so every attempt of a task fences the ones
    before it and a task committed before is not written again."""

    def __init__(self, opts: WriteOptions) -> None:
        self.opts = opts
        self.write_id = uuid.uuid4().hex  # made once, on the driver: shared by every task and attempt

    def write(self, iterator: Iterator[pa.RecordBatch]) -> WriteResult:
        return write_batches(self.opts, iterator, txn=task_transaction(self.write_id))

    def commit(self, messages) -> None:
        """Nothing to do: every task committed its own transaction."""

    def abort(self, messages) -> None:
        """Nothing to roll back: tasks that committed stay (as with Spark's Kafka sink); the others aborted."""


class LogwayStreamWriter(DataSourceStreamArrowWriter):
    """`df.writeStream.format("logway")`: each micro-batch's tasks as batch tasks; with `exactlyOnce`, named after
    the query so a micro-batch re-run after the query restarts is recognised (see the module doc)."""

    def __init__(self, opts: WriteOptions) -> None:
        self.opts = opts
        self.write_id = uuid.uuid4().hex

    def write(self, iterator: Iterator[pa.RecordBatch]) -> WriteResult:
        return write_batches(self.opts, iterator,
                             txn=task_transaction(self.write_id, exactly_once=self.opts.exactly_once))

    def commit(self, messages, batchId: int) -> None:
        """Nothing to do: every task committed its own transaction."""

    def abort(self, messages, batchId: int) -> None:
        """Nothing to roll back: the micro-batch is re-run from the checkpoint (with `exactlyOnce`, its tasks
        that had committed write nothing again)."""
