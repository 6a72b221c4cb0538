"""Data pipelines on Spark: a PySpark data source for logway topics, a client of the gateway's Kafka listener.

Public names:

- `LogwayDataSource` (format "logway"), `register(spark)`, `spark_session(...)`: the Spark side (need the
  `logway[spark]` extra: pyspark >= 4.2 and pyarrow; imported on first use);
- `Producer`: an idempotent or transactional producer on `logway.clients.KafkaClient` (no Spark needed); the
  data source speaks Kafka through that client (`logway.clients.kafka`), whose errors (`KafkaError`,
  `GatewayUnavailable`) reach Spark jobs unchanged;
- `require_java()`, `java_problem()`: the Java 17+ check Spark needs;
- errors: `PipelineError` and its subclasses `OptionError`, `DataLossError`, `JavaNotFound`.

Modules: `producer` (idempotent and transactional batches, Kafka partitioner), `options` (data source options),
`ranges` (planning offset ranges), `pushdown` (filters -> ranges), `arrow` (RecordBatches -> Arrow), `fetcher`
(one range as Arrow batches, read_committed), `source` (the data source, batch reads), `stream` (streaming reads),
`writer` (batch and streaming writes, a transaction per task), `java`, `session`, `errors`. The benchmark
`logway bench spark-read` is `logway.bench.spark`.
"""

from __future__ import annotations

from .errors import DataLossError, JavaNotFound, OptionError, PipelineError
from .java import java_problem, require_java
from .producer import Producer

__all__ = [
    "LogwayDataSource", "register", "spark_session",
    "Producer",
    "require_java", "java_problem",
    "PipelineError", "OptionError", "DataLossError", "JavaNotFound",
]

_SPARK_NAMES = {"LogwayDataSource": "source", "register": "source", "spark_session": "session"}


def __getattr__(name: str):
    """The Spark-dependent names, imported on first use (so the producer works without pyspark)."""
    module = _SPARK_NAMES.get(name)
    if module is None:
        raise AttributeError(f"module 'logway.pipeline' has no attribute {name!r}")
    from importlib import import_module

    return getattr(import_module(f"{__name__}.{module}"), name)
