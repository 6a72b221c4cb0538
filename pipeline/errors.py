"""Every error the pipeline package raises, defined once.

- `PipelineError`: the base class; catch it to catch everything below.
- `OptionError`: a data source option is missing, unknown or malformed (raised while Spark plans the query).
- `GatewayError`: the gateway answered with a Kafka error code; carries `code`, `code_name`, `topic`,
  `partition` and the gateway's own `message` (Produce v8 `error_message`) when it sent one.
- `GatewayUnavailable`: the gateway could not be reached (or kept dropping the connection) after the retries.
- `DataLossError`: offsets a query needs are no longer in the log (retention deleted them) and the query was
  asked to fail on data loss (`failOnDataLoss`, the default).
- `JavaNotFound`: no Java 17+ runtime, so Spark cannot start (instead of Spark's JAVA_GATEWAY_EXITED).

The errors pickle with their arguments, so one raised in a Spark task reaches the driver intact.
"""

from __future__ import annotations

from logway.codecs.kafka.error_codes import ErrorCode

__all__ = ["PipelineError", "OptionError", "GatewayError", "GatewayUnavailable", "DataLossError", "JavaNotFound"]


class PipelineError(Exception):
    """Base class of the pipeline package's errors."""


class OptionError(PipelineError, ValueError):
    """A data source option is missing, unknown or malformed."""


class GatewayError(PipelineError):
    """The gateway answered a request with a Kafka error code."""

    def __init__(self, code: int, message: str | None = None, *, topic: str | None = None,
                 partition: int | None = None, operation: str = "request") -> None:
        self.code = int(code)
        self.code_name = ErrorCode.name_of(self.code)
        self.message = message
        self.topic = topic
        self.partition = partition
        self.operation = operation
        where = "" if topic is None else f" for {topic}" + ("" if partition is None else f"-{partition}")
        text = f"logway gateway: {operation}{where} failed with {self.code_name} ({self.code})"
        super().__init__(text + (f": {message}" if message else ""))

    def __reduce__(self):
        return _rebuild_gateway_error, (self.code, self.message, self.topic, self.partition, self.operation)


def _rebuild_gateway_error(code, message, topic, partition, operation) -> GatewayError:
    return GatewayError(code, message, topic=topic, partition=partition, operation=operation)


class GatewayUnavailable(PipelineError, ConnectionError):
    """The gateway could not be reached, or dropped the connection on every attempt."""


class DataLossError(PipelineError):
    """Offsets a query must read were deleted by retention (set failOnDataLoss=false to skip them)."""


class JavaNotFound(PipelineError, RuntimeError):
    """No Java 17+ runtime: Spark cannot start."""
