"""Every error the clients raise, defined once (the codecs' own `RemoteProtocolError` / `LocalProtocolError` pass
through unchanged: a peer that breaks the protocol, or a request the codec cannot encode).

- `ClientError`: the base class; catch it to catch everything below.
- `ConnectionClosed`: the peer closed the connection (or reset it) while an answer was expected.
- `GatewayUnavailable`: the gateway could not be reached, or dropped the connection on every attempt (the Kafka
  client's retries), or presented a certificate that is not trusted.
- `AddressError`: a `host:port` text that is not one.
- `NativeError`: the gateway answered a native request with an `Error` (its `message`).
- `KafkaError`: the gateway answered a Kafka request with an error code; carries `code`, `code_name`, `topic`,
  `partition`, `operation` and the gateway's own `message` when it sent one.
- `TankError` (`code`, `topic`, `partition`) and `TankBoundaryError` (err 0x01, with the first available seq and
  the high-water mark): a TANK answer that is an error where the call has nothing else to return.

The errors pickle with their arguments, so one raised in a Spark task reaches the driver intact.
"""

from __future__ import annotations

__all__ = ["ClientError", "ConnectionClosed", "GatewayUnavailable", "AddressError", "NativeError", "KafkaError",
           "TankError", "TankBoundaryError"]

#: TANK's err_flags value for a seq outside the partition's bounds (`ConsumeFlags.BOUNDARY`).
_TANK_BOUNDARY = 0x01


class ClientError(Exception):
    """Base class of the clients' errors."""


class ConnectionClosed(ClientError, ConnectionError):
    """The peer closed the connection."""


class GatewayUnavailable(ClientError, ConnectionError):
    """The gateway could not be reached, or dropped the connection on every attempt."""


class AddressError(ClientError, ValueError):
    """A `host:port` that is not one."""


class NativeError(ClientError):
    """The gateway answered a native request with an Error response."""

    def __init__(self, message: str) -> None:
        super().__init__(message)
        self.message = message


class KafkaError(ClientError):
    """The gateway answered a Kafka request with an error code."""

    def __init__(self, code: int, message: str | None = None, *, topic: str | None = None,
                 partition: int | None = None, operation: str = "request") -> None:
        from logway.codecs.kafka.error_codes import ErrorCode  # here: the other clients need no Kafka codec

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
        return _rebuild_kafka_error, (self.code, self.message, self.topic, self.partition, self.operation)


def _rebuild_kafka_error(code, message, topic, partition, operation) -> KafkaError:
    return KafkaError(code, message, topic=topic, partition=partition, operation=operation)


class TankError(ClientError):
    """The broker answered with an error code (`code`) for (topic, partition)."""

    def __init__(self, message: str, code: int, topic: str = "", partition: int = -1) -> None:
        super().__init__(message)
        self.code = code
        self.topic = topic
        self.partition = partition

    def __reduce__(self):
        return TankError, (self.args[0], self.code, self.topic, self.partition)


class TankBoundaryError(TankError):
    """err 0x01: the requested seq is below the first available one or past lastAssigned + 1."""

    def __init__(self, topic: str, partition: int, seq: int, first_available: int, high_water_mark: int) -> None:
        super().__init__(f"{topic}/{partition}: seq {seq} is outside [{first_available}, {high_water_mark + 1}]",
                         _TANK_BOUNDARY, topic, partition)
        self.seq = seq
        self.first_available = first_available
        self.high_water_mark = high_water_mark

    def __reduce__(self):
        return TankBoundaryError, (self.topic, self.partition, self.seq, self.first_available, self.high_water_mark)
