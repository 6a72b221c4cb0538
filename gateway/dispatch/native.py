"""Dispatch for the native JSON protocol: `NativeDispatch.handle(event) -> response event`.

Storage errors become the seed's error texts (`partition not found: …`, `offset out of range: …`); a fetch at the
log end with `max_wait_ms` parks on the append notifier until enough payload arrived.
"""

from __future__ import annotations

import logging
import time

import trio

from logway.codecs.native import events as nev
from logway.storage import (BatchTooLarge, CorruptBatch, InvalidConfig, InvalidPartitions, InvalidTopicName,
                            OffsetOutOfRange, PartitionLog, StorageError, TopicExists, UnknownFormat,
                            UnknownPartition, UnknownTopic)

from .. import transcode
from .core import INLINE_READ_BYTES, Dispatcher

log = logging.getLogger("logway.gateway")


class NativeDispatch:
    def __init__(self, core: Dispatcher) -> None:
        self.core = core
        self.engine = core.engine
        self.config = core.config
        self._handlers = {
            nev.ProduceRequest: self._produce,
            nev.FetchRequest: self._fetch,
            nev.OffsetCommitRequest: self._commit,
            nev.OffsetFetchRequest: self._offset_fetch,
            nev.CreateTopicRequest: self._create_topic,
            nev.DeleteTopicRequest: self._delete_topic,
            nev.ListTopicsRequest: self._list_topics,
            nev.DescribeTopicRequest: self._describe_topic,
            nev.PingRequest: self._ping,
        }

    async def handle(self, event) -> object:
        handler = self._handlers.get(type(event))
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
        except transcode.RecordFormatError as exc:  # what the topic's format cannot carry: refused, not dropped
            return nev.ErrorResponse(f"invalid record: {exc}")
        except (CorruptBatch, StorageError) as exc:
            return nev.ErrorResponse(f"storage error: {exc}")
        except OSError as exc:
            log.error("I/O error serving %s: %s", type(event).__name__, exc)
            return nev.ErrorResponse(f"storage error: {exc.strerror or exc}")

    async def _produce(self, ev: nev.ProduceRequest):
        plog = self.engine.partition(ev.topic, ev.partition)
        if not ev.records:
            return nev.ProduceResponse([])
        data = transcode.encode(plog.config.format, ev.records, now_ms=int(time.time() * 1000),
                                max_batch_bytes=plog.config.max_batch_bytes)
        result = self.core.append(plog, data)
        await self.core.make_durable(plog)
        return nev.ProduceResponse(list(range(result.base_offset, result.last_offset + 1)))

    async def _fetch(self, ev: nev.FetchRequest):
        plog = self.engine.partition(ev.topic, ev.partition)
        start = ev.offset
        if ev.group_id is not None:
            committed = self.engine.offsets.fetch(ev.group_id, ev.topic, ev.partition)
            if committed is not None and committed.offset > start:
                start = committed.offset
        if start > plog.high_watermark:
            return nev.FetchResponse([], plog.high_watermark)
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
            if not await self.core.notifier.wait([key], deadline):
                records, next_offset = await self._read_records(plog, start, max_bytes)
                break
        return nev.FetchResponse(records, next_offset)

    async def _read_records(self, plog: PartitionLog, start: int, max_bytes: int):
        end = plog.high_watermark  # before the read: a sync in a worker thread may move it meanwhile
        rng = plog.read(start, max_bytes)
        if rng is None:
            return [], max(start, end)
        if rng.length > INLINE_READ_BYTES:
            data = await trio.to_thread.run_sync(rng.read)
        else:
            data = rng.read()
        records = transcode.decode(plog.config.format, data, first_offset=rng.first_offset, min_offset=start)
        total = 0
        for i, rec in enumerate(records):
            total += len(rec.value or b"")
            if total > max_bytes and i > 0:
                del records[i:]
                break
        next_offset = records[-1].offset + 1 if records else rng.end_offset
        return records, next_offset

    async def _commit(self, ev: nev.OffsetCommitRequest):
        self.engine.partition(ev.topic, ev.partition)
        try:
            await self.core.commit_offset(ev.group_id, ev.topic, ev.partition, ev.offset, ev.metadata)
        except ValueError as exc:  # what the offset store refuses to hold (empty or overlong group, metadata)
            return nev.ErrorResponse(f"invalid request: {exc}")
        return nev.OffsetCommitResponse(True)

    async def _offset_fetch(self, ev: nev.OffsetFetchRequest):
        self.engine.partition(ev.topic, ev.partition)
        committed = self.engine.offsets.fetch(ev.group_id, ev.topic, ev.partition)
        return nev.OffsetFetchResponse(committed.offset if committed is not None else None)

    async def _create_topic(self, ev: nev.CreateTopicRequest):
        await trio.to_thread.run_sync(self.engine.create_topic, ev.topic, ev.partitions)
        return nev.CreateTopicResponse(True)

    async def _delete_topic(self, ev: nev.DeleteTopicRequest):
        try:
            await trio.to_thread.run_sync(self.engine.delete_topic, ev.topic)
        except UnknownTopic:
            return nev.ErrorResponse(f"topic not found: {ev.topic}")
        return nev.DeleteTopicResponse(True)

    async def _list_topics(self, ev: nev.ListTopicsRequest):
        return nev.ListTopicsResponse([nev.TopicSummary(t.name, len(t.partitions)) for t in self.engine.topics()])

    async def _describe_topic(self, ev: nev.DescribeTopicRequest):
        try:
            topic = self.engine.topic(ev.topic)
        except UnknownTopic:
            return nev.ErrorResponse(f"topic not found: {ev.topic}")
        return nev.DescribeTopicResponse(topic.name, [
            nev.PartitionSummary(p.partition, p.log_start_offset, p.high_watermark) for p in topic.partitions])

    async def _ping(self, ev: nev.PingRequest):
        return nev.PongResponse()
