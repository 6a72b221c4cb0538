"""The gateway process: opens storage, starts one listener per enabled protocol and the background tasks
(group commit, interval flush, retention), and shuts down gracefully.

A listener with `tls: true` wraps each accepted connection in a trio SSL stream; the handshake must finish
within `limits.request_timeout_ms` (a client that stalls it is dropped like any slow client).

Shutdown (SIGINT/SIGTERM or `request_shutdown()`): stop accepting; wake parked long-polls; close idle
connections; let connections that are in the middle of a request finish it, for at most
`shutdown_timeout_ms`; then cancel what is left, sync and close storage (shielded, time-bounded).
"""

from __future__ import annotations

import errno
import ipaddress
import logging
import resource
import signal
import socket
from typing import Awaitable, Callable

import trio

from logway.codecs.kafka.records import KafkaFormat
from logway.codecs.tank import TankFormat
from logway.storage import LogEngine

from .auth import server_ssl_context
from .config import Config
from .connections import Connection, ConnectionRegistry
from .dispatch import Dispatcher, NativeDispatch
from .dispatch.kafka import KafkaDispatch
from .dispatch.tank import TankDispatch
from .groups import GroupCoordinator
from .durability import GroupCommitter
from .notify import AppendNotifier

log = logging.getLogger("logway.gateway")

#: Every storage format the engine can hold, by name.
FORMATS = {"kafka": KafkaFormat(), "tank": TankFormat()}

#: How a connection ends when the client goes away: not an error worth a traceback.
_PEER_GONE = (trio.BrokenResourceError, trio.ClosedResourceError, ConnectionError)

Handler = Callable[[trio.abc.Stream, Connection, "Gateway"], Awaitable[None]]


def _protocol_handlers() -> dict[str, Handler]:
    from .kafka import serve_kafka_connection
    from .native import serve_native_connection
    from .tank import serve_tank_connection

    return {"native": serve_native_connection, "kafka": serve_kafka_connection, "tank": serve_tank_connection}


class Gateway:
    def __init__(self, config: Config) -> None:
        self.config = config
        self.engine: LogEngine | None = None
        self.notifier = AppendNotifier(config.limits.max_waiters)
        self.committer = GroupCommitter(on_synced=self._synced)
        self.connections = ConnectionRegistry(config.limits.max_connections, config.limits.max_connections_per_ip)
        self.dispatcher: Dispatcher | None = None
        self.native_dispatch: NativeDispatch | None = None
        self.kafka_dispatch: KafkaDispatch | None = None
        self.tank_dispatch: TankDispatch | None = None
        kc = config.kafka
        self.coordinator = GroupCoordinator(initial_rebalance_delay_ms=kc.group_initial_rebalance_delay_ms,
                                            min_session_timeout_ms=kc.group_min_session_timeout_ms,
                                            max_session_timeout_ms=kc.group_max_session_timeout_ms)
        self.addresses: dict[str, tuple[str, int]] = {}
        self._shutdown = trio.Event()
        uses_tls = any(lc.enabled and lc.tls for lc in config.listeners.values())
        self.ssl_context = server_ssl_context(config.tls) if uses_tls else None  # ConfigError before any I/O

    def _synced(self, target) -> None:
        if self.dispatcher is not None:
            self.dispatcher.synced(target)

    def request_shutdown(self) -> None:
        self._shutdown.set()

    async def run(self, *, handle_signals: bool = False, task_status=trio.TASK_STATUS_IGNORED) -> None:
        cfg = self.config
        _raise_fd_limit()
        self.engine = await trio.to_thread.run_sync(
            lambda: LogEngine(cfg.data_dir, FORMATS, cfg.storage.topic_defaults,
                              reads_need_sync=cfg.storage.flush == "always"))
        self._log_recovery()
        self.dispatcher = Dispatcher(self.engine, self.notifier, self.committer, cfg)
        self.native_dispatch = NativeDispatch(self.dispatcher)
        self.tank_dispatch = TankDispatch(self.dispatcher)
        kafka_listener = cfg.listeners["kafka"]
        self.kafka_dispatch = KafkaDispatch(self.dispatcher, self.coordinator,
                                            (kafka_listener.host, kafka_listener.port))
        handlers = _protocol_handlers()
        try:
            async with trio.open_nursery() as background:
                background.start_soon(self.committer.run)
                background.start_soon(self.coordinator.run)
                if cfg.storage.flush == "interval":
                    background.start_soon(self._flush_loop)
                background.start_soon(self._retention_loop)
                if handle_signals:
                    background.start_soon(self._signal_loop)
                async with trio.open_nursery() as conn_nursery:
                    async with trio.open_nursery() as listeners:
                        for name, lc in cfg.listeners.items():
                            if not lc.enabled:
                                continue
                            if name not in handlers:
                                log.warning("listener %s is configured but not implemented yet; not started", name)
                                continue
                            addr = await listeners.start(self._listen, name, lc, handlers[name], conn_nursery)
                            self.addresses[name] = addr
                            if name == "kafka":
                                kc = cfg.kafka
                                self.kafka_dispatch.advertised = (kc.advertised_host or addr[0],
                                                                  kc.advertised_port or addr[1])
                            log.info("%s protocol listening on %s:%d%s", name, addr[0], addr[1],
                                     " (TLS)" if lc.tls else "")
                            self._log_auth(name)
                            if not _is_loopback(lc.host):
                                log.warning("%s listener is bound to %s: reachable from other hosts (an explicit "
                                            "config choice; see the threat model in README.md)", name, lc.host)
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

    async def _listen(self, name: str, lc, handler: Handler, conn_nursery: trio.Nursery,
                      *, task_status=trio.TASK_STATUS_IGNORED) -> None:
        listeners = await trio.open_tcp_listeners(lc.port, host=lc.host)
        ssl_context = self.ssl_context if lc.tls else None
        sockname = listeners[0].socket.getsockname()
        task_status.started((sockname[0], sockname[1]))

        async def accepted(stream: trio.SocketStream) -> None:
            conn = self.connections.admit(name, stream)
            if conn is None:
                log.warning("%s: connection limit reached (%d in all, %d per address); closing a new connection",
                            name, self.connections.limit, self.connections.per_address)
                await stream.aclose()
                return
            try:
                with conn.scope:
                    if ssl_context is not None:
                        tls = await self._tls_handshake(stream, ssl_context, conn)
                        if tls is None:
                            return
                        stream = tls
                    await handler(stream, conn, self)
            except _PEER_GONE:
                pass
            except ExceptionGroup as group:  # a pump with a nursery (TANK) reports the peer leaving as a group
                rest = group.subgroup(lambda e: not isinstance(e, (*_PEER_GONE, ExceptionGroup)))
                if rest is not None:
                    log.error("%s: connection handler crashed", name, exc_info=rest)
            except Exception:
                log.exception("%s: connection handler crashed", name)
            finally:
                self.connections.release(conn)
                with trio.move_on_after(1) as cleanup:
                    cleanup.shield = True
                    try:
                        await stream.aclose()
                    except Exception as exc:  # e.g. a TLS close_notify to a peer that vanished: nothing to do
                        log.debug("%s: closing: %r", conn.peer, exc)

        async with trio.open_nursery() as accepting:
            for listener in listeners:
                accepting.start_soon(_serve_backlog, listener, accepted, conn_nursery)

    async def _tls_handshake(self, tcp: trio.SocketStream, context, conn: Connection) -> trio.SSLStream | None:
        """The TLS stream over `tcp`, or None when the client failed or stalled the handshake (it is closed)."""
        stream = trio.SSLStream(tcp, context, server_side=True)
        with trio.move_on_after(self.config.limits.request_timeout_ms / 1000):
            try:
                await stream.do_handshake()
                return stream
            except (trio.BrokenResourceError, trio.ClosedResourceError) as exc:
                log.info("%s: TLS handshake failed: %s", conn.peer, exc.__cause__ or exc)
                return None
        log.info("%s: TLS handshake not complete in time", conn.peer)
        return None

    def _log_auth(self, name: str) -> None:
        auth = self.config.auth
        if name == "kafka" and auth.kafka_sasl_plain:
            log.info("kafka listener requires SASL/PLAIN (%d user(s))", len(auth.users))
            if not self.config.listeners["kafka"].tls:
                log.warning("kafka listener takes SASL/PLAIN passwords without TLS: they cross the network "
                            "in clear text")
        elif name == "native" and auth.native_token:
            log.info("native listener requires its access token")
        elif name == "tank" and (auth.kafka_sasl_plain or auth.native_token):
            log.warning("tank listener is enabled but the TANK protocol has no authentication: any client that "
                        "reaches it can read and write every topic (disable it or keep it on loopback)")

    async def _drain(self, conn_nursery: trio.Nursery) -> None:
        self.notifier.close()
        self.coordinator.close()
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


