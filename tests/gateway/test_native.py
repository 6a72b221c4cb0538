"""The native protocol end to end: real sockets on 127.0.0.1, a real gateway, real files.

Covers every example flow of seeds 000 and 004, long-poll, errors on the wire (each answered or cleanly closed
while other connections keep working), persistence across restarts and graceful shutdown.
"""

from __future__ import annotations

import json
import struct

import orjson
import trio

from logway.codecs import native as nv
from logway.codecs.records import Record

from ..conftest import AsyncNative, long_polls_parked, running_gateway, until


def frame(obj) -> bytes:
    body = obj if isinstance(obj, bytes) else orjson.dumps(obj)
    return struct.pack(">I", len(body)) + body


async def test_seed_example_1_produce_append_produce(client):
    await client.request(nv.CreateTopicRequest("orders", 1))
    filler = await client.produce("orders", 0, [b"f"] * 1000)
    assert filler.offsets == list(range(1000))
    # The seed's exact frames, sent raw.
    await client.send_raw(frame({"Produce": {"topic": "orders", "partition": 0, "records": [[10, 20], [30, 40]]}}))
    assert await client.receive() == nv.ProduceResponse([1000, 1001])
    await client.send_raw(frame({"Produce": {"topic": "orders", "partition": 0, "records": [[50, 60]]}}))
    assert await client.receive() == nv.ProduceResponse([1002])


async def test_seed_example_2_fetch_with_group_commit_restart_resume(tmp_path):
    data = tmp_path / "data"
    async with running_gateway(data, "storage.flush=always") as gw:
        c = await AsyncNative.connect(gw)
        await c.request(nv.CreateTopicRequest("orders", 1))
        await c.produce("orders", 0, [b"\x0a\x14", b"\x1e\x28", b"\x32\x3c"])
        first = await c.request(nv.FetchRequest("orders", 0, 0, 2, "processor"))
        # max_bytes 2 → the first record only (at least one record, then up to max_bytes of payload)
        assert [(r.offset, r.value) for r in first.records] == [(0, b"\x0a\x14")]
        both = await c.request(nv.FetchRequest("orders", 0, 0, 4, "processor"))
        assert [r.value for r in both.records] == [b"\x0a\x14", b"\x1e\x28"] and both.next_offset == 2
        assert await c.request(nv.OffsetCommitRequest("orders", 0, "processor", 2)) == nv.OffsetCommitResponse(True)
        await c.aclose()
    # "Client restarts" — and here the broker restarts too: committed offsets are durable.
    async with running_gateway(data) as gw:
        c = await AsyncNative.connect(gw)
        resumed = await c.request(nv.FetchRequest("orders", 0, 0, 1 << 20, "processor"))
        assert [(r.offset, r.value) for r in resumed.records] == [(2, b"\x32\x3c")]
        assert resumed.next_offset == 3
        assert resumed.records[0].timestamp is not None
        # Requested ahead of the committed offset: the request wins.
        ahead = await c.request(nv.FetchRequest("orders", 0, 3, 1 << 20, "processor"))
        assert ahead.records == [] and ahead.next_offset == 3
        assert (await c.request(nv.OffsetFetchRequest("orders", 0, "processor"))).offset == 2
        assert (await c.request(nv.OffsetFetchRequest("orders", 0, "nobody"))).offset is None
        await c.aclose()


async def test_seed_example_3_stateless_fetch(client):
    await client.request(nv.CreateTopicRequest("orders", 1))
    await client.produce("orders", 0, [bytes([i]) for i in range(102)])
    await client.send_raw(frame({"Fetch": {"topic": "orders", "partition": 0, "offset": 100,
                                           "max_bytes": 1048576, "group_id": None}}))
    resp = await client.receive()
    assert [(r.offset, r.value) for r in resp.records] == [(100, bytes([100])), (101, bytes([101]))]
    assert resp.next_offset == 102


