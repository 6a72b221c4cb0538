"""The errors the pipeline package itself raises, defined once.

- `PipelineError`: the base class of these.
- `OptionError`: a data source option is missing, unknown or malformed (raised while Spark plans the query).
- `DataLossError`: offsets a query needs are no longer in the log (retention deleted them) and the query was
  asked to fail on data loss (`failOnDataLoss`, the default).
- `JavaNotFound`: no Java 17+ runtime, so Spark cannot start (instead of Spark's JAVA_GATEWAY_EXITED).

What the gateway answers comes from the Kafka client underneath, unchanged: `logway.clients.errors.KafkaError`
(a Kafka error code: `code`, `code_name`, `topic`, `partition`, the gateway's `message`) and `GatewayUnavailable`
(the gateway could not be reached after the retries). All of them pickle, so one raised in a Spark task reaches
the driver intact.
"""

from __future__ import annotations

__all__ = ["PipelineError", "OptionError", "DataLossError", "JavaNotFound"]


class PipelineError(Exception):
    """Base class of the pipeline package's own errors."""


class OptionError(PipelineError, ValueError):
    """A data source option is missing, unknown or malformed."""


class DataLossError(PipelineError):
    """Offsets a query must read were deleted by retention (set failOnDataLoss=false to skip them)."""


class JavaNotFound(PipelineError, RuntimeError):
    """No Java 17+ runtime: Spark cannot start."""
