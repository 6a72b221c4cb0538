"""The gateway process: opens storage (`storage.backend`: files under data_dir, or PostgreSQL), starts one listener per enabled protocol of `protocols.REGISTRY` and the
background tasks (group commit, interval flush, retention of segments and of committed offsets, the log cleaner of
compacted topics, the data requests' turns, each protocol's own), and shuts down gracefully.

`Gateway(config, listen=False)` binds no socket: `connect(protocol)` then hands out in-memory connections served
by the same pump (trio memory streams), for fast protocol tests and in-process tools.

Shutdown (SIGINT/SIGTERM or `request_shutdown()`): stop accepting; wake parked long-polls; close idle
connections; let connections that are in the middle of a request finish it, for at most
`shutdown_timeout_ms`; then cancel what is left, sync and close storage (shielded, time-bounded).

The admin listener (`listeners.admin`: metrics, probes, the console; `admin/`) starts first and stops last, so
`/health` answers while storage recovers and `/ready` says when the gateway can serve: `state` goes "starting" →
"ready" (storage open, every enabled listener bound) → "stopping" (shutdown asked) → "stopped".

`Gateway(config, worker=membership)` is one member of a cluster (`cluster/`): it makes a `cluster.seam.Cluster` of the
membership and hands it to the protocols through their `context.Context` (with one process, `worker=None`, there is
none). A member of `workers: N` (`cluster.workers.WorkerRole`) opens only its partitions, also serves its native and
TANK relay sockets (`cluster/relays.py`: the requests the others relay to it) and its hand-over socket
(`cluster/handover.py`: the client connections they give it), and is ready once the supervisor told it the other
workers' addresses.
"""

from __future__ import annotations

import logging
import math
import os
import resource
import signal
import socket
import time
from functools import partial
from time import perf_counter
from typing import TYPE_CHECKING

import trio

from logway.storage import CleanerSettings, EngineLimits, LogEngine
from logway.storage.openfiles import MIN_OPEN_FILES

from .admin.calls import CallCounter
from .admin.metrics import GatewayMetrics, RecoverySnapshot
from .admin.server import AdminServer
from .cleaning import LogCleaner
from .cluster.handover import listen_handover
from .cluster.relays import HANDOVER, SHARED
from .cluster.seam import Cluster
from .cluster.txn_peers import make_peers
from .config import Config
from .connections import ConnectionRegistry
from .context import Context
from .durability import GroupCommitter
from .flush import Flush
from .errors import running_out_line
from .formats import STORAGE_FORMATS
from .memory import MemoryBudget, default_memory_bytes, fix_mmap_threshold
from .listeners import listen, listen_cluster_relay, listen_relay, serve, warn_if_exposed
from .notify import AppendNotifier
from .offset_retention import OffsetRetention
from .protocols import REGISTRY, Protocol
from .security import Security, authentication_required
from .steps import Steps
from .tls import server_ssl_context
from .transactions import TransactionCoordinator
from .turns import Turns

if TYPE_CHECKING:  # pragma: no cover
    from .cluster.membership import Membership

log = logging.getLogger("logway.gateway")

#: The admin listener's key under `listeners` (it serves HTTP, not a wire protocol of `protocols.REGISTRY`).
ADMIN = "admin"
#: Descriptors the gateway needs besides its connections and segment files: listeners, the stores, relay and
#: hand-over sockets, directory syncs, temporary files, trio's own, readers holding a segment file let go.
RESERVED_DESCRIPTORS = 256
#: `limits.open_segment_files: 0` keeps at most this many open (what the descriptor limit leaves, when less):
#: enough for thousands of partitions being written and read at once; each costs kernel memory, and a frozen
#: segment's mapped index counts against the system's map count (vm.max_map_count, 65530 by default).
DERIVED_OPEN_FILES = 8192