async def test_seed_example_4_and_every_error(client):
    await client.send_raw(frame({"Fetch": {"topic": "nonexistent", "partition": 0, "offset": 0,
                                           "max_bytes": 1048576, "group_id": None}}))
    assert await client.receive() == nv.ErrorResponse("partition not found: topic=nonexistent, partition=0")
    await client.request(nv.CreateTopicRequest("orders", 1))
    for req in (nv.ProduceRequest("orders", 99, [Record(b"x")]), nv.OffsetCommitRequest("orders", 99, "g", 1),
                nv.OffsetFetchRequest("orders", 99, "g")):
        assert await client.request(req) == nv.ErrorResponse("partition not found: topic=orders, partition=99")
    # Offset past the end: an empty list and the log end; the seed's "offset out of range" is below the start.
    await client.produce("orders", 0, [b"a", b"b"])
    past = await client.request(nv.FetchRequest("orders", 0, 50, 100))
    assert past == nv.FetchResponse([], 2)
    # Bad topic names, existing topics, bad partition counts.
    for bad in ("a/b", "..", "x" * 250, "nul\x00"):
        resp = await client.request(nv.CreateTopicRequest(bad, 1))
        assert resp.message.startswith("invalid topic name"), resp
    assert await client.request(nv.CreateTopicRequest("orders", 1)) == nv.ErrorResponse(
        "topic already exists: orders")
    assert (await client.request(nv.CreateTopicRequest("big", 10 ** 6))).message.startswith("invalid request")
    assert await client.request(nv.DescribeTopicRequest("nope")) == nv.ErrorResponse("topic not found: nope")
    # Invalid JSON and unknown request types keep the connection open.
    await client.send_raw(frame(b"{not json"))
    assert (await client.receive()).message.startswith("failed to parse request")
    await client.send_raw(frame({"Compact": {}}))
    assert (await client.receive()).message.startswith("unknown request type")
    assert await client.request(nv.PingRequest()) == nv.PongResponse()


async def test_offset_out_of_range_below_log_start(tmp_path):
    async with running_gateway(tmp_path / "data", "storage.segment_bytes=1024", "storage.retention_bytes=0") as gw:
        c = await AsyncNative.connect(gw)
        await c.request(nv.CreateTopicRequest("t", 1))
        for _ in range(20):
            await c.produce("t", 0, [b"x" * 100])
        await trio.to_thread.run_sync(gw.engine.enforce_retention)
        start = gw.engine.partition("t", 0).log_start_offset
        assert start > 0
        resp = await c.request(nv.FetchRequest("t", 0, 0, 100))
        assert resp.message == f"offset out of range: offset=0, log_start_offset={start}, log_end_offset=20"
        ok = await c.request(nv.FetchRequest("t", 0, start, 100))
        assert ok.records[0].offset == start
        await c.aclose()


async def test_keys_and_timestamps_round_trip(client):
    await client.request(nv.CreateTopicRequest("k", 1))
    await client.send_raw(frame({"Produce": {"topic": "k", "partition": 0, "records": [
        {"payload": [1, 2], "key": [7], "timestamp": 1234567890123}, [3], {"value": [4], "key": None}]}}))
    assert (await client.receive()).offsets == [0, 1, 2]
    resp = await client.request(nv.FetchRequest("k", 0, 0, 1 << 20))
    assert [(r.value, r.key) for r in resp.records] == [(b"\x01\x02", b"\x07"), (b"\x03", None), (b"\x04", None)]
    assert resp.records[0].timestamp == 1234567890123
    assert all(r.timestamp and r.timestamp > 1_600_000_000_000 for r in resp.records[1:])


async def test_long_poll_fetch_is_woken_by_produce(gateway, client):
    await client.request(nv.CreateTopicRequest("lp", 1))
    producer = await AsyncNative.connect(gateway)
    result = {}

    async def poll():
        t0 = trio.current_time()
        result["resp"] = await client.request(nv.FetchRequest("lp", 0, 0, 1 << 20, max_wait_ms=10_000))
        result["elapsed"] = trio.current_time() - t0

    async with trio.open_nursery() as nursery:
        nursery.start_soon(poll)
        await long_polls_parked(gateway)
        assert "resp" not in result  # parked at the log end
        await producer.produce("lp", 0, [b"wake"])
    assert [r.value for r in result["resp"].records] == [b"wake"]
    assert result["elapsed"] < 2.0  # woken by the produce, long before its max_wait_ms
    # Without data the wait ends at max_wait_ms with an empty answer.
    t0 = trio.current_time()
    resp = await client.request(nv.FetchRequest("lp", 0, 1, 1 << 20, max_wait_ms=300))
    assert resp == nv.FetchResponse([], 1) and trio.current_time() - t0 >= 0.29
    # min_bytes accumulates appends until enough payload is there.
    async with trio.open_nursery() as nursery:
        result.clear()

        async def poll_min():
            result["resp"] = await client.request(
                nv.FetchRequest("lp", 0, 1, 1 << 20, max_wait_ms=10_000, min_bytes=10))

        nursery.start_soon(poll_min)
        for i in range(4):
            await long_polls_parked(gateway)  # (still: the appends so far hold less than min_bytes)
            assert "resp" not in result
            await producer.produce("lp", 0, [b"abc"])
    assert [r.offset for r in result["resp"].records] == [1, 2, 3, 4]
    await producer.aclose()


