"""Transcoded reads shared between readers (`gateway/transcoded.py`, `storage.transcode_cache_bytes`): a slice read
in another format than the stored one is decoded and encoded once for every reader that asks for the same slice
from the same offset in the same format, and each of its batches once for every reader whose slice holds it (from
another offset, with another byte budget); a shared answer is the answer a reader without the cache gets (a TANK
bundle after a gap in the offsets is sparse either way); a reader that trims its answer (a native fetch over its
max_bytes) does not trim anyone else's; the cache keeps to its byte bound, least recently used out first; 0 turns it
off; a record the reader's format cannot carry gets the protocol's error (and nothing is kept). Real sockets, real
clients, an in-process gateway (so the cache's counters can be read beside the metrics); the answers compared over
a real storage engine in a temp dir; the cache does not keep a segment retention deleted (and its disk space)
alive."""

from __future__ import annotations

import gc
import weakref

import pytest
import trio

from logway.clients.errors import NativeError
from logway.clients.native import NativeClient
from logway.clients.tank import TankClient
from logway.codecs.kafka.records import decode_records, encode_batch
from logway.codecs.records import Record
from logway.codecs.tank import decode_chunk
from logway.gateway.formats import KAFKA, NATIVE, RECORDS, STORAGE_FORMATS, TANK
from logway.storage import LogEngine, TopicConfig

from logway.gateway.durability import GroupCommitter
from logway.gateway.flush import Flush
from logway.gateway.notify import AppendNotifier
from logway.gateway.steps import Steps

from .test_transactions import batch, open_coordinator

from ..conftest import running_gateway
from ..kafka_wire import KafkaWireClient
from .test_admin_http import scrape, value

MiB = 1024 * 1024
VALUES = [b"value-%02d" % i for i in range(10)]


async def _in_thread(fn):
    return await trio.to_thread.run_sync(fn)


async def test_readers_of_another_format_share_one_transcode_of_a_slice(tmp_path):
    async with running_gateway(tmp_path / "data", "storage.flush=none", "listeners.tank.enabled=true") as gw:
        cache = gw.steps.transcoded
        native = await _in_thread(lambda: NativeClient(*gw.addresses["native"]))
        tank = await _in_thread(lambda: TankClient(*gw.addresses["tank"]))
        try:
            await _in_thread(lambda: native.create_topic("shared", 1))  # a Kafka-format topic
            await _in_thread(lambda: native.produce("shared", 0, VALUES))  # one batch of 10 records

            def values(offset: int, max_bytes: int) -> list[bytes]:
                return [r.value for r in native.fetch("shared", 0, offset, max_bytes=max_bytes).records]

            assert await _in_thread(lambda: values(0, MiB)) == VALUES
            assert (cache.misses, cache.hits) == (1, 0)
            # The same slice (one whole batch is always read), trimmed by this reader to ~its max_bytes ...
            assert await _in_thread(lambda: values(0, 20)) == VALUES[:2]
            assert (cache.misses, cache.hits) == (1, 1)
            # ... and whole again for the next one: the shared answer was not trimmed in place.
            assert await _in_thread(lambda: values(0, MiB)) == VALUES
            assert (cache.misses, cache.hits) == (1, 2)
            # From another offset, the answer differs: a transcode of its own, shared in turn.
            assert await _in_thread(lambda: values(5, MiB)) == VALUES[5:]
            assert await _in_thread(lambda: values(5, MiB)) == VALUES[5:]
            assert (cache.misses, cache.hits) == (2, 3)
            # A TANK consumer of the Kafka topic asks for bundles: another format, another transcode, shared too.
            for _ in range(2):
                got = await _in_thread(lambda: tank.get("shared", 0, 1, MiB))
                assert [m.value for m in got.messages] == VALUES
            assert (cache.misses, cache.hits) == (3, 4)
        finally:
            native.close()
            tank.close()
        samples = await scrape(gw)
        assert value(samples, "logway_transcoded_reads_total") == 3
        assert value(samples, "logway_transcoded_reads_shared_total") == 4
        # (each read here is one batch: the batches counted alike)
        assert value(samples, "logway_transcoded_batches_total") == 3
        assert value(samples, "logway_transcoded_batches_shared_total") == 4


async def test_the_cache_keeps_to_its_bytes_least_recently_used_out_first(tmp_path):
    async with running_gateway(tmp_path / "data", "storage.flush=none", "storage.transcode_cache_bytes=3000") as gw:
        cache = gw.steps.transcoded
        with NativeClient(*gw.addresses["native"]) as native:
            await _in_thread(lambda: native.create_topic("small", 1))
            for i in range(6):  # six batches of ~900 bytes: three fit
                await _in_thread(lambda i=i: native.produce("small", 0, [bytes([65 + i]) * 800]))

            def read(offset: int) -> bytes:
                return native.fetch("small", 0, offset, max_bytes=1).records[0].value

            for offset in range(6):
                assert await _in_thread(lambda o=offset: read(o)) == bytes([65 + offset]) * 800
                assert cache.bytes <= 3000
            assert len(cache) == 3 and cache.misses == 6
            assert await _in_thread(lambda: read(5)) == b"F" * 800  # kept
            assert cache.hits == 1
            assert await _in_thread(lambda: read(0)) == b"A" * 800  # evicted: transcoded again
            assert cache.misses == 7 and cache.bytes <= 3000