#: `/ready` reports unready while fewer descriptors than this are left under RLIMIT_NOFILE: a connection, a segment
#: roll and a directory sync each need one, and the engine's budget of open files may be over-committed by readers
#: holding evicted files.
DESCRIPTORS_FREE = 64
#: How long `DescriptorWatch` trusts its last count (a probe or a scrape every few seconds costs one listing).
DESCRIPTOR_COUNT_S = 1.0


class DescriptorWatch:
    """Whether this process is running out of descriptors: its open descriptors (/proc/self/fd) counted at most
    once per `DESCRIPTOR_COUNT_S`, against the soft RLIMIT_NOFILE."""

    def __init__(self, free: int) -> None:
        self.free = free
        self.open = 0
        self._counted = -math.inf

    def running_out(self) -> bool:
        now = time.monotonic()
        if now - self._counted >= DESCRIPTOR_COUNT_S:
            self._counted = now
            try:
                self.open = len(os.listdir("/proc/self/fd"))
            except OSError:  # (no /proc: not counted)
                return False
        soft = resource.getrlimit(resource.RLIMIT_NOFILE)[0]
        return soft != resource.RLIM_INFINITY and self.open > soft - self.free


class Gateway:
    def __init__(self, config: Config, *, listen: bool = True, worker: "Membership | None" = None) -> None:
        self.config = config
        self.listen = listen
        pg = config.storage.postgres
        if worker is None and config.storage.backend == "postgres" and pg.cluster:
            from .cluster.leases import LeaseMembership  # (several gateways over one database)

            worker = LeaseMembership(pg.lease_ms, pg.cluster_name)
        self.worker = worker
        self._conn_nursery: trio.Nursery | None = None
        self.engine: LogEngine | None = None
        self.steps: Steps | None = None
        self.transactions: TransactionCoordinator | None = None
        self.offset_retention: OffsetRetention | None = None  # (where the offsets live)
        self.cleaner: LogCleaner | None = None
        self.security: Security | None = None  # users, ACLs and quotas, once storage is open
        #: (workers: N) This gateway as one member of several, once storage is open; None with one process.
        self.cluster: Cluster | None = None
        #: What the protocols are given of this gateway, once storage is open.
        self.context: Context | None = None
        self.protocols: dict[str, Protocol] = {}
        self.notifier = AppendNotifier(config.limits.max_waiters)
        per_pass = config.limits.data_requests_per_pass
        self.turns = Turns(per_pass, config.limits.data_pass_ms) if per_pass else None
        self.committer = GroupCommitter(on_synced=self._synced)
        self.memory = MemoryBudget(config.limits.memory_bytes or default_memory_bytes())
        self.descriptors = DescriptorWatch(DESCRIPTORS_FREE)
        self.connections = ConnectionRegistry(config.limits.max_connections, config.limits.max_connections_per_ip)
        self.addresses: dict[str, tuple[str, int]] = {}
        self._shutdown = trio.Event()
        # One TLS context per client-certificate policy the listeners ask for (ConfigError before any I/O).
        self._ssl_contexts = {lc.tls_client_auth: server_ssl_context(config.tls, lc.tls_client_auth)
                              for lc in config.listeners.values() if lc.enabled and lc.tls}
        self.state = "starting"  # → "ready" → "stopping" → "stopped" (see the module docstring)
        self.storage_open = False
        self.metrics = GatewayMetrics(self)
        admin = config.listeners.get(ADMIN)
        self.admin = AdminServer(self) if admin is not None and admin.enabled else None

    def ssl_context_for(self, lc):
        """The TLS context of the listener configured as `lc` (None: it serves plain TCP)."""
        return self._ssl_contexts[lc.tls_client_auth] if lc.enabled and lc.tls else None

    @property
    def ready(self) -> bool:
        """Storage is open and every enabled listener bound, no shutdown was asked, and neither the memory budget
        nor the descriptors are running out (`/ready`)."""
        return self.state == "ready" and not self.memory.exhausted and not self.descriptors.running_out()

    def _synced(self, target) -> None:
        if self.steps is not None:
            self.steps.synced(target)

    def request_shutdown(self) -> None:
        if self.state != "stopped":
            self.state = "stopping"
        self._shutdown.set()

    async def run(self, *, handle_signals: bool = False, task_status=trio.TASK_STATUS_IGNORED) -> None:
        calls = self.metrics.calls = CallCounter() if self.config.count_calls else None  # a benchmark aid
        if calls is not None:
            calls.start()
        async with trio.open_nursery() as admin:
            if self.admin is not None and self.listen:
                addr = self.addresses[ADMIN] = await admin.start(self.admin.serve)
                lc = self.config.listeners[ADMIN]
                log.info("admin listening on http%s://%s:%d (/metrics, /health, /ready, the console at /)",
                         "s" if lc.tls else "", addr[0], addr[1])
                warn_if_exposed(ADMIN, lc.host, logins=authentication_required(self.config), tls=lc.tls)
            elif self.admin is not None:
                admin.start_soon(self.admin.sampler.run)
            try:
                await self._run(handle_signals, task_status)
            finally:
                self.state = "stopped"
                admin.cancel_scope.cancel()
                if calls is not None:
                    calls.stop()

    async def _run(self, handle_signals: bool, task_status) -> None:
        cfg = self.config
        fix_mmap_threshold()  # (resident memory then follows the memory budget)
        limits = cfg.limits
        engine_limits = EngineLimits(open_segment_files=descriptor_budget(limits.max_connections,
                                                                          limits.open_segment_files),
                                     max_topics=limits.max_topics,
                                     max_partitions_per_topic=limits.max_partitions_per_topic,
                                     max_partitions=limits.max_partitions)
        flush = effective_flush(cfg)
        share = self.worker.share if self.worker is not None else None
        leases = getattr(self.worker, "leases", None)
        self.engine = await trio.to_thread.run_sync(lambda: open_engine(cfg, flush, share, engine_limits, leases))
        self.committer.sync_all = self.engine.sync_many  # (postgres: a round is one transaction)
        self.storage_open = True
        self._log_recovery()
        self.steps = Steps(self.engine, self.notifier, self.committer, flush,
                           transcode_cache_bytes=cfg.storage.transcode_cache_bytes)
        self.security = Security(cfg, self.engine.security, self.steps.in_thread)
        for note in self.security.notes():
            log.info("%s", note)
        self.steps.on_append = self.metrics.on_append
        self.steps.on_read = self.metrics.on_read
        kc = cfg.kafka
        self.transactions = TransactionCoordinator(self.engine, self.steps,
                                                   max_timeout_ms=kc.transaction_max_timeout_ms,
                                                   check_interval_ms=kc.transaction_abort_check_ms,
                                                   expiration_ms=kc.transactional_id_expiration_ms)
        worker = self.worker
        if worker is not None:
            self.cluster = Cluster(worker, self.engine, cfg)
            native = cfg.listeners.get("native")
            native_on = native is not None and native.enabled
            if (self.cluster.several or worker.dynamic) and native_on:
                # transactions across members: requests to the others over their native relay sockets
                self.transactions.peers = make_peers(self.cluster)
            worker.on_coordinating.append(self.transactions.take_over)
        self.context = Context(cfg, self.steps, self.memory, self.turns, self.security,
                               self.transactions, self.metrics.protocol, self.cluster, self.protocols)
        recovered = await trio.to_thread.run_sync(self.transactions.recover)
        self.metrics.recovery = RecoverySnapshot(self.engine, {"completed": recovered["completed"],
                                                              "ended": recovered["orphans"]})
        if any(recovered.values()):
            log.warning("transactions: completed %d interrupted, ended %d left open in partitions",
                        recovered["completed"], recovered["orphans"])
        for name, lc in cfg.listeners.items():
            if not lc.enabled or name == ADMIN:
                continue
            if name not in REGISTRY:
                log.warning("listener %s is configured but not implemented; not started", name)
                continue
            self.protocols[name] = REGISTRY[name](self.context)
            self.metrics.protocol(name)  # its counters exist (at 0) from the start
        try:
            async with trio.open_nursery() as background:
                background.start_soon(self.committer.run)
                background.start_soon(self.transactions.run)
                for protocol in self.protocols.values():
                    background.start_soon(protocol.run)
                if flush == Flush.INTERVAL:
                    background.start_soon(self._flush_loop)
                background.start_soon(self._retention_loop)
                storage = cfg.storage
                self.cleaner = LogCleaner(self.engine, interval_ms=storage.cleaner_check_interval_ms,
                                          bytes_per_second=storage.cleaner_io_bytes_per_second,
                                          settings=CleanerSettings(storage.cleaner_dedupe_buffer_bytes,
                                                                   cfg.kafka.producer_id_expiration_ms))
                background.start_soon(self.cleaner.run)
                if self.engine.offsets is not None and (self.cluster is None or self.cluster.is_coordinator
                                                        and not self.worker.dynamic):  # (a coordinator that stays)
                    self.offset_retention = OffsetRetention(self.engine.offsets, cfg.storage.offsets_retention_ms,
                                                            self._kafka_active_groups)
                    background.start_soon(self.offset_retention.run)
                if self.turns is not None:
                    background.start_soon(self.turns.run)
                limits = cfg.limits
                background.start_soon(self.connections.enforce_timeouts,
                                      min(limits.idle_timeout_ms, limits.request_timeout_ms) / 1000)
                if handle_signals:
                    background.start_soon(self._signal_loop)
                if self.worker is not None:
                    background.start_soon(self.worker.run, self)
                    if self.engine.security is not None and self.engine.security.read_only:  # (worker 0 writes it)
                        background.start_soon(self.security.follow, cfg.worker_refresh_ms / 1000,
                                              self.steps.in_thread)
                async with trio.open_nursery() as conn_nursery:
                    self._conn_nursery = conn_nursery
                    async with trio.open_nursery() as listeners:
                        for name, protocol in self.protocols.items():
                            if self.listen:
                                await self._start_listener(listeners, conn_nursery, protocol, cfg.listeners[name])
                                if self.worker is not None and name in self.worker.entries:
                                    await self._start_entry(listeners, conn_nursery, protocol, cfg.listeners[name],
                                                            self.worker.entries[name])
                                if self.worker is not None and name in self.worker.relay_fds:  # the others'
                                    await listeners.start(listen_relay, protocol,  # relays to it
                                                          socket.socket(fileno=self.worker.relay_fds[name]),
                                                          self.connections, cfg.limits, conn_nursery)
                        if self.listen and self.worker is not None and HANDOVER in self.worker.relay_fds:
                            await listeners.start(listen_handover,  # the connections the others give it
                                                  socket.socket(fileno=self.worker.relay_fds[HANDOVER]),
                                                  self.protocols, self.connections, cfg.limits, conn_nursery)
                        if self.listen and self.worker is not None and self.worker.relay_secret is not None:
                            await self._start_cluster_relay(listeners, conn_nursery)
                        if self.worker is not None:  # the other workers' addresses (a Kafka broker each)
                            await self.worker.join(self)
                            if self.transactions.peers is not None:  # what the start left to the others
                                background.start_soon(self.transactions.settle)
                        if not self._shutdown.is_set():
                            self.state = "ready"
                        task_status.started(dict(self.addresses))
                        await self._shutdown.wait()
                        self.state = "stopping"
                        log.info("shutting down: no new connections")
                        listeners.cancel_scope.cancel()
                    await self._drain(conn_nursery)
                background.cancel_scope.cancel()
        finally:
            self.state = "stopping"
            with trio.CancelScope(shield=True):
                with trio.move_on_after(max(cfg.shutdown_timeout_ms / 1000, 1) + 30):
                    self.storage_open = False
                    await trio.to_thread.run_sync(self.engine.close)
                    if self.engine.close_error is None:
                        log.info("storage flushed and closed")
                    else:
                        log.error("storage closed, not all of it durable (the next start recovers the logs as after "
                                  "a crash): %s", running_out_line(self.engine.close_error, cfg.data_dir))

    async def _start_cluster_relay(self, listeners: trio.Nursery, conn_nursery: trio.Nursery) -> None:
        """(A gateway of a cluster over one database) bind the TCP socket where the other gateways relay native and
        TANK requests (`storage.postgres.relay_host`, `relay_port`), and tell them where it is."""
        pg = self.config.storage.postgres
        kafka = self.protocols.get("kafka")
        advertised = kafka.broker.advertised[0] if kafka is not None else "127.0.0.1"
        host = pg.relay_host or advertised
        relayed = {name: p for name, p in self.protocols.items() if name in SHARED}
        bound = await listeners.start(listen_cluster_relay, relayed, host, pg.relay_port, self.worker.relay_secret,
                                      self.connections, self.config.limits, conn_nursery)
        told = bound[0] if bound[0] not in ("0.0.0.0", "::") else advertised
        self.worker.relaying_at(told, bound[1])
        log.info("cluster: relay socket on %s:%d", bound[0], bound[1])

    async def _start_listener(self, listeners: trio.Nursery, conn_nursery: trio.Nursery, protocol: Protocol,
                              lc) -> None:
        ssl_context = self.ssl_context_for(lc)
        addr = await listeners.start(listen, protocol, lc, self.connections, self.config.limits, ssl_context,
                                     conn_nursery)
        self.addresses[protocol.name] = addr
        protocol.listening(addr)
        log.info("%s protocol listening on %s:%d%s", protocol.name, addr[0], addr[1], " (TLS)" if lc.tls else "")
        for level, message in protocol.security_notes():
            log.log(level, "%s", message)
        warn_if_exposed(protocol.name, lc.host)

    async def _start_entry(self, listeners: trio.Nursery, conn_nursery: trio.Nursery, protocol: Protocol, lc,
                           fd: int) -> None:
        """(workers: N) Serve this worker's socket on the port every worker shares (`cluster.workers.entry_sockets`):
        the same protocol as the worker's own listener, which relays what other workers own."""
        ssl_context = self.ssl_context_for(lc)
        addr = await listeners.start(partial(listen, bound=socket.socket(fileno=fd)), protocol, lc, self.connections,
                                     self.config.limits, ssl_context, conn_nursery)
        log.info("%s protocol also serves the workers' shared port %s:%d", protocol.name, addr[0], addr[1])

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
        stats = self.committer.stats
        while True:
            await trio.sleep(interval)
            started = perf_counter()
            try:
                await trio.to_thread.run_sync(self.engine.sync)
            except OSError as exc:
                log.error("interval flush failed: %s", running_out_line(exc, self.config.data_dir))
                stats.synced("interval", perf_counter() - started, ok=False)
            else:
                stats.synced("interval", perf_counter() - started)

    async def _retention_loop(self) -> None:
        interval = self.config.storage.retention_check_interval_ms / 1000
        while True:
            await trio.sleep(interval)
            try:
                deleted = await trio.to_thread.run_sync(self.engine.enforce_retention)
            except OSError as exc:  # (out of descriptors, an I/O error): the next run tries again
                log.error("retention failed: %s", running_out_line(exc, self.config.data_dir))
                continue
            if deleted:
                log.info("retention deleted %d segment(s)", deleted)

    def _kafka_active_groups(self) -> set[str]:
        kafka = self.protocols.get("kafka")
        return kafka.broker.groups.active() if kafka is not None else set()

    async def _signal_loop(self) -> None:
        with trio.open_signal_receiver(signal.SIGINT, signal.SIGTERM) as signals:
            async for signum in signals:
                log.info("received %s", signal.Signals(signum).name)
                self.request_shutdown()

    def _log_recovery(self) -> None:
        engine = self.engine
        if not engine.clean_start:
            log.warning("the previous run did not shut down cleanly; logs were recovered")
        reports = engine.recovery_reports()
        for (topic, partition), report in reports.items():
            if report.truncated_bytes or report.segments_dropped:
                log.warning("recovery of %s-%d truncated %d bytes and dropped %d segment(s)", topic, partition,
                            report.truncated_bytes, report.segments_dropped)
        # One line per start, whatever happened: what was opened and what recovery had to do.
        log.info("storage opened (%s start): %d topic(s), %d partition(s); recovery truncated %d bytes, dropped "
                 "%d segment(s), rebuilt the indexes of %d segment(s)",
                 "clean" if engine.clean_start else "unclean", len(engine.topics_by_name), len(reports),
                 sum(r.truncated_bytes for r in reports.values()), sum(r.segments_dropped for r in reports.values()),
                 sum(r.indexes_rebuilt for r in reports.values()))