async def test_wire_errors_answered_or_closed_while_others_keep_working(gateway, client):
    await client.request(nv.CreateTopicRequest("w", 1))
    host, port = gateway.addresses["native"]

    async def raw(data: bytes, *, close_write=False) -> bytes:
        s = await trio.open_tcp_stream(host, port)
        await s.send_all(data)
        if close_write:
            await s.send_eof()
        out = b""
        with trio.fail_after(5):
            while chunk := await s.receive_some(65536):
                out += chunk
                if not close_write and len(out) >= 4 and len(out) >= 4 + struct.unpack(">I", out[:4])[0]:
                    break
        await s.aclose()
        return out

    # Oversized declared length: error answer, then the gateway closes the connection.
    answer = await raw(struct.pack(">I", 0xFFFFFFF0), close_write=False)
    assert orjson.loads(answer[4:]) == {"Error": {"message": "max frame size exceeded"}}
    # Truncated frame or header (EOF inside it): the error answer, then a clean close.
    for torn in (struct.pack(">I", 100) + b'{"Ping"', b"\x00\x00"):
        answer = await raw(torn, close_write=True)
        assert orjson.loads(answer[4:])["Error"]["message"].startswith("truncated frame"), answer
    # Unknown type, wrong types, bytes out of range, invalid UTF-8: answered, connection stays usable.
    for bad in (frame({"Nope": {}}), frame({"Fetch": {"topic": "w", "partition": "0", "offset": 0, "max_bytes": 1}}),
                frame({"Produce": {"topic": "w", "partition": 0, "records": [[256]]}}),
                frame(b'{"CreateTopic": {"topic": "\xff\xfe", "partitions": 1}}'),
                frame({"Produce": {"topic": "../etc", "partition": 0, "records": [[1]]}})):
        s = AsyncNative(await trio.open_tcp_stream(host, port))
        await s.send_raw(bad)
        err = await s.receive()
        assert isinstance(err, nv.ErrorResponse), err
        assert await s.request(nv.PingRequest()) == nv.PongResponse()
        await s.aclose()
    # The first connection never noticed any of this.
    assert (await client.produce("w", 0, [b"still here"])).offsets == [0]


async def test_connection_limit(tmp_path):
    async with running_gateway(tmp_path / "data", "limits.max_connections=2") as gw:
        a = await AsyncNative.connect(gw)
        b = await AsyncNative.connect(gw)
        assert await a.request(nv.PingRequest()) == nv.PongResponse()
        assert await b.request(nv.PingRequest()) == nv.PongResponse()
        host, port = gw.addresses["native"]
        extra = await trio.open_tcp_stream(host, port)
        with trio.fail_after(5):
            try:
                refused = await extra.receive_some(100)
            except trio.BrokenResourceError:
                refused = b""
        assert refused == b""  # closed at once, nothing answered
        await extra.aclose()
        await a.aclose()
        await until(lambda: gw.connections.clients == 1, "the closed connection released")
        c = await AsyncNative.connect(gw)
        assert await c.request(nv.PingRequest()) == nv.PongResponse()
        for conn in (b, c):
            await conn.aclose()


async def test_idle_connection_is_closed(tmp_path):
    async with running_gateway(tmp_path / "data", "limits.idle_timeout_ms=200") as gw:
        c = await AsyncNative.connect(gw)
        with trio.fail_after(5):
            assert await c.stream.receive_some(10) == b""
        await c.aclose()