#: Connections taken from a listening socket's backlog per wake-up. trio's own accept loop takes one per scheduler
#: pass: a dozen a second when a thousand busy connections share the loop, so clients arriving under load waited
#: for seconds (`logway bench load --storm`).
ACCEPT_BATCH = 256
#: accept() failures that mean "out of resources": pause instead of spinning (trio's SocketListener does the same).
_ACCEPT_RESOURCE_ERRNOS = {errno.EMFILE, errno.ENFILE, errno.ENOMEM, errno.ENOBUFS}
#: accept() failures that concern only the connection being accepted (it was reset before we took it).
_ACCEPT_SKIP_ERRNOS = {errno.ECONNABORTED, errno.EPROTO, errno.EPERM}


async def _serve_backlog(listener: trio.SocketListener, accepted, nursery: trio.Nursery) -> None:
    """Accept connections on `listener` in batches and start `accepted(stream)` for each in `nursery`."""
    raw = socket.socket(fileno=listener.socket.detach())
    raw.setblocking(False)
    try:
        while True:
            await trio.lowlevel.wait_readable(raw)
            for _ in range(ACCEPT_BATCH):
                try:
                    sock, _ = raw.accept()
                except BlockingIOError:
                    break
                except OSError as exc:
                    if exc.errno in _ACCEPT_SKIP_ERRNOS:
                        continue
                    if exc.errno not in _ACCEPT_RESOURCE_ERRNOS:
                        raise
                    log.error("accept failed: %s; pausing for 100 ms", exc)
                    await trio.sleep(0.1)
                    break
                nursery.start_soon(accepted, trio.SocketStream(trio.socket.from_stdlib_socket(sock)))
    finally:
        trio.lowlevel.notify_closing(raw)
        raw.close()


def _is_loopback(host: str) -> bool:
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return host == "localhost"


def _raise_fd_limit() -> None:
    """Each partition and connection holds descriptors: use the hard limit the system allows."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    target = hard if hard != resource.RLIM_INFINITY else max(soft, 65536)
    if soft < target:
        try:
            resource.setrlimit(resource.RLIMIT_NOFILE, (target, hard))
        except (ValueError, OSError):
            pass