def effective_flush(cfg: Config) -> Flush:
    """`storage.flush`, except with the postgres backend: every write is acknowledged once committed (`always`)."""
    return Flush.ALWAYS if cfg.storage.backend == "postgres" else cfg.storage.flush


def open_engine(cfg: Config, flush: Flush, share, limits: EngineLimits, leases=None):
    """The storage engine `storage.backend` names (blocking: run it in a worker thread); `leases`: the database's
    side of a `cluster.leases.LeaseMembership`."""
    storage = cfg.storage
    if storage.backend == "postgres":
        return open_database(cfg, limits=limits, leases=leases)
    return LogEngine(cfg.data_dir, STORAGE_FORMATS, storage.topic_defaults, reads_need_sync=flush == Flush.ALWAYS,
                     share=share, limits=limits)


def open_database(cfg: Config, **options):
    """The `PgEngine` of `storage.postgres` (blocking); `options` go to it over the configuration's (`limits`,
    `cache_bytes`, `migrating`)."""
    from logway.storage.pg import PgEngine, conninfo  # (the driver is loaded only for this backend)

    pg = cfg.storage.postgres
    settings = dict(schema=pg.schema, data_dir=cfg.data_dir, pool_size=pg.pool_size,
                    statement_timeout_ms=pg.statement_timeout_ms, connect_timeout_ms=pg.connect_timeout_ms,
                    commit_retry_ms=pg.commit_retry_ms, cache_bytes=pg.cache_bytes)
    return PgEngine(conninfo(pg.dsn, host=pg.host, port=pg.port, dbname=pg.dbname, user=pg.user, password=pg.password),
                    STORAGE_FORMATS, cfg.storage.topic_defaults, **(settings | options))