async def test_graceful_shutdown_finishes_in_flight_long_poll_and_persists(tmp_path):
    data = tmp_path / "data"
    results = {}
    async with trio.open_nursery() as nursery:
        async with running_gateway(data, "storage.flush=interval") as gw:
            c = await AsyncNative.connect(gw)
            await c.request(nv.CreateTopicRequest("g", 1))
            await c.produce("g", 0, [b"one", b"two"])
            poller = await AsyncNative.connect(gw)

            async def poll():
                results["poll"] = await poller.request(nv.FetchRequest("g", 0, 2, 100, max_wait_ms=20_000))

            nursery.start_soon(poll)
            await long_polls_parked(gw)
            # leaving the block asks for shutdown: the parked fetch is answered (empty), not dropped
        assert results["poll"] == nv.FetchResponse([], 2)
    async with running_gateway(data) as gw:
        assert gw.engine.clean_start
        c = await AsyncNative.connect(gw)
        resp = await c.request(nv.FetchRequest("g", 0, 0, 100))
        assert [r.value for r in resp.records] == [b"one", b"two"]
        await c.aclose()


async def test_topic_admin_requests(client):
    assert await client.request(nv.CreateTopicRequest("a", 3)) == nv.CreateTopicResponse(True)
    await client.request(nv.CreateTopicRequest("b", 1))
    await client.produce("a", 2, [b"x", b"y"])
    assert (await client.request(nv.ListTopicsRequest())).topics == [nv.TopicSummary("a", 3), nv.TopicSummary("b", 1)]
    desc = await client.request(nv.DescribeTopicRequest("a"))
    assert [(p.partition, p.log_start_offset, p.log_end_offset) for p in desc.partitions] == [
        (0, 0, 0), (1, 0, 0), (2, 0, 2)]
    assert await client.request(nv.DeleteTopicRequest("a")) == nv.DeleteTopicResponse(True)
    assert (await client.request(nv.ListTopicsRequest())).topics == [nv.TopicSummary("b", 1)]
    assert await client.request(nv.DeleteTopicRequest("a")) == nv.ErrorResponse("topic not found: a")


async def test_describe_topic_at_a_timestamp(client):
    """`at_timestamp`: per partition where a reader starting at that time begins — the first record at or after it,
    never below the log start, the log end when every record is older; only when asked for."""
    await client.request(nv.CreateTopicRequest("ts", 3))
    await client.produce("ts", 0, [Record(b"v%d" % i, timestamp=1000 * (i + 1)) for i in range(6)])  # 1000..6000
    await client.produce("ts", 1, [Record(b"old", timestamp=10)])
    assert await client.request(nv.DeleteRecordsRequest("ts", 0, 2)) == nv.DeleteRecordsResponse(2)
    for at, want in [(0, [2, 0, 0]), (2500, [2, 1, 0]), (3000, [2, 1, 0]), (3001, [3, 1, 0]), (6000, [5, 1, 0]),
                     (6001, [6, 1, 0])]:
        desc = await client.request(nv.DescribeTopicRequest("ts", at_timestamp=at))
        assert [p.timestamp_offset for p in desc.partitions] == want, at
    assert [p.timestamp_offset for p in (await client.request(nv.DescribeTopicRequest("ts"))).partitions] == [None] * 3
    desc = await client.request(nv.DescribeTopicRequest("ts", partitions=[1], at_timestamp=5))
    assert [(p.partition, p.timestamp_offset) for p in desc.partitions] == [(1, 0)]


async def test_flush_always_acknowledges_after_sync_with_group_commit(gateway):
    """Every acknowledged produce is already covered by a finished fdatasync, and concurrent producers share
    sync rounds (group commit) instead of paying one sync each."""
    first = await AsyncNative.connect(gateway)
    await first.request(nv.CreateTopicRequest("gc", 1))
    plog = gateway.engine.partition("gc", 0)
    rounds_before = gateway.committer.rounds
    acks = 0

    async def producer(i):
        nonlocal acks
        c = await AsyncNative.connect(gateway)
        for j in range(10):
            resp = await c.produce("gc", 0, [b"%d-%d" % (i, j)])
            assert plog.durable_offset > resp.offsets[-1]  # synced before the answer went out
            acks += 1
        await c.aclose()

    async with trio.open_nursery() as nursery:
        for i in range(20):
            nursery.start_soon(producer, i)
    rounds = gateway.committer.rounds - rounds_before
    assert acks == 200 and plog.log_end_offset == 200
    assert rounds < acks, f"{rounds} sync rounds for {acks} acknowledged produces: no group commit"
    await first.aclose()


async def test_flush_interval_syncs_in_the_background(tmp_path):
    async with running_gateway(tmp_path / "data", "storage.flush=interval", "storage.flush_interval_ms=50") as gw:
        c = await AsyncNative.connect(gw)
        await c.request(nv.CreateTopicRequest("fi", 1))
        await c.produce("fi", 0, [b"a", b"b"])
        plog = gw.engine.partition("fi", 0)
        with trio.fail_after(5):
            while plog.durable_offset < 2:
                await trio.sleep(0.02)
        await c.aclose()


