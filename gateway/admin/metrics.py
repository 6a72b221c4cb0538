"""The gateway's Prometheus metrics: one `CollectorRegistry` per gateway (not prometheus_client's global one, so
several gateways can run in one process), exposed with prometheus_client's own text exposition.

Nothing here is on the request path. The counters live where the work happens, as plain attributes
(`stats.ProtocolStats` bumped by the pump, the connection registry's, the group committer's `SyncStats`, the
notifier's, the per-partition append counts below); `GatewayCollector.collect()` reads them, and the storage
engine's state (offsets, sizes, segments, committed offsets), when Prometheus scrapes — no counter lives in storage.

A scrape grows with the partitions and committed offsets, so it never holds the event loop in one go
(`exposition_in_steps`): the families are gathered on the loop (the state they read is the loop's) a slice at a
time — the collector yields `PAUSE` every `ROWS_PER_STEP` partitions or offsets, and the loop serves others there —
and the text is then written in a worker thread from what was gathered.

Metric names (prefix `logway_`) are listed in docs/metrics.md.
"""

from __future__ import annotations

import gc
import time
from typing import TYPE_CHECKING, Iterator

import trio

from prometheus_client import CollectorRegistry, GCCollector, PlatformCollector, ProcessCollector, generate_latest
from prometheus_client.exposition import CONTENT_TYPE_LATEST
from prometheus_client.metrics_core import CounterMetricFamily, GaugeMetricFamily, HistogramMetricFamily, Metric
from prometheus_client.registry import Collector

from logway.storage import AppendResult, PartitionLog

from .. import log_limits
from ..steps import Read
from ..cluster.relays import SHARED
from .calls import CallCounter
from .stats import CURRENT, Histogram, ProtocolStats

if TYPE_CHECKING:  # pragma: no cover
    from ..context import GatewayView

#: The admin listener's name in `listeners` and in the connection metrics.
ADMIN = "admin"

__all__ = ["CONTENT_TYPE", "GatewayMetrics", "RecoverySnapshot"]

CONTENT_TYPE = CONTENT_TYPE_LATEST
#: Partitions (or committed offsets) gathered for a scrape between two passes of the event loop: ~1–2 ms of work.
ROWS_PER_STEP = 200
#: What `GatewayCollector.steps()` yields where a scrape may let the event loop run.
PAUSE = object()


class _Gathered:
    """Families gathered already, as a registry for prometheus_client's `generate_latest`."""

    def __init__(self, families: list[Metric]) -> None:
        self.families = families

    def collect(self) -> Iterator[Metric]:
        return iter(self.families)


class RecoverySnapshot:
    """What the gateway's start found (kept for the metrics: it does not change afterwards)."""

    def __init__(self, engine, transactions: dict[str, int] | None = None) -> None:
        self.unclean = not engine.clean_start
        self.partitions = {key: (report.truncated_bytes, report.segments_dropped)
                           for key, report in engine.recovery_reports().items()}
        offsets = getattr(engine.offsets, "recovery", None)
        self.offsets_dropped_bytes = getattr(offsets, "bytes_dropped", 0) or 0
        self.transactions = dict(transactions or {})


