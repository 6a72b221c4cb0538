"""Batch and streaming writers: every row of a DataFrame becomes one record in a logway topic.

Columns (by name, as in Spark's Kafka sink; others are ignored):

  value      binary or string, required (null = a null value)
  key        binary or string (null = no key; the partition is then chosen per batch, Kafka's sticky way)
  topic      string; required unless the option `topic` is given, which then wins for every row
  partition  int; null or absent = Kafka's default partitioner (murmur2 of the key)
  headers    array<struct<key string, value binary or string>>
  timestamp  timestamp: the record's CreateTime (absent or null = the time of writing)

Each Spark task writes through its own idempotent `Producer` (see `producer` for what that guarantees) and
returns a `WriteResult`; the driver's commit has nothing left to do, since produced records are visible at once.
A record the gateway refuses fails the task with the gateway's error (`KafkaError`: code, topic, partition,
message), and Spark reports it as the job's failure.
"""

from __future__ import annotations

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

__all__ = ["LogwayBatchWriter", "LogwayStreamWriter", "WriteResult", "check_columns"]

_BYTES = (BinaryType, StringType)
_INTEGERS = (ByteType, ShortType, IntegerType, LongType)


@dataclass
class WriteResult(WriterCommitMessage):
    """What one task wrote."""

    records: int = 0
    batches: int = 0


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


def task_producer_name(write_id: str) -> str | None:
    """The producer name of the running Spark task: the same for every attempt of the task (stage and
    partition ids survive retries), different for every task of this write (`write_id`, made on the driver)."""
    from pyspark import TaskContext

    ctx = TaskContext.get()
    if ctx is None:
        return None
    return f"logway-spark-{write_id}-{ctx.stageId()}-{ctx.partitionId()}"


def write_batches(opts: WriteOptions, batches: Iterator[pa.RecordBatch], *,
                  producer_name: str | None = None) -> WriteResult:
    """Produce every row of `batches` (the body of a write task); with `producer_name`, a replay of the same
    rows under the same name appends nothing again."""
    with KafkaClient(opts.client) as client:
        producer = Producer(client, batch_bytes=opts.batch_bytes, compression=opts.compression,
                            name=producer_name)
        for batch in batches:
            n = batch.num_rows
            values = _column(batch, "value")
            keys = _column(batch, "key") or [None] * n
            topics = [opts.topic] * n if opts.topic is not None else _column(batch, "topic")
            partitions = _column(batch, "partition") or [None] * n
            headers = _column(batch, "headers") or [None] * n
            stamps = _column(batch, "timestamp") or [None] * n
            for value, key, topic, partition, hdrs, ts in zip(values, keys, topics, partitions, headers, stamps):
                if topic is None:
                    raise PipelineError("a row has a null 'topic' and no option 'topic' was given")
                producer.send(topic, value, key, partition=partition, headers=_headers(hdrs), timestamp=ts)
        producer.flush()
        return WriteResult(producer.records_sent, producer.batches_sent)


class LogwayBatchWriter(DataSourceArrowWriter):
    """`df.write.format("logway")`: one idempotent producer per task, named so a retried task is recognised."""

    def __init__(self, opts: WriteOptions) -> None:
        self.opts = opts
        self.write_id = uuid.uuid4().hex  # made once, on the driver: shared by every task and attempt

    def write(self, iterator: Iterator[pa.RecordBatch]) -> WriteResult:
        return write_batches(self.opts, iterator, producer_name=task_producer_name(self.write_id))

    def commit(self, messages) -> None:
        """Nothing to do: records are visible as soon as the gateway acknowledged them."""

    def abort(self, messages) -> None:
        """Records already acknowledged stay in the log (a topic has no transactions to roll back)."""


class LogwayStreamWriter(DataSourceStreamArrowWriter):
    """`df.writeStream.format("logway")`: each micro-batch as a batch write (a retried task of a micro-batch
    is recognised; a micro-batch re-run after the query restarts is written again: at least once)."""

    def __init__(self, opts: WriteOptions) -> None:
        self.opts = opts
        self.write_id = uuid.uuid4().hex

    def write(self, iterator: Iterator[pa.RecordBatch]) -> WriteResult:
        return write_batches(self.opts, iterator, producer_name=task_producer_name(self.write_id))

    def commit(self, messages, batchId: int) -> None:
        """Nothing to do: records are visible as soon as the gateway acknowledged them."""

    def abort(self, messages, batchId: int) -> None:
        """Records already acknowledged stay in the log; the micro-batch is re-run from the checkpoint."""