def descriptor_budget(max_connections: int, open_segment_files: int) -> int:
    """How many segment files may be open (`limits.open_segment_files`, or with 0 what the descriptor limit leaves
    after the connections and RESERVED_DESCRIPTORS, at most DERIVED_OPEN_FILES), after raising the soft descriptor
    limit to the hard one. When the limit is below what the connections, the segment files and the reserve need,
    one warning line says so and what to do (the gateway runs all the same: segment files are closed sooner, and
    connections past what is left cannot be accepted)."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    target = hard if hard != resource.RLIM_INFINITY else max(soft, 65536)
    if soft < target:
        try:
            resource.setrlimit(resource.RLIMIT_NOFILE, (target, hard))
            soft = target
        except (ValueError, OSError):
            pass
    files = open_segment_files or min(DERIVED_OPEN_FILES,
                                      max(MIN_OPEN_FILES, soft - max_connections - RESERVED_DESCRIPTORS))
    need = max_connections + files + RESERVED_DESCRIPTORS
    if soft < need:
        log.warning("descriptor limit: this process may have %d files open (RLIMIT_NOFILE, ulimit -n; hard limit "
                    "%s), fewer than limits.max_connections (%d) + limits.open_segment_files (%d) + %d for the rest "
                    "need: raise the limit (LimitNOFILE= in a systemd unit, ulimit -n) or lower those limits; until "
                    "then connections past what is left cannot be accepted", soft,
                    "unlimited" if hard == resource.RLIM_INFINITY else hard, max_connections, files,
                    RESERVED_DESCRIPTORS)
    return files