class GatewayMetrics:
    """The metrics of one gateway: its protocols' traffic counters, per-partition append counts, and the registry
    Prometheus scrapes (`exposition()`)."""

    def __init__(self, gateway: GatewayView) -> None:
        self.gateway = gateway
        self.protocols: dict[str, ProtocolStats] = {}
        self.appends: dict[PartitionLog, list[int]] = {}  # plog -> [records, bytes]; pruned when scraped
        self.recovery: RecoverySnapshot | None = None
        self.calls: CallCounter | None = None  # counting function calls (a benchmark aid, `calls.py`), rarely on
        self.start_time = time.time()
        self.registry = CollectorRegistry(auto_describe=False)
        self.collectors = [GatewayCollector(self), ProcessCollector(registry=self.registry),
                           PlatformCollector(registry=self.registry),
                           GCCollector(registry=self.registry),  # python_gc_collections_total, ..._collected_total
                           GCCountCollector()]
        for collector in (self.collectors[0], self.collectors[-1]):
            self.registry.register(collector)

    def protocol(self, name: str) -> ProtocolStats:
        stats = self.protocols.get(name)
        if stats is None:
            stats = self.protocols[name] = ProtocolStats(name)
        return stats

    def on_append(self, plog: PartitionLog, result: AppendResult, size: int) -> None:
        """`Steps.on_append`: count an append for its partition and for the protocol of the connection."""
        records = result.last_offset - result.base_offset + 1
        counts = self.appends.get(plog)
        if counts is None:
            counts = self.appends[plog] = [0, 0]
        counts[0] += records
        counts[1] += size
        stats = CURRENT.get()
        if stats is not None:
            stats.records_in += records

    def on_read(self, read: Read, offset: int) -> None:
        """`Steps.on_read`: count the records read for the protocol of the connection that reads."""
        stats = CURRENT.get()
        if stats is not None:
            count = read.count
            stats.records_out += (count if count is not None else
                                  read.slice.end_offset - max(read.slice.first_offset, offset))

    def exposition(self) -> bytes:
        """The Prometheus text format of every metric (prometheus_client's `generate_latest`), in one go."""
        return generate_latest(self.registry)

    async def exposition_in_steps(self) -> bytes:
        """`exposition()` without holding the event loop: see the module docstring."""
        families: list[Metric] = []
        for collector in self.collectors:
            items = collector.steps() if isinstance(collector, GatewayCollector) else collector.collect()
            for item in items:
                if item is PAUSE:
                    await trio.lowlevel.checkpoint()
                else:
                    families.append(item)
        return await trio.to_thread.run_sync(generate_latest, _Gathered(families))

    def live_partitions(self) -> list[tuple[str, PartitionLog]]:
        """(format, partition) of every partition of the open engine; [] before storage opens or after it closed."""
        if not self.gateway.storage_open:
            return []
        return [(t.format, p) for t in self.gateway.engine.topics() for p in t.partitions]


class GCCountCollector(Collector):
    """The cyclic collector's state beside GCCollector's totals: `gc.get_count()` (generation 0: GC-tracked
    allocations minus deallocations since its last collection; 1 and 2: collections of the younger generation) and
    `gc.get_threshold()`. With `python_gc_collections_total` they give the net tracked allocations between two
    scrapes (what `logway bench requests` reports per request)."""

    def collect(self) -> Iterator[Metric]:
        count = GaugeMetricFamily("python_gc_count", "gc.get_count(): what counts towards each generation's next "
                                  "collection", labels=["generation"])
        threshold = GaugeMetricFamily("python_gc_threshold", "gc.get_threshold(): each generation's collection "
                                      "threshold", labels=["generation"])
        for generation, (n, limit) in enumerate(zip(gc.get_count(), gc.get_threshold())):
            count.add_metric([str(generation)], n)
            threshold.add_metric([str(generation)], limit)
        yield count
        yield threshold


def _histogram(name: str, doc: str, labels: list[str]) -> HistogramMetricFamily:
    return HistogramMetricFamily(name, doc, labels=labels)


def _add_histogram(family: HistogramMetricFamily, labels: list[str], hist: Histogram) -> None:
    family.add_metric(labels, hist.cumulative(), hist.sum)