# -- admin extensions: CreatePartitions, DeleteRecords, AlterTopicConfig, DescribeTopicConfig, DeleteGroupOffsets --

async def test_create_partitions(client, gateway):
    await client.request(nv.CreateTopicRequest("cp", 1))
    assert await client.request(nv.CreatePartitionsRequest("cp", 3, validate_only=True)) == \
        nv.CreatePartitionsResponse("cp", 1)
    assert await client.request(nv.CreatePartitionsRequest("cp", 3)) == nv.CreatePartitionsResponse("cp", 3)
    assert (await client.produce("cp", 2, [b"new"])).offsets == [0]
    assert (await client.request(nv.ListTopicsRequest())).topics == [nv.TopicSummary("cp", 3)]
    assert await client.request(nv.CreatePartitionsRequest("nope", 2)) == nv.ErrorResponse("topic not found: nope")
    for bad in (3, 2, 10 ** 6):
        resp = await client.request(nv.CreatePartitionsRequest("cp", bad))
        assert resp.message.startswith("invalid request: ") and "partition" in resp.message, resp
    assert len(gateway.engine.topic("cp").partitions) == 3


async def test_delete_records(client):
    await client.request(nv.CreateTopicRequest("dr", 2))
    await client.produce("dr", 0, [bytes([i]) for i in range(10)])
    assert await client.request(nv.DeleteRecordsRequest("dr", 0, 4)) == nv.DeleteRecordsResponse(4)
    assert await client.request(nv.DeleteRecordsRequest("dr", 0, 2)) == nv.DeleteRecordsResponse(4)  # not past it
    below = await client.request(nv.FetchRequest("dr", 0, 3, 100))
    assert below == nv.ErrorResponse("offset out of range: offset=3, log_start_offset=4, log_end_offset=10")
    resp = await client.request(nv.FetchRequest("dr", 0, 4, 1 << 20))
    assert [(r.offset, r.value) for r in resp.records] == [(i, bytes([i])) for i in range(4, 10)]
    desc = await client.request(nv.DescribeTopicRequest("dr"))
    assert (desc.partitions[0].log_start_offset, desc.partitions[0].log_end_offset) == (4, 10)
    # -1: every visible record; the seed's raw frame form works too.
    await client.send_raw(frame({"DeleteRecords": {"topic": "dr", "partition": 0, "offset": -1}}))
    assert await client.receive() == nv.DeleteRecordsResponse(10)
    assert await client.request(nv.FetchRequest("dr", 0, 10, 100)) == nv.FetchResponse([], 10)
    assert (await client.produce("dr", 0, [b"after"])).offsets == [10]
    # Errors: unknown topic / partition, an offset past the end.
    assert await client.request(nv.DeleteRecordsRequest("nope", 0, 1)) == nv.ErrorResponse(
        "partition not found: topic=nope, partition=0")
    assert await client.request(nv.DeleteRecordsRequest("dr", 5, 1)) == nv.ErrorResponse(
        "partition not found: topic=dr, partition=5")
    assert await client.request(nv.DeleteRecordsRequest("dr", 1, 1)) == nv.ErrorResponse(
        "offset out of range: offset=1, log_start_offset=0, log_end_offset=0")


async def test_delete_records_survives_a_restart(tmp_path):
    data = tmp_path / "data"
    async with running_gateway(data) as gw:
        c = await AsyncNative.connect(gw)
        await c.request(nv.CreateTopicRequest("drr", 1))
        await c.produce("drr", 0, [b"a", b"b", b"c"])
        assert await c.request(nv.DeleteRecordsRequest("drr", 0, 2)) == nv.DeleteRecordsResponse(2)
        await c.aclose()
    async with running_gateway(data) as gw:
        c = await AsyncNative.connect(gw)
        resp = await c.request(nv.FetchRequest("drr", 0, 0, 100))
        assert resp.message.startswith("offset out of range: offset=0, log_start_offset=2")
        assert [r.value for r in (await c.request(nv.FetchRequest("drr", 0, 2, 100))).records] == [b"c"]
        await c.aclose()


