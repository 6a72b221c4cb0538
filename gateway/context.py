"""What the parts of a gateway are given of it, instead of the whole `server.Gateway`:

- `Context`: for the protocols (their sessions and handlers) and the pump — the configuration, the storage steps,
  the memory budget and the turns data requests take, the protocols' request counters, the security layer, the
  transaction coordinator, the cluster (None with one process: no cluster code on the request path) and the other
  protocols by name (the native protocol's group administration reads the Kafka groups);
- `GatewayView`: what the admin listener (`admin/`: metrics, probes, the console) reads of a running gateway — a
  structural type, so that admin/ never imports the server that starts it.

Neither imports the server, the protocols or the admin listener: the gateway's modules form no import circle
(`tests/test_layering.py`).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Callable, Protocol

if TYPE_CHECKING:  # pragma: no cover
    from .admin.stats import ProtocolStats
    from .cluster.seam import Cluster
    from .config import Config
    from .memory import MemoryBudget
    from .security import Security
    from .steps import Steps
    from .transactions import TransactionCoordinator
    from .turns import Turns

__all__ = ["Context", "GatewayView"]


@dataclass(slots=True, eq=False)
class Context:
    """See the module docstring. Made once storage is open, before any protocol."""

    config: "Config"
    #: The storage steps: the protocols' one door to storage.
    steps: "Steps"
    memory: "MemoryBudget | None"
    turns: "Turns | None"
    security: "Security"
    transactions: "TransactionCoordinator"
    #: A protocol's request counters by its name (`admin.stats.ProtocolStats`, in the gateway's metrics).
    stats: "Callable[[str], ProtocolStats]"
    cluster: "Cluster | None" = None
    #: Every protocol by name, filled in as the server makes them (all are made before any listener starts).
    protocols: dict = field(default_factory=dict)


class GatewayView(Protocol):
    """What the admin listener reads of a gateway (`server.Gateway` is one; the supervisor's admin listener reads
    its workers' instead)."""

    config: "Config"
    state: str
    storage_open: bool
    ready: bool
    engine: Any
    steps: Any
    security: Any
    protocols: dict
    memory: Any
    descriptors: Any
    connections: Any
    committer: Any
    notifier: Any
    turns: Any
    cleaner: Any
    transactions: Any
    offset_retention: Any
    addresses: dict
    cluster: Any
    metrics: Any
    admin: Any

    def ssl_context_for(self, lc) -> Any: ...
