"""Dispatch: the one module where codec events meet storage calls.

Each protocol's requests are mapped to `LogEngine` / `PartitionLog` / `OffsetStore` calls, storage errors are
mapped to the protocol's own errors, and long-poll fetches park on the `AppendNotifier` until an append wakes
them. Durability follows the configured flush policy: with `flush: always`, a produce or commit is answered
only after the group-commit sync that covers it.
"""

from __future__ import annotations

import logging
import time

import trio

from logway.codecs.native import events as nev
from logway.storage import (BatchTooLarge, CorruptBatch, InvalidConfig, InvalidPartitions, InvalidTopicName,
                            LogEngine, OffsetOutOfRange, PartitionLog, StorageError, TopicExists, UnknownFormat,
                            UnknownPartition, UnknownTopic)

from . import transcode
from .config import Config
from .durability import GroupCommitter
from .notify import AppendNotifier, TooManyWaiters

log = logging.getLogger("logway.gateway")

#: Reads larger than this run in a worker thread so a cold read does not stall other connections.
INLINE_READ_BYTES = 4 * 1024 * 1024


class Dispatcher:
    def __init__(self, engine: LogEngine, notifier: AppendNotifier, committer: GroupCommitter, config: Config):
        self.engine = engine
        self.notifier = notifier
        self.committer = committer
        self.config = config
        self.sync_acks = config.storage.flush == "always"
        self._native = {
            nev.ProduceRequest: self._native_produce,
            nev.FetchRequest: self._native_fetch,
            nev.OffsetCommitRequest: self._native_commit,
            nev.OffsetFetchRequest: self._native_offset_fetch,
            nev.CreateTopicRequest: self._native_create_topic,
            nev.DeleteTopicRequest: self._native_delete_topic,
            nev.ListTopicsRequest: self._native_list_topics,
            nev.DescribeTopicRequest: self._native_describe_topic,
            nev.PingRequest: self._native_ping,
        }

    # -- shared storage steps ----------------------------------------------------------------------------
    async def append(self, plog: PartitionLog, data: bytes):
        """Append whole batches, wake long-polls, and (flush: always) wait for the covering sync."""
        result = plog.append(data)
        self.notifier.notify((plog.topic, plog.partition))
        if self.sync_acks:
            await self.committer.sync(plog)
        return result

    async def commit_offset(self, group: str, topic: str, partition: int, offset: int, metadata: str) -> None:
        self.engine.offsets.commit(group, topic, partition, offset, metadata)
        if self.sync_acks:
            await self.committer.sync(self.engine.offsets)

    # -- native protocol ---------------------------------------------------------------------------------
    async def native(self, event) -> object:
        handler = self._native.get(type(event))
        if handler is None:
            return nev.ErrorResponse(f"unsupported request: {type(event).__name__}")
        try:
            return await handler(event)
        except (UnknownTopic, UnknownPartition):
            return nev.ErrorResponse(
                f"partition not found: topic={event.topic}, partition={getattr(event, 'partition', 0)}")
        except OffsetOutOfRange as exc:
            return nev.ErrorResponse(f"offset out of range: offset={event.offset}, "
                                     f"log_start_offset={exc.log_start}, log_end_offset={exc.log_end}")
        except TopicExists:
            return nev.ErrorResponse(f"topic already exists: {event.topic}")
        except InvalidTopicName as exc:
            return nev.ErrorResponse(f"invalid topic name: {exc}")
        except (InvalidPartitions, InvalidConfig, UnknownFormat) as exc:
            return nev.ErrorResponse(f"invalid request: {exc}")
        except BatchTooLarge as exc:
            return nev.ErrorResponse(f"record too large: {exc}")
        except (CorruptBatch, StorageError) as exc:
            return nev.ErrorResponse(f"storage error: {exc}")
        except OSError as exc:
            log.error("I/O error serving %s: %s", type(event).__name__, exc)
            return nev.ErrorResponse(f"storage error: {exc.strerror or exc}")

    async def _native_produce(self, ev: nev.ProduceRequest):
        plog = self.engine.partition(ev.topic, ev.partition)
        if not ev.records:
            return nev.ProduceResponse([])
        data = transcode.encode(plog.config.format, ev.records, now_ms=int(time.time() * 1000),
                                max_batch_bytes=plog.config.max_batch_bytes)
        result = await self.append(plog, data)
        return nev.ProduceResponse(list(range(result.base_offset, result.last_offset + 1)))

    async def _native_fetch(self, ev: nev.FetchRequest):
        plog = self.engine.partition(ev.topic, ev.partition)
        start = ev.offset
        if ev.group_id is not None:
            committed = self.engine.offsets.fetch(ev.group_id, ev.topic, ev.partition)
            if committed is not None and committed.offset > start:
                start = committed.offset
        if start > plog.log_end_offset:
            return nev.FetchResponse([], plog.log_end_offset)
        limits = self.config.limits
        max_bytes = min(max(ev.max_bytes, 0), limits.max_fetch_bytes)
        wait = min(ev.max_wait_ms, limits.max_wait_ms) / 1000
        min_bytes = max(ev.min_bytes, 1)
        deadline = trio.current_time() + wait
        key = (ev.topic, ev.partition)
        while True:
            records, next_offset = await self._read_records(plog, start, max_bytes)
            got = sum(len(r.value or b"") for r in records)
            if wait <= 0 or (records and got >= min_bytes) or trio.current_time() >= deadline:
                break
            try:
                woken = await self.notifier.wait([key], deadline)
            except TooManyWaiters:
                break
            if not woken:
                records, next_offset = await self._read_records(plog, start, max_bytes)
                break
        return nev.FetchResponse(records, next_offset)

    async def _read_records(self, plog: PartitionLog, start: int, max_bytes: int):
        rng = plog.read(start, max_bytes)
        if rng is None:
            return [], plog.log_end_offset
        if rng.length > INLINE_READ_BYTES:
            data = await trio.to_thread.run_sync(rng.read)
        else:
            data = rng.read()
        records = transcode.decode(plog.config.format, data, min_offset=start)
        total = 0
        for i, rec in enumerate(records):
            total += len(rec.value or b"")
            if total > max_bytes and i > 0:
                del records[i:]
                break
        next_offset = records[-1].offset + 1 if records else rng.end_offset
        return records, next_offset

    async def _native_commit(self, ev: nev.OffsetCommitRequest):
        self.engine.partition(ev.topic, ev.partition)
        await self.commit_offset(ev.group_id, ev.topic, ev.partition, ev.offset, ev.metadata)
        return nev.OffsetCommitResponse(True)

    async def _native_offset_fetch(self, ev: nev.OffsetFetchRequest):
        self.engine.partition(ev.topic, ev.partition)
        committed = self.engine.offsets.fetch(ev.group_id, ev.topic, ev.partition)
        return nev.OffsetFetchResponse(committed.offset if committed is not None else None)

    async def _native_create_topic(self, ev: nev.CreateTopicRequest):
        await trio.to_thread.run_sync(self.engine.create_topic, ev.topic, ev.partitions)
        return nev.CreateTopicResponse(True)

    async def _native_delete_topic(self, ev: nev.DeleteTopicRequest):
        try:
            await trio.to_thread.run_sync(self.engine.delete_topic, ev.topic)
        except UnknownTopic:
            return nev.ErrorResponse(f"topic not found: {ev.topic}")
        return nev.DeleteTopicResponse(True)

    async def _native_list_topics(self, ev: nev.ListTopicsRequest):
        return nev.ListTopicsResponse([nev.TopicSummary(t.name, len(t.partitions)) for t in self.engine.topics()])

    async def _native_describe_topic(self, ev: nev.DescribeTopicRequest):
        try:
            topic = self.engine.topic(ev.topic)
        except UnknownTopic:
            return nev.ErrorResponse(f"topic not found: {ev.topic}")
        return nev.DescribeTopicResponse(topic.name, [
            nev.PartitionSummary(p.partition, p.log_start_offset, p.log_end_offset) for p in topic.partitions])

    async def _native_ping(self, ev: nev.PingRequest):
        return nev.PongResponse()