async def test_alter_and_describe_topic_config(tmp_path):
    async with running_gateway(tmp_path / "data", "storage.retention_ms=86400000") as gw:
        c = await AsyncNative.connect(gw)
        await c.request(nv.CreateTopicRequest("cfg", 2))
        configs = (await c.request(nv.DescribeTopicConfigRequest("cfg"))).configs
        by_name = {e.name: e for e in configs}
        assert by_name["retention.ms"] == nv.TopicConfigEntry("retention.ms", 86400000, "broker", 86400000, False)
        assert by_name["segment.bytes"].source == "default"
        assert by_name["storage.format"] == nv.TopicConfigEntry("storage.format", "kafka", "default", "kafka", True)
        alter = nv.AlterTopicConfigRequest("cfg", {"retention.ms": "60000", "max.message.bytes": 4096})
        assert await c.request(alter) == nv.AlterTopicConfigResponse(True)
        assert gw.engine.partition("cfg", 1).config.max_batch_bytes == 4096  # live
        assert (await c.request(nv.DescribeTopicConfigRequest("cfg", ["retention.ms", "max.message.bytes"]))) == \
            nv.DescribeTopicConfigResponse("cfg", [
                nv.TopicConfigEntry("max.message.bytes", 4096, "topic", 10 * 1024 * 1024, False),
                nv.TopicConfigEntry("retention.ms", 60000, "topic", 86400000, False)])
        resp = await c.produce("cfg", 0, [b"x" * 5000])
        assert resp.message.startswith("record too large"), resp
        assert await c.request(nv.AlterTopicConfigRequest("cfg", {"segment.bytes": 2048}, validate_only=True)) == \
            nv.AlterTopicConfigResponse(False)
        assert gw.engine.topic("cfg").config.segment_bytes == 2**30
        await c.send_raw(frame({"AlterTopicConfig": {"topic": "cfg", "delete": ["max.message.bytes"]}}))
        assert await c.receive() == nv.AlterTopicConfigResponse(True)
        assert (await c.produce("cfg", 0, [b"x" * 5000])).offsets == [0]
        # Errors: unknown topic, unknown keys, bad values, a read-only setting.
        for req in (nv.AlterTopicConfigRequest("nope", {"retention.ms": 1}), nv.DescribeTopicConfigRequest("nope")):
            assert await c.request(req) == nv.ErrorResponse("topic not found: nope")
        for req in (nv.AlterTopicConfigRequest("cfg", {"log.retention.hours": 1}),
                    nv.AlterTopicConfigRequest("cfg", delete=["nope"]),
                    nv.AlterTopicConfigRequest("cfg", {"segment.bytes": "big"}),
                    nv.AlterTopicConfigRequest("cfg", {"segment.bytes": 1}),
                    nv.AlterTopicConfigRequest("cfg", {"storage.format": "tank"}),
                    nv.DescribeTopicConfigRequest("cfg", ["nope"])):
            resp = await c.request(req)
            assert isinstance(resp, nv.ErrorResponse) and resp.message.startswith("invalid request: "), (req, resp)
        assert gw.engine.topic("cfg").overrides == {"retention.ms": 60000}
        await c.aclose()
    async with running_gateway(tmp_path / "data") as gw:  # persisted
        assert gw.engine.topic("cfg").config.retention_ms == 60000


async def test_delete_group_offsets(client):
    await client.request(nv.CreateTopicRequest("go", 2))
    for group in ("g1", "g2"):
        for p in (0, 1):
            await client.request(nv.OffsetCommitRequest("go", p, group, 5))
    assert await client.request(nv.DeleteGroupOffsetsRequest("g1", [("go", 0), ("go", 7), ("other", 0)])) == \
        nv.DeleteGroupOffsetsResponse(1)
    assert (await client.request(nv.OffsetFetchRequest("go", 0, "g1"))).offset is None
    assert (await client.request(nv.OffsetFetchRequest("go", 1, "g1"))).offset == 5
    assert await client.request(nv.DeleteGroupOffsetsRequest("g2")) == nv.DeleteGroupOffsetsResponse(2)
    assert (await client.request(nv.OffsetFetchRequest("go", 1, "g2"))).offset is None
    assert await client.request(nv.DeleteGroupOffsetsRequest("nobody")) == nv.DeleteGroupOffsetsResponse(0)
    resp = await client.request(nv.DeleteGroupOffsetsRequest(""))
    assert resp.message.startswith("invalid request: "), resp


