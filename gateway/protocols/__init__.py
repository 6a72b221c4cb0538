"""Each wire protocol in its own package — `native`, `kafka`, `tank` — behind one small interface,
`base.Protocol`.

The server makes one instance per enabled listener from `REGISTRY` and asks it for a codec and a session per
connection (`logway.gateway.pump`), for its background tasks, and what to log about its security. Adding a
protocol means a package with a `Protocol` subclass and a line in `REGISTRY`; nothing in the server changes.
"""

from .base import Protocol
from .kafka import KafkaProtocol
from .native import NativeProtocol
from .tank import TankProtocol

#: name -> Protocol subclass, in the order the listeners start.
REGISTRY: dict[str, type[Protocol]] = {cls.name: cls for cls in (NativeProtocol, KafkaProtocol, TankProtocol)}

__all__ = ["Protocol", "REGISTRY"]
