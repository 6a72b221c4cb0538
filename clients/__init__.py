"""logway.clients — one client per protocol, each blocking and trio, on the codecs' client-side connections.

Public names:

- `NativeClient`, `AsyncNativeClient` (`native`): the native JSON protocol;
- `KafkaClient`, `AsyncKafkaClient`, `KafkaConfig`, `FetchResult`, `EARLIEST`, `LATEST` (`kafka`): logway's own
  Kafka client (retries, TLS, SASL/PLAIN; what the Spark data source runs on);
- `TankClient`, `AsyncTankClient`, `TankMessage`, `GetResult`, `UINT64_MAX` (`tank`): TANK 4.0;
- errors (`errors`): `ClientError` and its subclasses `ConnectionClosed`, `GatewayUnavailable`, `AddressError`,
  `NativeError`, `KafkaError`, `TankError`, `TankBoundaryError`.

Modules: `native`, `kafka`, `tank` (the clients); `kafka_routes` (which broker a Kafka request goes to, with
`workers: N`); `blocking` and `trio_io` (the byte streams under them and the codec pump each flavour shares);
`address` (host:port, the TLS context); `errors`. The clients import only the codecs (and trio, in the async
flavour, on first use): never the gateway, storage, pipeline or benchmarks.
"""

from __future__ import annotations

__all__ = [
    "NativeClient", "AsyncNativeClient",
    "KafkaClient", "AsyncKafkaClient", "KafkaConfig", "FetchResult", "EARLIEST", "LATEST",
    "TankClient", "AsyncTankClient", "TankMessage", "GetResult", "UINT64_MAX",
    "ClientError", "ConnectionClosed", "GatewayUnavailable", "AddressError", "NativeError", "KafkaError",
    "TankError", "TankBoundaryError",
]

#: Where each public name lives: imported on first use, so importing one client (the Kafka one in a Spark task,
#: the native one in `logway topics`) does not import the codecs of the others.
_MODULES = {
    **dict.fromkeys(("NativeClient", "AsyncNativeClient"), "native"),
    **dict.fromkeys(("KafkaClient", "AsyncKafkaClient", "KafkaConfig", "FetchResult", "EARLIEST", "LATEST"), "kafka"),
    **dict.fromkeys(("TankClient", "AsyncTankClient", "TankMessage", "GetResult", "UINT64_MAX"), "tank"),
    **dict.fromkeys(("ClientError", "ConnectionClosed", "GatewayUnavailable", "AddressError", "NativeError",
                     "KafkaError", "TankError", "TankBoundaryError"), "errors"),
}


def __getattr__(name: str):
    module = _MODULES.get(name)
    if module is None:
        raise AttributeError(f"module 'logway.clients' has no attribute {name!r}")
    from importlib import import_module

    return getattr(import_module(f"{__name__}.{module}"), name)
