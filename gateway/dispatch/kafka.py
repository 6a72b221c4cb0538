"""Dispatch for the Kafka wire protocol: `KafkaDispatch.handle(request, conn) -> response body | None`.

Maps every supported API onto storage, the shared offset store, the group coordinator and the idempotent-
producer state. This broker is node 0 and the controller; every partition's leader is node 0.
"""

from __future__ import annotations

import hashlib
import logging
import time

import trio

from logway.codecs.kafka import legacy
from logway.codecs.kafka.api import admin as A
from logway.codecs.kafka.api import api_versions as V
from logway.codecs.kafka.api import fetch as F
from logway.codecs.kafka.api import groups as G
from logway.codecs.kafka.api import list_offsets as L
from logway.codecs.kafka.api import metadata as M
from logway.codecs.kafka.api import offsets as O
from logway.codecs.kafka.api import produce as P
from logway.codecs.kafka.api.registry import SUPPORTED
from logway.codecs.kafka.error_codes import ErrorCode as E
from logway.codecs.kafka.records import BATCH_HEADER_SIZE, iter_batches, parse_header
from logway.codecs.errors import RecordFormatError
from logway.storage.offsets import MAX_METADATA_BYTES
from logway.storage import (BatchTooLarge, CorruptBatch, InvalidConfig, InvalidPartitions, InvalidTopicName,
                            OffsetOutOfRange, PartitionLog, StorageError, TopicExists, UnknownFormat,
                            UnknownPartition, UnknownTopic, validate_topic_name)

from .. import transcode
from ..groups import GroupCoordinator
from ..producers import BatchSeq, ProducerStates
from .core import INLINE_READ_BYTES, Dispatcher

log = logging.getLogger("logway.gateway.kafka")

NODE_ID = 0
CLUSTER_ID = "logway"
#: Kafka's "no offset" / "no timestamp".
NO_OFFSET = -1
LATEST = -1
EARLIEST = -2
#: Fetch bounds applied to client values (a client may ask for up to 2 GiB).
MAX_FETCH_WAIT_MS = 60_000