class GatewayCollector(Collector):
    """Builds every `logway_*` family from the gateway's counters and its storage state, at scrape time."""

    def __init__(self, metrics: GatewayMetrics) -> None:
        self.metrics = metrics

    def collect(self) -> Iterator[Metric]:
        return (item for item in self.steps() if item is not PAUSE)

    def steps(self) -> Iterator[Metric]:
        """The families, with `PAUSE` between slices of the work that grows with the data."""
        m = self.metrics
        gw = m.gateway
        yield from self._requests(m)
        yield from self._connections(m, gw)
        notifier = gw.notifier
        yield GaugeMetricFamily("logway_long_polls_parked", "Fetches/consumes parked at the log end right now",
                                value=notifier.waiting)
        yield CounterMetricFamily("logway_long_polls", "Fetches/consumes that parked at the log end",
                                  value=notifier.parked)
        yield CounterMetricFamily("logway_long_polls_refused", "Long-polls answered at once because "
                                  "limits.max_waiters were parked", value=notifier.refused)
        budget = GaugeMetricFamily("logway_memory_budget_bytes", "The memory budget for requests and answers "
                                   "(limits.memory_bytes) and what is held of it now", labels=["what"])
        budget.add_metric(["limit"], gw.memory.limit)
        budget.add_metric(["used"], gw.memory.used)
        yield budget
        yield CounterMetricFamily("logway_memory_waits", "Requests that waited for memory (the budget was past its "
                                  "soft limit and their address held more than its share)", value=gw.memory.waits)
        files = gw.engine.files if gw.storage_open else None
        segment_files = GaugeMetricFamily("logway_segment_files", "Segment files (data, indexes) open now and the "
                                          "budget of them (limits.open_segment_files)", labels=["what"])
        segment_files.add_metric(["open"], len(files) if files is not None else 0)
        segment_files.add_metric(["limit"], files.limit if files is not None else 0)
        yield segment_files
        yield CounterMetricFamily("logway_segment_files_let_go", "Segment files closed because others were used "
                                  "since (the budget of open files)", value=files.let_go if files is not None else 0)
        turns = gw.turns
        yield CounterMetricFamily("logway_data_requests_deferred", "Produce/fetch/consume requests that waited for "
                                  "a later pass of the event loop (limits.data_requests_per_pass: the gateway was "
                                  "saturated)", value=turns.waited if turns is not None else 0)
        cache = gw.steps.transcoded if gw.steps is not None else None
        yield CounterMetricFamily("logway_transcoded_reads_shared", "Reads in another format than the stored one "
                                  "answered entirely with batches other readers had transcoded "
                                  "(storage.transcode_cache_bytes)", value=cache.hits if cache is not None else 0)
        yield CounterMetricFamily("logway_transcoded_reads", "Reads in another format than the stored one that "
                                  "decoded and encoded at least one batch",
                                  value=cache.misses if cache is not None else 0)
        yield CounterMetricFamily("logway_transcoded_batches", "Stored batches decoded and encoded for a reader of "
                                  "another format", value=cache.batches_decoded if cache is not None else 0)
        yield CounterMetricFamily("logway_transcoded_batches_shared", "Stored batches of a read in another format "
                                  "taken as another reader had transcoded them",
                                  value=cache.batches_shared if cache is not None else 0)
        yield from self._relays(gw)
        yield from self._security(gw.security)
        yield from self._expired(gw)
        yield from self._cleaner(gw.cleaner)
        yield from self._durability(gw.committer.stats)
        partitions = m.live_partitions()
        yield from self._partitions(m, partitions)
        yield from self._groups(gw, partitions)
        yield from self._recovery(m.recovery)
        yield GaugeMetricFamily("logway_ready", "1 once storage is open and every enabled listener is bound; 0 "
                                "while starting or shutting down, or while the memory budget is past its soft limit",
                                value=1 if gw.ready else 0)
        yield GaugeMetricFamily("logway_start_time_seconds", "When this gateway started (Unix time)",
                                value=m.start_time)
        suppressed = CounterMetricFamily("logway_log_lines_suppressed", "Log lines left out because their message "
                                         "was logged log_repeat_limit times in the last 10 s, per level",
                                         labels=["level"])
        left_out = log_limits.LIMITER.suppressed if log_limits.LIMITER is not None else {}
        for level in ("DEBUG", "INFO", "WARNING", "ERROR", "CRITICAL"):
            suppressed.add_metric([level], left_out.get(level, 0))
        yield suppressed
        if m.calls is not None:
            yield CounterMetricFamily("logway_python_calls", "Python and C function calls of the event loop's "
                                      "thread (only with count_calls: true, a benchmark aid)", value=m.calls.calls)

    @staticmethod
    def _security(security) -> Iterator[Metric]:
        """Refusals of the authorizer, per protocol, operation and resource type (`security.Authorizer.denied`), and
        the clients throttled by their quotas (`security.quotas.Quotas.throttled`)."""
        denied = CounterMetricFamily("logway_authorization_denied", "Operations refused by the ACLs, per protocol "
                                     "(the admin listener's included), operation and resource type",
                                     labels=["protocol", "operation", "resource_type"])
        for (protocol, operation, rtype), count in sorted(security.authorizer.denied.items() if security else ()):
            denied.add_metric([protocol, operation, rtype], count)
        yield denied
        throttled = CounterMetricFamily("logway_quota_throttles", "Requests that took a client past a quota (it was "
                                        "throttled), per quota key", labels=["quota"])
        for key, count in sorted(security.quotas.throttled.items() if security else ()):
            throttled.add_metric([key], count)
        yield throttled

    @staticmethod
    def _expired(gw) -> Iterator[Metric]:
        """State forgotten once idle for its expiry: producers' idempotence state of a partition, transactional
        ids, committed offsets."""
        expired = CounterMetricFamily("logway_expired", "Idle state forgotten: producer_states (of a partition, "
                                      "kafka.producer_id_expiration_ms), transactional_ids "
                                      "(kafka.transactional_id_expiration_ms), committed_offsets "
                                      "(storage.offsets_retention_ms)", labels=["what"])
        kafka = gw.protocols.get("kafka")
        expired.add_metric(["producer_states"], kafka.broker.producers.expired if kafka is not None else 0)
        expired.add_metric(["transactional_ids"], gw.transactions.expired if gw.transactions is not None else 0)
        retention = gw.offset_retention
        expired.add_metric(["committed_offsets"], retention.expired if retention is not None else 0)
        yield expired

    @staticmethod
    def _cleaner(cleaner) -> Iterator[Metric]:
        """The log cleaner of compacted topics (`gateway.cleaning`)."""
        def value(name: str):
            return getattr(cleaner, name) if cleaner is not None else 0

        yield GaugeMetricFamily("logway_cleaner_cleanable_bytes", "Bytes written to compacted partitions since they "
                                "were last cleaned, in what may be cleaned (durable frozen segments), at the cleaner's "
                                "last check", value=value("cleanable_bytes"))
        yield CounterMetricFamily("logway_cleaner_cleaned_bytes", "Bytes of segments the log cleaner rewrote",
                                  value=value("cleaned_bytes"))
        yield CounterMetricFamily("logway_cleaner_reclaimed_bytes", "Bytes the rewritten segments no longer take",
                                  value=value("reclaimed_bytes"))
        yield CounterMetricFamily("logway_cleaner_records_removed", "Records the log cleaner removed (superseded, "
                                  "tombstones past delete.retention.ms, aborted, without a key, markers)",
                                  value=value("records_removed"))
        yield CounterMetricFamily("logway_cleaner_cleanings", "Partitions the log cleaner cleaned",
                                  value=value("cleanings"))
        yield CounterMetricFamily("logway_cleaner_errors", "Cleanings (or checks) that failed: logged, the log left "
                                  "as it was, tried again at the next check", value=value("errors"))
        yield GaugeMetricFamily("logway_cleaner_last_run_timestamp_seconds", "When the log cleaner last finished "
                                "cleaning a partition (Unix time; 0: never since the start)", value=value("last_run"))

    @staticmethod
    def _relays(gw) -> Iterator[Metric]:
        """(workers: N) Requests this worker relayed to the partition's owner, those the owner did not answer, and
        the connections handed over."""
        relayed = CounterMetricFamily("logway_relayed_requests", "Requests (or parts of one) relayed to the worker "
                                      "that owns their partition (workers: N)", labels=["protocol"])
        failed = CounterMetricFamily("logway_relay_failures", "Relayed requests the owning worker did not answer "
                                     "(answered with an error)", labels=["protocol"])
        handed = CounterMetricFamily("logway_connections_handed_over", "Client connections this worker gave to the "
                                     "worker that owns their partitions (out), took from the others (in), or failed "
                                     "to give (refused: relayed instead) (workers: N)", labels=["protocol", "way"])
        for name, protocol in gw.protocols.items():
            forward = getattr(getattr(protocol, "handler", None), "forward", None)
            if forward is not None:
                relayed.add_metric([name], forward.relayed)
                failed.add_metric([name], forward.failed)
            hand_over = protocol.hand_over
            if hand_over is not None:
                for way, count in (("out", hand_over.given), ("in", hand_over.taken), ("refused", hand_over.refused)):
                    handed.add_metric([name, way], count)
        yield relayed
        yield failed
        yield handed

    # -- traffic -------------------------------------------------------------------------------------------------
    @staticmethod
    def _requests(m: GatewayMetrics) -> Iterator[Metric]:
        labels = ["protocol", "request"]
        requests = CounterMetricFamily("logway_requests", "Requests answered, per protocol and request type",
                                       labels=labels)
        errors = CounterMetricFamily("logway_request_errors", "Requests that failed as a whole (error answer, "
                                     "connection closed, handler crash; malformed requests as request=\"malformed\")",
                                     labels=labels)
        latency = _histogram("logway_request_duration_seconds", "From a request read to its answer written "
                             "(long-polls included)", labels)
        by_protocol = {name: CounterMetricFamily(f"logway_{name}", doc, labels=["protocol"]) for name, doc in (
            ("bytes_received", "Bytes received from clients"),
            ("bytes_sent", "Bytes sent to clients"),
            ("records_received", "Records appended by the protocol's clients"),
            ("records_sent", "Records read for the protocol's clients"))}
        for name in sorted(m.protocols):
            stats = m.protocols[name]
            for req in stats.all_requests():
                requests.add_metric([name, req.name], req.count)
                errors.add_metric([name, req.name], req.errors)
                _add_histogram(latency, [name, req.name], req.latency)
            by_protocol["bytes_received"].add_metric([name], stats.bytes_in)
            by_protocol["bytes_sent"].add_metric([name], stats.bytes_out)
            by_protocol["records_received"].add_metric([name], stats.records_in)
            by_protocol["records_sent"].add_metric([name], stats.records_out)
        yield requests
        yield errors
        yield latency
        yield from by_protocol.values()

    @staticmethod
    def _connections(m: GatewayMetrics, gw) -> Iterator[Metric]:
        registry = gw.connections
        names = sorted(set(gw.protocols) | set(registry.accepted) | set(registry.refused))
        open_now = registry.open_by_protocol()
        admin = gw.admin.connections if gw.admin is not None and ADMIN in gw.addresses else None
        gauge = GaugeMetricFamily("logway_connections_open", "Connections open now, per listener",
                                  labels=["listener"])
        accepted = CounterMetricFamily("logway_connections_accepted", "Connections accepted, per listener",
                                       labels=["listener"])
        refused = CounterMetricFamily("logway_connections_refused", "Connections refused (connection limits, "
                                      "shutdown), per listener", labels=["listener"])
        shed = CounterMetricFamily("logway_connections_shed", "Connections closed to make room for another client "
                                   "at the connection limit (idle or not yet authenticated ones of the address "
                                   "holding the most; admin: the one idle the longest), per listener",
                                   labels=["listener"])
        for name in names:
            gauge.add_metric([name], open_now.get(name, 0))
            accepted.add_metric([name], registry.accepted.get(name, 0))
            refused.add_metric([name], registry.refused.get(name, 0))
            shed.add_metric([name], registry.shed.get(name, 0))
        if admin is not None:
            gauge.add_metric(["admin"], admin.open)
            accepted.add_metric(["admin"], admin.accepted)
            refused.add_metric(["admin"], admin.refused)
            shed.add_metric(["admin"], admin.shed)
        yield gauge
        yield accepted
        yield refused
        yield shed
        # (bounded: one label value per open connection at most, names of at most 129 characters)
        software = GaugeMetricFamily("logway_client_software_connections", "Client connections open now per "
                                     "listener and client software (\"name/version\", as Kafka clients name theirs "
                                     "in ApiVersions v3+)", labels=["listener", "software"])
        for (name, client), count in sorted(registry.client_software().items()):
            software.add_metric([name, client], count)
        yield software
        if gw.cluster is not None:  # the other workers' relay connections to this one (not in the gauge above)
            relays = GaugeMetricFamily("logway_relay_connections_open", "Relay connections other workers hold to "
                                       "this one now, per listener (workers: N)", labels=["listener"])
            open_now = registry.open_by_protocol(internal=True)
            for name in sorted(set(gw.protocols) & set(SHARED)):
                relays.add_metric([name], open_now.get(name, 0))
            yield relays

    # -- durability ----------------------------------------------------------------------------------------------
    @staticmethod
    def _durability(stats) -> Iterator[Metric]:
        passes = CounterMetricFamily("logway_fsyncs", "Sync passes (a group-commit round or an interval flush; each "
                                     "fdatasyncs every partition and store it covers), per trigger",
                                     labels=["trigger"])
        failed = CounterMetricFamily("logway_fsync_failures", "Sync passes that failed (their writes were not "
                                     "acknowledged)", labels=["trigger"])
        seconds = _histogram("logway_fsync_duration_seconds", "How long a sync pass took", ["trigger"])
        for trigger in stats.TRIGGERS:
            passes.add_metric([trigger], stats.passes[trigger])
            failed.add_metric([trigger], stats.failed[trigger])
            _add_histogram(seconds, [trigger], stats.seconds[trigger])
        yield passes
        yield failed
        yield seconds
        batch = _histogram("logway_group_commit_batch_size", "Writers (produces, offset commits) acknowledged by "
                           "one group-commit round (storage.flush: always)", [])
        _add_histogram(batch, [], stats.batch)
        yield batch

    # -- storage -------------------------------------------------------------------------------------------------
    @staticmethod
    def _partitions(m: GatewayMetrics, partitions) -> Iterator[Metric]:
        labels = ["topic", "partition"]
        families = {name: GaugeMetricFamily(f"logway_{name}", doc, labels=labels) for name, doc in (
            ("log_start_offset", "The first offset a reader may ask for"),
            ("log_end_offset", "The offset the next append gets"),
            ("high_watermark", "The end of what readers see (with flush: always, the durable end)"),
            ("last_stable_offset", "Where committed-data readers stop (the oldest open transaction)"),
            ("log_size_bytes", "Bytes of the partition's segment files (or rows)"),
            ("log_segments", "Segment files of the partition (with the postgres backend: its rows)"))}
        appended = CounterMetricFamily("logway_records_appended", "Records appended since the gateway started",
                                       labels=labels)
        appended_bytes = CounterMetricFamily("logway_bytes_appended", "Bytes of batches appended since the "
                                             "gateway started", labels=labels)
        topics = GaugeMetricFamily("logway_topic_partitions", "Partitions of each topic (and its storage format)",
                                   labels=["topic", "format"])
        live = set()
        counted_topics: dict[str, tuple[str, int]] = {}
        for i, (fmt, plog) in enumerate(partitions, 1):
            if not i % ROWS_PER_STEP:
                yield PAUSE
            live.add(plog)
            key = [plog.topic, str(plog.partition)]
            families["log_start_offset"].add_metric(key, plog.log_start_offset)
            families["log_end_offset"].add_metric(key, plog.log_end_offset)
            families["high_watermark"].add_metric(key, plog.high_watermark)
            families["last_stable_offset"].add_metric(key, plog.last_stable_offset)
            families["log_size_bytes"].add_metric(key, plog.size_bytes)
            families["log_segments"].add_metric(key, plog.segment_count)
            counts = m.appends.get(plog, (0, 0))
            appended.add_metric(key, counts[0])
            appended_bytes.add_metric(key, counts[1])
            fmt_count = counted_topics.get(plog.topic, (fmt, 0))
            counted_topics[plog.topic] = (fmt, fmt_count[1] + 1)
        for gone in [plog for plog in m.appends if plog not in live]:  # deleted topics
            del m.appends[gone]
        for name, (fmt, count) in counted_topics.items():
            topics.add_metric([name, fmt], count)
        yield topics
        yield from families.values()
        yield appended
        yield appended_bytes

    @staticmethod
    def _groups(gw, partitions) -> Iterator[Metric]:
        labels = ["group", "topic", "partition"]
        committed = GaugeMetricFamily("logway_consumer_group_committed_offset", "A group's committed offset",
                                      labels=labels)
        lag = GaugeMetricFamily("logway_consumer_group_lag", "Records between a group's committed offset and the "
                                "partition's end (last stable offset)", labels=labels)
        members = GaugeMetricFamily("logway_consumer_group_members", "Members of a live Kafka group (type: "
                                    "classic, consumer (KIP-848) or share (KIP-932))",
                                    labels=["group", "state", "type"])
        if partitions:
            by_key = {(plog.topic, plog.partition): plog for _, plog in partitions}
            for i, row in enumerate(group_offsets(gw.engine, by_key), 1):
                if not i % ROWS_PER_STEP:
                    yield PAUSE
                key = [row["group"], row["topic"], str(row["partition"])]
                committed.add_metric(key, row["committed"])
                if row["lag"] is not None:
                    lag.add_metric(key, row["lag"])
        for group in kafka_groups(gw):
            members.add_metric([group.group_id, group.state, group.type], len(group.members))
        yield committed
        yield lag
        yield members

    @staticmethod
    def _recovery(snapshot: RecoverySnapshot | None) -> Iterator[Metric]:
        unclean = GaugeMetricFamily("logway_recovery_unclean", "1 when the previous run did not shut down cleanly "
                                    "(logs were recovered at start)")
        truncated = GaugeMetricFamily("logway_recovery_truncated_bytes", "Bytes recovery cut from a partition's "
                                      "log at start", labels=["topic", "partition"])
        dropped = GaugeMetricFamily("logway_recovery_segments_dropped", "Segments recovery dropped at start",
                                    labels=["topic", "partition"])
        offsets = GaugeMetricFamily("logway_recovery_offsets_dropped_bytes", "Bytes recovery cut from the "
                                    "committed-offset log at start")
        txns = GaugeMetricFamily("logway_recovery_transactions", "Transactions recovery finished at start: "
                                 "interrupted completions completed, transactions left open ended",
                                 labels=["outcome"])
        if snapshot is not None:
            unclean.add_metric([], 1 if snapshot.unclean else 0)
            for (topic, partition), (cut, segs) in sorted(snapshot.partitions.items()):
                truncated.add_metric([topic, str(partition)], cut)
                dropped.add_metric([topic, str(partition)], segs)
            offsets.add_metric([], snapshot.offsets_dropped_bytes)
            for outcome, count in sorted(snapshot.transactions.items()):
                txns.add_metric([outcome], count)
        yield unclean
        yield truncated
        yield dropped
        yield offsets
        yield txns


def kafka_groups(gw) -> list:
    """The live Kafka groups of every type (`group_types.GroupView`s: classic, consumer, share; none without a
    Kafka listener)."""
    directory = getattr(gw.protocols.get("kafka"), "groups", None)
    return [] if directory is None else directory.views()


def group_offsets(engine, partitions: dict[tuple[str, int], PartitionLog]) -> Iterator[dict]:
    """Every committed offset of the shared offset store, with its partition's end and the lag (None when the
    partition no longer exists): group, topic, partition, committed, end, lag, metadata, commit_time_ms."""
    store = engine.offsets
    for group in store.groups():
        for (topic, partition), c in sorted(store.fetch_group(group).items()):
            plog = partitions.get((topic, partition))
            end = None if plog is None else plog.last_stable_offset
            yield {"group": group, "topic": topic, "partition": partition, "committed": c.offset, "end": end,
                   "lag": None if end is None else max(end - c.offset, 0), "metadata": c.metadata,
                   "commit_time_ms": c.commit_time_ms}