async def test_malformed_admin_requests_are_answered_and_the_connection_stays(client):
    await client.request(nv.CreateTopicRequest("m", 1))
    for bad in ({"CreatePartitions": {"topic": "m"}},
                {"CreatePartitions": {"topic": "m", "partitions": 0}},
                {"CreatePartitions": {"topic": "m", "partitions": "3"}},
                {"CreatePartitions": {"topic": "m", "partitions": 3, "validate_only": 1}},
                {"DeleteRecords": {"topic": "m", "partition": 0}},
                {"DeleteRecords": {"topic": "m", "partition": 0, "offset": -2}},
                {"DeleteRecords": {"topic": "m", "partition": 0, "offset": 2 ** 63}},
                {"DeleteRecords": {"topic": "m", "partition": 0, "offset": True}},
                {"DeleteRecords": {"topic": 1, "partition": 0, "offset": 0}},
                {"AlterTopicConfig": {"set": {}}},
                {"AlterTopicConfig": {"topic": "m", "set": [["retention.ms", 1]]}},
                {"AlterTopicConfig": {"topic": "m", "set": {"retention.ms": float("inf")}}},
                {"AlterTopicConfig": {"topic": "m", "set": {"retention.ms": None}}},
                {"AlterTopicConfig": {"topic": "m", "set": {"retention.ms": True}}},
                {"AlterTopicConfig": {"topic": "m", "set": {"retention.ms": 2 ** 64}}},
                {"AlterTopicConfig": {"topic": "m", "delete": "retention.ms"}},
                {"AlterTopicConfig": {"topic": "m", "delete": [1]}},
                {"DescribeTopicConfig": {"topic": "m", "keys": "retention.ms"}},
                {"DescribeTopicConfig": {}},
                {"DeleteGroupOffsets": {}},
                {"DeleteGroupOffsets": {"group_id": "g", "partitions": [["m", 0]]}},
                {"DeleteGroupOffsets": {"group_id": "g", "partitions": [{"topic": "m", "partition": -1}]}},
                {"DeleteGroupOffsets": {"group_id": "g", "partitions": {"topic": "m", "partition": 0}}}):
        await client.send_raw(frame(json.dumps(bad).encode()))  # (json: orjson refuses integers past 64 bits)
        resp = await client.receive()
        assert isinstance(resp, nv.ErrorResponse) and resp.message.startswith("failed to parse request: "), (bad, resp)
    # A number is a config value the wire carries (min.cleanable.dirty.ratio): refused by the topic, not the parse.
    resp = await client.request(nv.AlterTopicConfigRequest("m", {"retention.ms": 1.5}))
    assert resp.message == "invalid request: topic config 'retention.ms': 1.5 is not a valid int"
    assert await client.request(nv.AlterTopicConfigRequest("m", {"min.cleanable.dirty.ratio": 0.25}))
    assert await client.request(nv.PingRequest()) == nv.PongResponse()
    assert await client.request(nv.DescribeTopicRequest("m")) == nv.DescribeTopicResponse(
        "m", [nv.PartitionSummary(0, 0, 0)])


def test_admin_requests_round_trip_through_the_codec():
    client, server = nv.NativeConnection("client"), nv.NativeConnection("server")
    for request in (nv.CreatePartitionsRequest("t", 4, validate_only=True), nv.DeleteRecordsRequest("t", 1, -1),
                    nv.AlterTopicConfigRequest("t", {"retention.ms": "5", "segment.bytes": 4096}, ["segment.ms"]),
                    nv.DescribeTopicConfigRequest("t"), nv.DescribeTopicConfigRequest("t", ["retention.ms"]),
                    nv.DeleteGroupOffsetsRequest("g"), nv.DeleteGroupOffsetsRequest("g", [("t", 0), ("u", 3)])):
        server.receive_data(client.send(request))
        assert server.next_event() == request
    entry = nv.TopicConfigEntry("storage.format", "tank", "topic", "kafka", True)
    ratio = nv.TopicConfigEntry("min.cleanable.dirty.ratio", 0.25, "topic", 0.5, False)
    for response in (nv.CreatePartitionsResponse("t", 4), nv.DeleteRecordsResponse(7),
                     nv.AlterTopicConfigResponse(True), nv.DescribeTopicConfigResponse("t", [entry, ratio]),
                     nv.DeleteGroupOffsetsResponse(3)):
        client.receive_data(server.send(response))
        assert client.next_event() == response