async def test_with_the_cache_off_every_read_transcodes_its_own(tmp_path):
    async with running_gateway(tmp_path / "data", "storage.flush=none", "storage.transcode_cache_bytes=0") as gw:
        assert gw.steps.transcoded is None
        with NativeClient(*gw.addresses["native"]) as native:
            await _in_thread(lambda: native.create_topic("off", 1))
            await _in_thread(lambda: native.produce("off", 0, VALUES))
            for _ in range(2):
                got = await _in_thread(lambda: native.fetch("off", 0, 0, max_bytes=MiB))
                assert [r.value for r in got.records] == VALUES
        samples = await scrape(gw)
        assert value(samples, "logway_transcoded_reads_total") == 0


async def test_a_record_the_readers_format_cannot_carry_gets_its_error_and_the_connection_goes_on(tmp_path):
    async with running_gateway(tmp_path / "data", "storage.flush=none") as gw:
        def scenario():
            with NativeClient(*gw.addresses["native"]) as native:
                native.create_topic("negative", 1)
                with KafkaWireClient(*gw.addresses["kafka"]) as kafka:  # Kafka allows a timestamp of -1
                    batch = encode_batch([Record(b"then", timestamp=-1)], default_timestamp=-1)
                    assert kafka.produce("negative", 0, batch) == (0, 0)
                for _ in range(2):  # (not shared: the second read meets the same error)
                    with pytest.raises(NativeError, match="invalid record: .*timestamp"):
                        native.fetch("negative", 0, 0)
                native.ping()
        await _in_thread(scenario)
        assert gw.steps.transcoded.misses == 2 and len(gw.steps.transcoded) == 0


async def test_readers_from_other_offsets_share_the_batches_their_slices_hold(tmp_path):
    async with running_gateway(tmp_path / "data", "storage.flush=none") as gw:
        cache = gw.steps.transcoded
        with NativeClient(*gw.addresses["native"]) as native:
            await _in_thread(lambda: native.create_topic("walk", 1))
            for i in range(3):  # batches of offsets 0-9, 10-19, 20-29
                await _in_thread(lambda i=i: native.produce("walk", 0, [b"%d-%d" % (i, j) for j in range(10)]))

            def values(offset: int) -> list[bytes]:
                return [r.value for r in native.fetch("walk", 0, offset, max_bytes=MiB).records]

            assert await _in_thread(lambda: values(0)) == [b"%d-%d" % (i, j) for i in range(3) for j in range(10)]
            assert (cache.batches_decoded, cache.batches_shared, cache.misses) == (3, 0, 1)
            # Another slice (from 10), made of batches decoded for the first reader: nothing is decoded again.
            assert await _in_thread(lambda: values(10)) == [b"%d-%d" % (i, j) for i in (1, 2) for j in range(10)]
            assert (cache.batches_decoded, cache.batches_shared, cache.hits) == (3, 2, 1)
            # A new batch at the tail: only it is decoded.
            await _in_thread(lambda: native.produce("walk", 0, [b"3-%d" % j for j in range(10)]))
            assert await _in_thread(lambda: values(20)) == [b"%d-%d" % (i, j) for i in (2, 3) for j in range(10)]
            assert (cache.batches_decoded, cache.batches_shared) == (4, 3)
            # From inside a batch: that batch's records from the offset are a part of their own.
            assert await _in_thread(lambda: values(15)) == [b"1-%d" % j for j in range(5, 10)] + [
                b"%d-%d" % (i, j) for i in (2, 3) for j in range(10)]
            assert (cache.batches_decoded, cache.batches_shared) == (5, 5)