class KafkaDispatch:
    def __init__(self, core: Dispatcher, coordinator: GroupCoordinator, advertised: tuple[str, int]) -> None:
        self.core = core
        self.engine = core.engine
        self.config = core.config
        self.coordinator = coordinator
        self.advertised = advertised
        self.producers = ProducerStates()
        self._handlers = {
            0: self._produce, 1: self._fetch, 2: self._list_offsets, 3: self._metadata, 8: self._offset_commit,
            9: self._offset_fetch, 10: self._find_coordinator, 11: self._join_group, 12: self._heartbeat,
            13: self._leave_group, 14: self._sync_group, 15: self._describe_groups, 16: self._list_groups,
            18: self._api_versions, 19: self._create_topics, 20: self._delete_topics, 22: self._init_producer_id,
        }

    async def handle(self, request, conn):
        handler = self._handlers[request.api_key]
        return await handler(request.body, request.api_version, conn)

    # -- ApiVersions -------------------------------------------------------------------------------------
    async def _api_versions(self, body, version, conn):
        keys = [V.ApiVersion(api_key=k, min_version=lo, max_version=hi) for k, (lo, hi) in sorted(SUPPORTED.items())]
        return V.ApiVersionsResponse(error_code=E.NONE, api_keys=keys, throttle_time_ms=0)

    # -- Metadata ----------------------------------------------------------------------------------------
    def _broker(self):
        host, port = self.advertised
        return M.MetadataResponseBroker(node_id=NODE_ID, host=host, port=port, rack=None)

    async def _metadata(self, body, version, conn):
        engine = self.engine
        if body.topics is None or (version == 0 and not body.topics):
            names = [t.name for t in engine.topics()]
        else:
            names = [t.name for t in body.topics]
        allow_create = self.config.kafka.auto_create_topics and (version < 4 or body.allow_auto_topic_creation)
        topics = []
        for name in names:
            topic = engine.topics_by_name.get(name)
            if topic is None:
                error = E.UNKNOWN_TOPIC_OR_PARTITION
                try:
                    validate_topic_name(name)
                    if allow_create:
                        topic = await trio.to_thread.run_sync(
                            engine.create_topic, name, self.config.kafka.default_partitions)
                except InvalidTopicName:
                    error = E.INVALID_TOPIC_EXCEPTION
                except TopicExists:
                    topic = engine.topics_by_name.get(name)
                if topic is None:
                    topics.append(M.MetadataResponseTopic(error_code=error, name=name, is_internal=False,
                                                          partitions=[]))
                    continue
            parts = [M.MetadataResponsePartition(error_code=E.NONE, partition_index=p, leader_id=NODE_ID,
                                                 leader_epoch=0, replica_nodes=[NODE_ID], isr_nodes=[NODE_ID],
                                                 offline_replicas=[])
                     for p in range(len(topic.partitions))]
            topics.append(M.MetadataResponseTopic(error_code=E.NONE, name=topic.name, is_internal=False,
                                                  partitions=parts))
        return M.MetadataResponse(throttle_time_ms=0, brokers=[self._broker()], cluster_id=CLUSTER_ID,
                                  controller_id=NODE_ID, topics=topics)

    # -- Produce -----------------------------------------------------------------------------------------
    async def _produce(self, body, version, conn):
        if body.acks not in (0, 1, -1):
            return self._produce_errors(body, E.INVALID_REQUIRED_ACKS)
        durable = body.acks == -1
        responses = []
        for td in body.topic_data:
            parts = []
            for pd in td.partition_data:
                parts.append(await self._produce_partition(td.name, pd.index, pd.records, durable))
            responses.append(P.TopicProduceResponse(name=td.name, partition_responses=parts))
        if body.acks == 0:
            return None
        return P.ProduceResponse(responses=responses, throttle_time_ms=0)

    def _produce_errors(self, body, code):
        if body.acks == 0:
            return None
        return P.ProduceResponse(throttle_time_ms=0, responses=[
            P.TopicProduceResponse(name=td.name, partition_responses=[
                P.PartitionProduceResponse(index=pd.index, error_code=code, base_offset=NO_OFFSET,
                                           log_append_time_ms=-1, log_start_offset=-1)
                for pd in td.partition_data])
            for td in body.topic_data])

    async def _produce_partition(self, topic: str, partition: int, records, durable: bool):
        def answer(code, base=NO_OFFSET, start=-1, message=None):
            return P.PartitionProduceResponse(index=partition, error_code=code, base_offset=base,
                                              log_append_time_ms=-1, log_start_offset=start, error_message=message)

        try:
            plog = self.engine.partition(topic, partition)
        except (UnknownTopic, UnknownPartition):
            return answer(E.UNKNOWN_TOPIC_OR_PARTITION)
        if not records:
            return answer(E.CORRUPT_MESSAGE, message="empty record set")
        data = bytes(records) if not isinstance(records, bytes) else records
        try:
            if len(data) > 16 and data[16] < 2:  # legacy MessageSet (magic 0/1, Produce < 3): convert up
                data = legacy.message_set_to_batch(data, int(time.time() * 1000))
                if not data:
                    return answer(E.CORRUPT_MESSAGE, message="empty message set")
            headers = [parse_header(b) for b in iter_batches(data) if len(b) >= BATCH_HEADER_SIZE]
        except RecordFormatError as exc:
            return answer(E.CORRUPT_MESSAGE, message=str(exc))
        idempotent = [h for h in headers if h.producer_id >= 0]
        state = await self.producers.get(plog) if idempotent else None
        if state is not None:
            code, original = state.check(BatchSeq.of(idempotent[0]))
            if code != E.NONE:
                return answer(code, start=plog.log_start_offset)
            if original is not None:  # a retry of a batch already in the log: its original offset, no append
                return answer(E.NONE, base=original, start=plog.log_start_offset)
        if plog.config.format != "kafka":
            try:
                data = transcode.encode(plog.config.format, transcode.decode("kafka", data, first_offset=0,
                                                                             min_offset=0),
                                        now_ms=int(time.time() * 1000), max_batch_bytes=plog.config.max_batch_bytes)
            except RecordFormatError as exc:  # e.g. headers into a TANK topic: refused, never dropped
                return answer(E.INVALID_RECORD, message=f"topic {topic} ({plog.config.format} format): {exc}")
        try:
            result = self.core.append(plog, data)
        except CorruptBatch as exc:
            return answer(E.CORRUPT_MESSAGE, message=str(exc))
        except BatchTooLarge as exc:
            return answer(E.MESSAGE_TOO_LARGE, message=str(exc))
        except OSError as exc:  # e.g. disk full: nothing was appended, the client may retry
            log.error("append to %s-%d failed: %s", topic, partition, exc)
            return answer(E.KAFKA_STORAGE_ERROR, message=f"storage error: {exc.strerror or exc}")
        if state is not None:  # recorded before any wait, so a retry arriving meanwhile is recognised
            offset = result.base_offset
            for h in headers:
                if h.producer_id >= 0:
                    state.record(BatchSeq.of(h, offset))
                offset += h.last_offset_delta + 1
        if durable:
            try:
                await self.core.make_durable(plog)
            except OSError as exc:
                return answer(E.UNKNOWN_SERVER_ERROR, message=f"fdatasync failed: {exc.strerror or exc}")
        return answer(E.NONE, base=result.base_offset, start=plog.log_start_offset)

    # -- Fetch -------------------------------------------------------------------------------------------
    async def _fetch(self, body, version, conn):
        wait = min(max(body.max_wait_ms, 0), self.config.limits.max_wait_ms, MAX_FETCH_WAIT_MS) / 1000
        deadline = trio.current_time() + wait
        min_bytes = max(body.min_bytes, 0)
        max_bytes = body.max_bytes if version >= 3 and body.max_bytes > 0 else self.config.limits.max_fetch_bytes
        max_bytes = min(max_bytes, self.config.limits.max_fetch_bytes)
        keys = [(t.topic, p.partition) for t in body.topics for p in t.partitions]
        while True:
            responses, total = await self._fetch_once(body, version, max_bytes)
            if total >= min_bytes or wait <= 0 or trio.current_time() >= deadline or total < 0:
                break
            woken = await self.core.notifier.wait(keys, deadline)
            if not woken:
                responses, total = await self._fetch_once(body, version, max_bytes)
                break
        return F.FetchResponse(throttle_time_ms=0, error_code=E.NONE, session_id=0, responses=responses)

    async def _fetch_once(self, body, version, max_bytes):
        """Build the per-partition answers; total = record bytes included (-1 when an error must go out now)."""
        responses = []
        total = 0
        errors = False
        for t in body.topics:
            parts = []
            for p in t.partitions:
                pd = F.PartitionData(partition_index=p.partition, error_code=E.NONE, high_watermark=-1,
                                     last_stable_offset=-1, log_start_offset=-1, aborted_transactions=None,
                                     preferred_read_replica=-1, records=b"")
                parts.append(pd)
                try:
                    plog = self.engine.partition(t.topic, p.partition)
                except (UnknownTopic, UnknownPartition):
                    pd.error_code = E.UNKNOWN_TOPIC_OR_PARTITION
                    errors = True
                    continue
                end = plog.high_watermark
                pd.high_watermark = pd.last_stable_offset = end
                pd.log_start_offset = plog.log_start_offset
                pd.aborted_transactions = [] if version >= 4 else None
                budget = min(p.partition_max_bytes, max_bytes - total)
                if budget <= 0 and total > 0:
                    continue
                try:
                    rng = plog.read(p.fetch_offset, max(budget, 1))
                except OffsetOutOfRange:
                    pd.error_code = E.OFFSET_OUT_OF_RANGE
                    errors = True
                    continue
                if rng is None:
                    continue
                if rng.length > budget and total > 0:
                    continue  # only the first partition with data may exceed the limits (KIP-74)
                if plog.config.format == "kafka" and version >= 4:
                    pd.records = rng  # sent with os.sendfile, no decoding
                else:
                    try:
                        pd.records = await self._transcoded(plog, rng, p.fetch_offset, version)
                    except RecordFormatError as exc:  # stored records this answer cannot be built from
                        log.warning("fetch %s-%d at %d: cannot convert the stored records: %s", t.topic,
                                    p.partition, p.fetch_offset, exc)
                        pd.records = b""
                        pd.error_code = E.CORRUPT_MESSAGE
                        errors = True
                        continue
                total += len(pd.records) if isinstance(pd.records, bytes) else rng.length
            responses.append(F.FetchableTopicResponse(topic=t.topic, partitions=parts))
        return responses, (-1 if errors else total)

    async def _transcoded(self, plog: PartitionLog, rng, offset: int, version: int) -> bytes:
        data = await trio.to_thread.run_sync(rng.read) if rng.length > INLINE_READ_BYTES else rng.read()
        fmt = plog.config.format
        if fmt == "kafka" and version >= 4:
            return data
        records = transcode.decode(fmt, data, first_offset=rng.first_offset, min_offset=offset)
        if version >= 4:
            return transcode.encode_kafka(records)
        return legacy.encode_message_set(records, 1 if version >= 2 else 0, drop_headers=True)

    # -- ListOffsets -------------------------------------------------------------------------------------
    async def _list_offsets(self, body, version, conn):
        topics = []
        for t in body.topics:
            parts = []
            for p in t.partitions:
                r = L.ListOffsetsPartitionResponse(partition_index=p.partition_index, error_code=E.NONE,
                                                   timestamp=-1, offset=NO_OFFSET, leader_epoch=0,
                                                   old_style_offsets=[])
                parts.append(r)
                try:
                    plog = self.engine.partition(t.name, p.partition_index)
                except (UnknownTopic, UnknownPartition):
                    r.error_code = E.UNKNOWN_TOPIC_OR_PARTITION
                    continue
                if p.timestamp == LATEST:
                    offset = plog.high_watermark
                elif p.timestamp == EARLIEST:
                    offset = plog.log_start_offset
                else:
                    try:
                        found = await trio.to_thread.run_sync(self._record_at_timestamp, plog, p.timestamp)
                    except RecordFormatError as exc:
                        log.warning("ListOffsets %s-%d: cannot decode the stored records: %s", t.name,
                                    p.partition_index, exc)
                        r.error_code = E.CORRUPT_MESSAGE
                        continue
                    offset, r.timestamp = found if found is not None else (NO_OFFSET, -1)
                r.offset = offset
                r.old_style_offsets = [offset] if offset >= 0 else []
            topics.append(L.ListOffsetsTopicResponse(name=t.name, partitions=parts))
        return L.ListOffsetsResponse(throttle_time_ms=0, topics=topics)

    @staticmethod
    def _record_at_timestamp(plog: PartitionLog, timestamp: int) -> tuple[int, int] | None:
        """(offset, timestamp) of the first record whose timestamp is >= timestamp (runs in a worker thread)."""
        offset = plog.offset_for_timestamp(timestamp)
        if offset is None:
            return None
        rng = plog.read(offset, 1)
        records = transcode.decode(plog.config.format, rng.read(), first_offset=rng.first_offset,
                                   min_offset=offset) if rng else ()
        for rec in records:
            return rec.offset, rec.timestamp if rec.timestamp is not None else -1
        return offset, -1

    # -- offsets -----------------------------------------------------------------------------------------
    async def _offset_commit(self, body, version, conn):
        generation = body.generation_id_or_member_epoch if version >= 1 else -1
        code = self.coordinator.validate_commit(body.group_id, generation, body.member_id,
                                                body.group_instance_id) if body.group_id else E.INVALID_GROUP_ID
        offsets = self.engine.offsets
        topics = []
        wrote = False
        for t in body.topics:
            parts = []
            for p in t.partitions:
                err = code
                if err == E.NONE:
                    try:
                        self.engine.partition(t.name, p.partition_index)
                        offsets.commit(body.group_id, t.name, p.partition_index, p.committed_offset,
                                       p.committed_metadata or "")
                        wrote = True
                    except (UnknownTopic, UnknownPartition):
                        err = E.UNKNOWN_TOPIC_OR_PARTITION
                    except (StorageError, OSError) as exc:  # e.g. a full disk: not stored, retriable
                        log.error("offset commit for group %r failed: %s", body.group_id, exc)
                        err = E.COORDINATOR_NOT_AVAILABLE
                    except ValueError:  # what the offset store refuses to hold
                        if len((p.committed_metadata or "").encode("utf-8", "replace")) > MAX_METADATA_BYTES:
                            err = E.OFFSET_METADATA_TOO_LARGE
                        else:
                            err = E.INVALID_COMMIT_OFFSET_SIZE if p.committed_offset >= 0 else E.INVALID_REQUEST
                parts.append(O.OffsetCommitResponsePartition(partition_index=p.partition_index, error_code=err))
            topics.append(O.OffsetCommitResponseTopic(name=t.name, partitions=parts))
        if wrote and self.core.sync_acks:
            try:
                await self.core.committer.sync(offsets)
            except OSError:  # not durable: none of this request's commits is acknowledged
                for t in topics:
                    for p in t.partitions:
                        if p.error_code == E.NONE:
                            p.error_code = E.COORDINATOR_NOT_AVAILABLE
        return O.OffsetCommitResponse(throttle_time_ms=0, topics=topics)

    async def _offset_fetch(self, body, version, conn):
        offsets = self.engine.offsets
        if body.topics is None:
            by_topic: dict[str, list] = {}
            for (topic, partition), c in sorted(offsets.fetch_group(body.group_id).items()):
                by_topic.setdefault(topic, []).append(partition)
            wanted = sorted(by_topic.items())
        else:
            wanted = [(t.name, t.partition_indexes) for t in body.topics]
        topics = []
        for name, partitions in wanted:
            parts = []
            for p in partitions:
                c = offsets.fetch(body.group_id, name, p)
                parts.append(O.OffsetFetchResponsePartition(
                    partition_index=p, committed_offset=c.offset if c else NO_OFFSET, committed_leader_epoch=-1,
                    metadata=c.metadata if c else "", error_code=E.NONE))
            topics.append(O.OffsetFetchResponseTopic(name=name, partitions=parts))
        return O.OffsetFetchResponse(throttle_time_ms=0, topics=topics, error_code=E.NONE)

    # -- groups ------------------------------------------------------------------------------------------
    async def _find_coordinator(self, body, version, conn):
        host, port = self.advertised
        return G.FindCoordinatorResponse(throttle_time_ms=0, error_code=E.NONE, error_message=None,
                                         node_id=NODE_ID, host=host, port=port)

    async def _join_group(self, body, version, conn):
        if not body.group_id:
            return G.JoinGroupResponse(throttle_time_ms=0, error_code=E.INVALID_GROUP_ID, generation_id=-1,
                                       protocol_name="", leader="", member_id=body.member_id, members=[])
        rebalance_timeout = body.rebalance_timeout_ms if version >= 1 else body.session_timeout_ms
        result = await self.coordinator.join_group(
            body.group_id, body.member_id, body.group_instance_id if version >= 5 else None, body.protocol_type,
            [(p.name, p.metadata) for p in body.protocols], body.session_timeout_ms, rebalance_timeout,
            conn.client_id or "", conn.peer.rpartition(":")[0], version >= 4)
        return G.JoinGroupResponse(
            throttle_time_ms=0, error_code=result.error_code, generation_id=result.generation_id,
            protocol_name=result.protocol_name or "", leader=result.leader or "",
            member_id=result.member_id or "",
            members=[G.JoinGroupResponseMember(member_id=m, group_instance_id=i, metadata=md)
                     for m, i, md in result.members])

    async def _sync_group(self, body, version, conn):
        result = await self.coordinator.sync_group(
            body.group_id, body.generation_id, body.member_id, body.group_instance_id if version >= 3 else None,
            [(a.member_id, a.assignment) for a in body.assignments])
        return G.SyncGroupResponse(throttle_time_ms=0, error_code=result.error_code,
                                   assignment=result.assignment or b"")

    async def _heartbeat(self, body, version, conn):
        code = self.coordinator.heartbeat(body.group_id, body.generation_id, body.member_id,
                                          body.group_instance_id if version >= 3 else None)
        return G.HeartbeatResponse(throttle_time_ms=0, error_code=code)

    async def _leave_group(self, body, version, conn):
        if version >= 3:
            members = [(m.member_id, m.group_instance_id) for m in body.members]
        else:
            members = [(body.member_id, None)]
        code, codes = self.coordinator.leave_group(body.group_id, members)
        return G.LeaveGroupResponse(throttle_time_ms=0, error_code=code, members=[
            G.MemberResponse(member_id=m, group_instance_id=i, error_code=c) for (m, i), c in zip(members, codes)])

    async def _describe_groups(self, body, version, conn):
        groups = []
        for d in self.coordinator.describe_groups(body.groups):
            groups.append(G.DescribedGroup(
                error_code=d.error_code, group_id=d.group_id, group_state=d.state, protocol_type=d.protocol_type,
                protocol_data=d.protocol_name, authorized_operations=-2147483648,
                members=[G.DescribedGroupMember(member_id=m.member_id, group_instance_id=m.group_instance_id,
                                                client_id=m.client_id, client_host=m.client_host,
                                                member_metadata=m.metadata, member_assignment=m.assignment)
                         for m in d.members]))
        return G.DescribeGroupsResponse(throttle_time_ms=0, groups=groups)

    async def _list_groups(self, body, version, conn):
        return G.ListGroupsResponse(throttle_time_ms=0, error_code=E.NONE, groups=[
            G.ListedGroup(group_id=g, protocol_type=t) for g, t in self.coordinator.list_groups()])

    # -- admin -------------------------------------------------------------------------------------------
    async def _create_topics(self, body, version, conn):
        results = []
        for t in body.topics:
            code, message = await self._create_one(t, body.validate_only if version >= 1 else False)
            results.append(A.CreatableTopicResult(name=t.name, error_code=code, error_message=message))
        return A.CreateTopicsResponse(throttle_time_ms=0, topics=results)

    async def _create_one(self, t, validate_only: bool):
        partitions = self.config.kafka.default_partitions if t.num_partitions == -1 else t.num_partitions
        if t.assignments:
            partitions = len(t.assignments)
            if t.num_partitions != -1 or t.replication_factor != -1:
                return E.INVALID_REQUEST, "give either assignments or num_partitions/replication_factor, not both"
            if sorted(a.partition_index for a in t.assignments) != list(range(partitions)):
                return E.INVALID_REPLICA_ASSIGNMENT, "assigned partitions must be 0..n-1, each once"
            if any(set(a.broker_ids) - {NODE_ID} for a in t.assignments):
                return E.INVALID_REPLICATION_FACTOR, f"only broker {NODE_ID} exists"
        if t.replication_factor not in (-1, 1) and not t.assignments:
            return E.INVALID_REPLICATION_FACTOR, "replication factor must be 1 (this is a single broker)"
        configs = {c.name: c.value for c in t.configs}
        try:
            validate_topic_name(t.name)
            if t.name in self.engine.topics_by_name:
                raise TopicExists(t.name)
            if partitions < 1:
                raise InvalidPartitions(f"partition count {partitions} must be at least 1")
            self.engine.defaults.with_overrides(configs)
            if not validate_only:
                await trio.to_thread.run_sync(self.engine.create_topic, t.name, partitions, configs)
        except InvalidTopicName as exc:
            return E.INVALID_TOPIC_EXCEPTION, str(exc)
        except TopicExists:
            return E.TOPIC_ALREADY_EXISTS, f"topic '{t.name}' already exists"
        except InvalidPartitions as exc:
            return E.INVALID_PARTITIONS, str(exc)
        except (InvalidConfig, UnknownFormat) as exc:
            return E.INVALID_CONFIG, str(exc)
        except StorageError as exc:
            return E.UNKNOWN_SERVER_ERROR, str(exc)
        return E.NONE, None

    async def _delete_topics(self, body, version, conn):
        results = []
        for name in body.topic_names:
            code = E.NONE
            try:
                await trio.to_thread.run_sync(self.engine.delete_topic, name)
                self.producers.forget(name)
            except UnknownTopic:
                code = E.UNKNOWN_TOPIC_OR_PARTITION
            results.append(A.DeletableTopicResult(name=name, error_code=code))
        return A.DeleteTopicsResponse(throttle_time_ms=0, responses=results)

    async def _init_producer_id(self, body, version, conn):
        if body.transactional_id:
            # No transactions here: a transactional id only names a stable producer id (epoch 0), so a writer
            # that replays its batches under the same name (a retried Spark task) is recognised and not
            # appended twice. Clients that go on to use transactions fail at AddPartitionsToTxn (unsupported).
            return A.InitProducerIdResponse(throttle_time_ms=0, error_code=E.NONE,
                                            producer_id=stable_producer_id(body.transactional_id),
                                            producer_epoch=0)
        pid = await trio.to_thread.run_sync(self.engine.producer_ids.next_id)
        return A.InitProducerIdResponse(throttle_time_ms=0, error_code=E.NONE, producer_id=pid, producer_epoch=0)


#: Producer ids named by a transactional id live above this; allocated ids (logway.storage.sequences) stay below.
STABLE_ID_BASE = 2**62


def stable_producer_id(name: str) -> int:
    """The producer id a transactional id always maps to (a 62-bit hash, above every allocated id)."""
    digest = hashlib.blake2b(name.encode(), digest_size=8).digest()
    return STABLE_ID_BASE + int.from_bytes(digest, "big") % STABLE_ID_BASE
