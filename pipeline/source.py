"""The PySpark data source `logway`: batch reads, and the entry points for streams and writes.

    from logway.pipeline import register
    register(spark)                      # once per SparkSession
    df = (spark.read.format("logway").option("gateway", "127.0.0.1:9092").option("subscribe", "events").load())

Rows have Spark's Kafka-source schema (`arrow.SPARK_SCHEMA`). The batch reader plans one Spark input partition
per topic partition (more with `maxRecordsPerPartition`), on the driver, with a metadata request and a couple of
ListOffsets requests; each task then opens its own connection and fetches its range, yielding Arrow batches.

Filter push-down (`pushdown`) needs Spark's `spark.sql.python.filterPushdown.enabled`, which is off by default;
`register()` turns it on (Spark fails every read of a reader that implements `pushFilters` while it is off).

Push-down is on by default only where it is safe: up to Spark 4.3, the JVM stores the read planned during filter
push-down on the data source object that every scan of a loaded DataFrame shares, so after
`df.where("partition = 1").count()`, a later `df.count()` reuses the narrowed plan and silently reads only
partition 1. Spark fixed this together with limit push-down (SPARK-58551, which added
`DataSourceReader.pushLimit`), so `PUSHDOWN_IS_SAFE` tests for that method. Where it is not safe the option
`pushFilters=true` still turns push-down on, for queries that load their DataFrame afresh.
"""

from __future__ import annotations

from typing import Iterator

import pyarrow as pa
from pyspark.sql.datasource import DataSource, DataSourceReader, InputPartition
from pyspark.sql.types import (ArrayType, BinaryType, IntegerType, LongType, StringType, StructField, StructType,
                               TimestampType)

from logway.clients.kafka import KafkaClient

from .arrow import SPARK_SCHEMA
from .errors import OptionError
from .fetcher import ReadStats, read_range
from .options import ReadOptions, read_options, write_options
from .pushdown import Pushdown
from .ranges import OffsetRange, batch_ranges, split

__all__ = ["SCHEMA", "LogwayDataSource", "LogwayBatchReader", "LogwayFilteringReader", "RangePartition", "register",
           "PUSHDOWN_CONF", "PUSHDOWN_IS_SAFE"]

PUSHDOWN_CONF = "spark.sql.python.filterPushdown.enabled"
#: Whether this Spark keeps push-down results per scan (see the module docstring).
PUSHDOWN_IS_SAFE = hasattr(DataSourceReader, "pushLimit")
#: `SPARK_SCHEMA` as a StructType (built in Python: parsing DDL needs a running JVM).
SCHEMA = StructType([
    StructField("key", BinaryType()), StructField("value", BinaryType()), StructField("topic", StringType()),
    StructField("partition", IntegerType()), StructField("offset", LongType()),
    StructField("timestamp", TimestampType()), StructField("timestampType", IntegerType()),
    StructField("headers", ArrayType(StructType([StructField("key", StringType()),
                                                 StructField("value", BinaryType())]))),
])


class RangePartition(InputPartition):
    """One Spark input partition: an offset range of one topic partition (its `value`)."""

    def __init__(self, rng: OffsetRange) -> None:
        super().__init__(rng)

    @property
    def range(self) -> OffsetRange:
        return self.value


def check_schema(schema: StructType) -> None:
    if schema.simpleString() != SCHEMA.simpleString():
        raise OptionError(f"format 'logway' has the fixed schema {SPARK_SCHEMA}; a user-specified schema "
                          f"({schema.simpleString()}) is not supported")


def read_partition(opts: ReadOptions, partition, stats: ReadStats) -> Iterator[pa.RecordBatch]:
    """The rows of one planned range, as Arrow batches (a task of a batch or a streaming read)."""
    if not isinstance(partition, RangePartition):
        return  # nothing to read: Spark plans one InputPartition(None) when partitions() is empty
    with KafkaClient(opts.client) as client:
        yield from read_range(client, partition.range, max_bytes=opts.fetch_max_bytes,
                              fail_on_data_loss=opts.fail_on_data_loss, stats=stats)


class LogwayBatchReader(DataSourceReader):
    """Batch reader without filter push-down (see `LogwayFilteringReader`)."""

    def __init__(self, opts: ReadOptions) -> None:
        self.opts = opts
        self.pushdown = Pushdown()
        self.stats = ReadStats()  # what `read` fetched in this process (tests, benchmarks)

    def plan(self) -> list[OffsetRange]:
        with KafkaClient(self.opts.client) as client:
            ranges = batch_ranges(client, self.opts, self.pushdown)
        return split(ranges, self.opts.max_records_per_partition)

    def partitions(self) -> list[RangePartition]:
        return [RangePartition(r) for r in self.plan()]

    def read(self, partition: RangePartition) -> Iterator[pa.RecordBatch]:
        return read_partition(self.opts, partition, self.stats)


class LogwayFilteringReader(LogwayBatchReader):
    """Batch reader that narrows its fetches with the query's partition/offset/timestamp predicates."""

    def pushFilters(self, filters):
        for flt in filters:
            if not self.pushdown.absorb(flt):
                yield flt


class LogwayDataSource(DataSource):
    """Format "logway": read and write logway topics (through the gateway's Kafka listener)."""

    @classmethod
    def name(cls) -> str:
        return "logway"

    def schema(self) -> str:
        return SPARK_SCHEMA

    def reader(self, schema: StructType) -> LogwayBatchReader:
        check_schema(schema)
        opts = read_options(self.options, streaming=False)
        push = PUSHDOWN_IS_SAFE if opts.push_filters is None else opts.push_filters
        return LogwayFilteringReader(opts) if push else LogwayBatchReader(opts)

    def streamReader(self, schema: StructType):
        from .stream import LogwayStreamReader

        check_schema(schema)
        return LogwayStreamReader(read_options(self.options, streaming=True))

    def writer(self, schema: StructType, overwrite: bool):
        from .writer import LogwayBatchWriter

        return LogwayBatchWriter(self._write_options(schema, overwrite, streaming=False))

    def streamWriter(self, schema: StructType, overwrite: bool):
        from .writer import LogwayStreamWriter

        return LogwayStreamWriter(self._write_options(schema, overwrite, streaming=True))

    def _write_options(self, schema: StructType, overwrite: bool, *, streaming: bool):
        from .writer import check_columns

        if overwrite:
            raise OptionError("a logway topic can only be appended to: use mode('append'), not overwrite")
        opts = write_options(self.options, streaming=streaming)
        check_columns(schema, opts)
        return opts


def register(spark) -> None:
    """Register format "logway" with `spark` and enable Python filter push-down for its reads."""
    spark.dataSource.register(LogwayDataSource)
    spark.conf.set(PUSHDOWN_CONF, "true")