async def test_a_shared_answer_is_the_answer_read_without_the_cache(tmp_path):
    """Batch by batch and joined, an answer holds what one transcode of the whole slice holds (byte for byte for
    native readers; TANK and Kafka ones get a bundle or batch per stored batch rather than per run of offsets):
    after a transaction's marker (an offset without a record) the next TANK bundle is sparse — else its messages
    would read as the marker's offset on — whether the part was first decoded after the gap or not."""
    engine, plain, coord = open_coordinator(tmp_path)
    plog = engine.create_topic("t", 1).partitions[0]
    plain.append(plog, encode_batch([Record(b"a%d" % i) for i in range(5)], default_timestamp=1))  # 0-4
    pid, epoch = await coord.init_producer_id("x", 10_000)
    await coord.add_partitions("x", pid, epoch, [("t", 0)])
    plain.append(plog, batch(pid, epoch), producer=(pid, epoch))  # 5, then its COMMIT marker at 6
    await coord.end_txn("x", pid, epoch, True)
    plain.append(plog, encode_batch([Record(b"b%d" % i) for i in range(3)], default_timestamp=1))  # 7-9
    tank = engine.create_topic("tk", 1, {"format": "tank"}).partitions[0]
    for n in (4, 2, 3):
        plain.append(tank, TANK.encode([Record(b"%d" % i) for i in range(n)], now_ms=1, max_batch_bytes=MiB))
    sharing = Steps(engine, AppendNotifier(), GroupCommitter(), Flush.NONE, transcode_cache_bytes=MiB)

    def records(read, as_):
        if as_ is TANK:
            return [(r.offset, r.value) for r in decode_chunk(read.data, read.first + 1).records]
        if as_ is KAFKA:
            return [(r.offset, r.value) for r in decode_records(read.data)]
        return [(r.offset, r.value) for r in read.data] if as_ is RECORDS else list(read.data.offsets)

    # Offsets in an order that has the later batches decoded first (then after a gap, or not); the second round
    # decodes nothing: every part is shared.
    cache = sharing.transcoded
    for round_ in range(2):
        decoded = cache.batches_decoded
        for log, formats in ((plog, (NATIVE, TANK, RECORDS)), (tank, (NATIVE, KAFKA, RECORDS))):
            for asked in (7, 6, 5, 2, 0, 8, 0, 5):
                for as_ in formats:
                    want = await plain.read(log, asked, MiB, as_)
                    got = await sharing.read(log, asked, MiB, as_)
                    assert (got.count, got.first) == (want.count, want.first), (log.topic, asked, as_)
                    assert records(got, as_) == records(want, as_), (log.topic, asked, as_)
                    if as_ is NATIVE or as_ is RECORDS:
                        assert got.data == want.data, (log.topic, asked, as_)
        assert round_ == 0 or cache.batches_decoded == decoded
    engine.close()


async def test_the_cache_does_not_keep_a_segment_retention_deleted_alive(tmp_path):
    """A deleted segment keeps its file's disk space for as long as its object lives: the cache keys its parts on
    the segment's uid, so parts of a segment retention deleted age out without holding it."""
    engine = LogEngine(tmp_path, STORAGE_FORMATS, TopicConfig(segment_bytes=1024, retention_bytes=0))
    plog = engine.create_topic("t", 1).partitions[0]
    steps = Steps(engine, AppendNotifier(), GroupCommitter(), Flush.NONE, transcode_cache_bytes=MiB)
    for i in range(20):
        steps.append(plog, encode_batch([Record(b"%d-%d" % (i, j) * 20) for j in range(3)], default_timestamp=1))
    assert len(plog.segments) > 2
    for offset in range(0, plog.log_end_offset, 3):
        assert (await steps.read(plog, offset, 1, NATIVE)).count == 3
    cached = len(steps.transcoded)
    first = weakref.ref(plog.segments[0])
    plog.sync()
    assert plog.enforce_retention() > 0
    gc.collect()
    assert first() is None and len(steps.transcoded) == cached  # its parts still cached, the segment gone
    engine.close()


def test_a_large_read_is_joined_in_steps_into_the_same_bytes(tmp_path):
    """A transcoded read of many parts larger than JOIN_STEP_BYTES is copied into its answer step by step (the
    event loop let go between the steps), and holds exactly what one join holds; a small one is joined at once."""
    from logway.gateway.transcoded import JOIN_STEP_BYTES, STEP_BYTES, TranscodedReads

    engine = LogEngine(str(tmp_path / "data"), STORAGE_FORMATS)
    tank = engine.create_topic("big", 1, {"format": "tank"}).partitions[0]
    value = bytes(range(256)) * 256  # 64 KiB
    for _ in range(96):  # 6 MiB of bundles of 64 KiB records, read as Kafka batches
        tank.append(TANK.encode([Record(value)], now_ms=1, max_batch_bytes=MiB))
    rng = tank.read(0, 16 * MiB)
    data = rng.read()
    steps = TranscodedReads(0).transcode_in_steps(rng, data, 0, STORAGE_FORMATS["tank"], KAFKA)
    yields = 0
    try:
        while True:
            next(steps)
            yields += 1
    except StopIteration as done:
        joined, count, first = done.value
    decoding_steps = len(data) // STEP_BYTES
    assert yields >= decoding_steps + len(joined) // JOIN_STEP_BYTES - 1  # (the join's own steps)
    records = decode_records(bytes(joined))
    assert (count, first, len(records)) == (96, 0, 96)
    assert [r.offset for r in records] == list(range(96)) and all(r.value == value for r in records)
    few = engine.create_topic("few", 1, {"format": "tank"}).partitions[0]
    for _ in range(3):
        few.append(TANK.encode([Record(value)], now_ms=1, max_batch_bytes=MiB))
    rng = few.read(0, MiB)
    small = TranscodedReads(0).transcode(rng, rng.read(), 0, STORAGE_FORMATS["tank"], KAFKA)
    assert type(small[0]) is bytes and small[1] == 3  # (joined at once)
    engine.close()
