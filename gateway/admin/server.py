"""The admin listener as the gateway runs it: `AdminServer` binds `listeners.admin` (TLS when it asks for it) and
serves `api.AdminApi` over `http.serve_http`, and samples the traffic counters each second for `/api/rates`."""

from __future__ import annotations

from typing import TYPE_CHECKING

import trio

from .api import AdminApi, RateSampler
from .http import AdminConnections, serve_http

if TYPE_CHECKING:  # pragma: no cover
    from ..context import GatewayView

__all__ = ["AdminServer"]


class AdminServer:
    def __init__(self, gateway: GatewayView) -> None:
        self.gateway = gateway
        self.config = gateway.config.listeners["admin"]
        self.connections = AdminConnections()
        self.sampler = RateSampler(gateway.metrics)
        self.api = AdminApi(gateway, self.sampler)

    async def serve(self, *, task_status=trio.TASK_STATUS_IGNORED) -> None:
        """Bind, report the bound (host, port), and serve until cancelled (the rate sampler alongside)."""
        lc = self.config
        ssl_context = self.gateway.ssl_context_for(lc)
        timeout = self.gateway.config.limits.request_timeout_ms / 1000
        async with trio.open_nursery() as nursery:
            address = await nursery.start(serve_http, lc.host, lc.port, self.api.handle, self.connections, timeout,
                                          ssl_context)
            nursery.start_soon(self.sampler.run)
            task_status.started(address)
