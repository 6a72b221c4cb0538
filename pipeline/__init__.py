"""Data pipelines on Spark: a PySpark data source for logway topics, and the Kafka client under it.

Public names:

- `LogwayDataSource` (format "logway"), `register(spark)`, `spark_session(...)`: the Spark side (need the
  `logway[spark]` extra: pyspark >= 4.2 and pyarrow; imported on first use);
- `ClientConfig`, `LogwayClient`, `Producer`: logway's own blocking Kafka client and idempotent producer
  (codec from `logway.codecs.kafka`; no Spark needed);
- `require_java()`, `java_problem()`: the Java 17+ check Spark needs;
- errors: `PipelineError` and its subclasses `OptionError`, `GatewayError`, `GatewayUnavailable`,
  `DataLossError`, `JavaNotFound`.

Modules: `client` (connections, requests, retries), `producer` (idempotent batches, Kafka partitioner),
`options` (data source options), `ranges` (planning offset ranges), `pushdown` (filters -> ranges),
`arrow` (RecordBatches -> Arrow), `fetcher` (one range as Arrow batches), `source` (the data source, batch
reads), `stream` (streaming reads), `writer` (batch and streaming writes), `java`, `session`, `bench`
(`logway bench spark-read`), `errors`.
"""

from __future__ import annotations

from .client import ClientConfig, LogwayClient
from .errors import DataLossError, GatewayError, GatewayUnavailable, JavaNotFound, OptionError, PipelineError
from .java import java_problem, require_java
from .producer import Producer

__all__ = [
    "LogwayDataSource", "register", "spark_session",
    "ClientConfig", "LogwayClient", "Producer",
    "require_java", "java_problem",
    "PipelineError", "OptionError", "GatewayError", "GatewayUnavailable", "DataLossError", "JavaNotFound",
]

_SPARK_NAMES = {"LogwayDataSource": "source", "register": "source", "spark_session": "session"}


def __getattr__(name: str):
    """The Spark-dependent names, imported on first use (so the client works without pyspark)."""
    module = _SPARK_NAMES.get(name)
    if module is None:
        raise AttributeError(f"module 'logway.pipeline' has no attribute {name!r}")
    from importlib import import_module

    return getattr(import_module(f"{__name__}.{module}"), name)
