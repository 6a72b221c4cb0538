"""The gateway process: opens storage, starts one listener per enabled protocol of `protocols.REGISTRY` and the
background tasks (group commit, interval flush, retention, each protocol's own), and shuts down gracefully.

`Gateway(config, listen=False)` binds no socket: `connect(protocol)` then hands out in-memory connections served
by the same pump (trio memory streams), for fast protocol tests and in-process tools.

Shutdown (SIGINT/SIGTERM or `request_shutdown()`): stop accepting; wake parked long-polls; close idle
connections; let connections that are in the middle of a request finish it, for at most
`shutdown_timeout_ms`; then cancel what is left, sync and close storage (shielded, time-bounded).
"""

from __future__ import annotations

import logging
import resource
import signal

import trio

from logway.storage import LogEngine

from .config import Config
from .connections import ConnectionRegistry
from .durability import Flush, GroupCommitter
from .formats import STORAGE_FORMATS
from .listeners import is_loopback, listen, serve
from .notify import AppendNotifier
from .protocols import REGISTRY, Protocol
from .steps import Steps
from .tls import server_ssl_context

log = logging.getLogger("logway.gateway")


class Gateway:
    def __init__(self, config: Config, *, listen: bool = True) -> None:
        self.config = config
        self.listen = listen
        self._conn_nursery: trio.Nursery | None = None
        self.engine: LogEngine | None = None
        self.steps: Steps | None = None
        self.protocols: dict[str, Protocol] = {}
        self.notifier = AppendNotifier(config.limits.max_waiters)
        self.committer = GroupCommitter(on_synced=self._synced)
        self.connections = ConnectionRegistry(config.limits.max_connections, config.limits.max_connections_per_ip)
        self.addresses: dict[str, tuple[str, int]] = {}
        self._shutdown = trio.Event()
        uses_tls = any(lc.enabled and lc.tls for lc in config.listeners.values())
        self.ssl_context = server_ssl_context(config.tls) if uses_tls else None  # ConfigError before any I/O

    def _synced(self, target) -> None:
        if self.steps is not None:
            self.steps.synced(target)

    def request_shutdown(self) -> None:
        self._shutdown.set()

    async def run(self, *, handle_signals: bool = False, task_status=trio.TASK_STATUS_IGNORED) -> None:
        cfg = self.config
        _raise_fd_limit()
        flush = cfg.storage.flush
        self.engine = await trio.to_thread.run_sync(
            lambda: LogEngine(cfg.data_dir, STORAGE_FORMATS, cfg.storage.topic_defaults,
                              reads_need_sync=flush == Flush.ALWAYS))
        self._log_recovery()
        self.steps = Steps(self.engine, self.notifier, self.committer, flush)
        for name, lc in cfg.listeners.items():
            if not lc.enabled:
                continue
            if name not in REGISTRY:
                log.warning("listener %s is configured but not implemented; not started", name)
                continue
            self.protocols[name] = REGISTRY[name](self)
        try:
            async with trio.open_nursery() as background:
                background.start_soon(self.committer.run)
                for protocol in self.protocols.values():
                    background.start_soon(protocol.run)
                if flush == Flush.INTERVAL:
                    background.start_soon(self._flush_loop)
                background.start_soon(self._retention_loop)
                if handle_signals:
                    background.start_soon(self._signal_loop)
                async with trio.open_nursery() as conn_nursery:
                    self._conn_nursery = conn_nursery
                    async with trio.open_nursery() as listeners:
                        for name, protocol in self.protocols.items():
                            if self.listen:
                                await self._start_listener(listeners, conn_nursery, protocol, cfg.listeners[name])
                        task_status.started(dict(self.addresses))
                        await self._shutdown.wait()
                        log.info("shutting down: no new connections")
                        listeners.cancel_scope.cancel()
                    await self._drain(conn_nursery)
                background.cancel_scope.cancel()
        finally:
            with trio.CancelScope(shield=True):
                with trio.move_on_after(max(cfg.shutdown_timeout_ms / 1000, 1) + 30):
                    await trio.to_thread.run_sync(self.engine.close)
                    log.info("storage flushed and closed")

    async def _start_listener(self, listeners: trio.Nursery, conn_nursery: trio.Nursery, protocol: Protocol,
                              lc) -> None:
        ssl_context = self.ssl_context if lc.tls else None
        addr = await listeners.start(listen, protocol, lc, self.connections, self.config.limits, ssl_context,
                                     conn_nursery)
        self.addresses[protocol.name] = addr
        protocol.listening(addr)
        log.info("%s protocol listening on %s:%d%s", protocol.name, addr[0], addr[1], " (TLS)" if lc.tls else "")
        for level, message in protocol.security_notes():
            log.log(level, "%s", message)
        if not is_loopback(lc.host):
            log.warning("%s listener is bound to %s: reachable from other hosts (an explicit config choice; see the "
                        "threat model in README.md)", protocol.name, lc.host)

    async def connect(self, protocol: str) -> trio.abc.Stream:
        """The client end of a new in-memory connection to `protocol` (a running gateway's enabled protocol)."""
        if self._conn_nursery is None or protocol not in self.protocols:
            raise RuntimeError(f"no running {protocol} protocol to connect to")
        import trio.testing  # only here: it pulls in pytest

        client, server = trio.testing.memory_stream_pair()
        conn = self.connections.admit(protocol, server)
        if conn is None:
            raise RuntimeError("connection refused (limit reached or shutting down)")
        self._conn_nursery.start_soon(serve, server, conn, self.protocols[protocol], self.connections,
                                      self.config.limits)
        return client

    async def _drain(self, conn_nursery: trio.Nursery) -> None:
        self.notifier.close()
        for protocol in self.protocols.values():
            protocol.close()
        self.connections.drain()
        with trio.move_on_after(self.config.shutdown_timeout_ms / 1000):
            while self.connections.count:
                await self.connections.changed()
        if self.connections.count:
            log.warning("shutdown deadline: closing %d busy connection(s)", self.connections.count)
        conn_nursery.cancel_scope.cancel()

    async def _flush_loop(self) -> None:
        interval = self.config.storage.flush_interval_ms / 1000
        while True:
            await trio.sleep(interval)
            try:
                await trio.to_thread.run_sync(self.engine.sync)
            except OSError as exc:
                log.error("interval flush failed: %s", exc)

    async def _retention_loop(self) -> None:
        interval = self.config.storage.retention_check_interval_ms / 1000
        while True:
            await trio.sleep(interval)
            deleted = await trio.to_thread.run_sync(self.engine.enforce_retention)
            if deleted:
                log.info("retention deleted %d segment(s)", deleted)

    async def _signal_loop(self) -> None:
        with trio.open_signal_receiver(signal.SIGINT, signal.SIGTERM) as signals:
            async for signum in signals:
                log.info("received %s", signal.Signals(signum).name)
                self.request_shutdown()

    def _log_recovery(self) -> None:
        engine = self.engine
        if not engine.clean_start:
            log.warning("the previous run did not shut down cleanly; logs were recovered")
        for (topic, partition), report in engine.recovery_reports().items():
            if report.truncated_bytes or report.segments_dropped:
                log.warning("recovery of %s-%d truncated %d bytes and dropped %d segment(s)", topic, partition,
                            report.truncated_bytes, report.segments_dropped)


def _raise_fd_limit() -> None:
    """Each partition and connection holds descriptors: use the hard limit the system allows."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    target = hard if hard != resource.RLIM_INFINITY else max(soft, 65536)
    if soft < target:
        try:
            resource.setrlimit(resource.RLIMIT_NOFILE, (target, hard))
        except (ValueError, OSError):
            pass
