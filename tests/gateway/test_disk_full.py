"""A full disk: appends are refused with each protocol's error (never acknowledged), the log stays consistent,
and the gateway accepts writes again by itself once space returns. Uses a small tmpfs mounted for the test
(needs root, as in CI; skipped with the reason otherwise)."""

from __future__ import annotations

import os
import subprocess

import trio

from logway.bench.launcher import GatewayProcess
from logway.clients.errors import NativeError
from logway.clients.native import NativeClient
from logway.codecs import native as nv
from logway.codecs.kafka.api import offsets as ko
from logway.codecs.records import Record

from ..conftest import AsyncNative, fill_disk, running_gateway
from ..kafka_wire import KafkaWireClient


async def test_disk_full_refuses_produces_and_recovers_when_space_returns(small_disk):
    ballast = small_disk / "ballast"
    data = small_disk / "data"
    async with running_gateway(data, "storage.flush=always") as gw:
        c = await AsyncNative.connect(gw)
        await c.request(nv.CreateTopicRequest("full", 1))
        with open(ballast, "wb") as f:  # leave only a little room
            f.write(b"\0" * (2 * 1024 * 1024))
        acked, errors = [], []
        for i in range(200):
            resp = await c.request(nv.ProduceRequest("full", 0, [Record(b"%05d" % i + b"x" * 20_000)]))
            if isinstance(resp, nv.ErrorResponse):
                errors.append(resp.message)
                if len(errors) >= 3:
                    break
            else:
                acked.append((resp.offsets[0], i))
        assert acked and errors, "the disk never filled up"
        assert all("No space left on device" in e for e in errors), errors
        plog = gw.engine.partition("full", 0)
        assert plog.log_end_offset == len(acked)  # nothing half-written, nothing acknowledged that is missing
        os.unlink(ballast)  # space returns
        again = await c.request(nv.ProduceRequest("full", 0, [Record(b"after")]))
        assert again == nv.ProduceResponse([len(acked)])
        fetched = []
        offset = 0
        while offset <= len(acked):
            resp = await c.request(nv.FetchRequest("full", 0, offset, 1 << 20))
            fetched += resp.records
            offset = resp.next_offset
        assert [r.offset for r in fetched] == list(range(len(acked) + 1))
        assert [r.value[:5] for r in fetched[:-1]] == [b"%05d" % i for _, i in acked]
        await c.aclose()
    async with running_gateway(data) as gw:  # and it reopens cleanly
        assert gw.engine.partition("full", 0).log_end_offset == len(acked) + 1
        await trio.sleep(0)


def _kafka_commit(client: KafkaWireClient, topic: str, offset: int, metadata: str = "") -> int:
    body = ko.OffsetCommitRequest(group_id="g", generation_id_or_member_epoch=-1, member_id="", topics=[
        ko.OffsetCommitRequestTopic(name=topic, partitions=[
            ko.OffsetCommitRequestPartition(partition_index=0, committed_offset=offset, committed_metadata=metadata)])])
    return client.call(8, 7, body).topics[0].partitions[0].error_code


def _commit_until_refused(c: NativeClient, topic: str, first: int) -> tuple[int | None, list[str]]:
    """Commit growing offsets with 1000 bytes of metadata until three are refused: (last acknowledged, errors).
    The first few may still fit in the offset log's last page."""
    acked, errors = None, []
    for offset in range(first, first + 200):
        try:
            c.request(nv.OffsetCommitRequest(topic, 0, "g", offset, "m" * 1000))
            acked = offset
        except NativeError as exc:
            errors.append(exc.message)
            if len(errors) == 3:
                break
    return acked, errors


def test_offset_commits_refused_while_full_then_durable_across_kill_9(small_disk, tmp_path):
    """A real gateway process: offset commits answer errors while the disk is full, the next one after space
    returns is acknowledged with no restart, and it survives kill -9 and a restart."""
    data, run = str(small_disk / "data"), str(tmp_path / "run")
    stderr = open(tmp_path / "gateway.log", "w+b")
    gw = GatewayProcess(data, "storage.flush=always", run_dir=run, stderr=stderr)
    try:
        with NativeClient(*gw.native) as c, KafkaWireClient(*gw.addresses["kafka"]) as k:
            c.create_topic("full", 1)
            c.produce("full", 0, [b"x"])
            assert c.commit("full", 0, "g", 1)
            ballast = fill_disk(small_disk)
            acked, errors = _commit_until_refused(c, "full", 2)
            assert errors, "the disk never filled up"
            assert all("No space left on device" in e for e in errors), errors
            assert c.committed("full", 0, "g") == (acked or 1)  # nothing refused became visible
            os.unlink(ballast)  # space returns
            assert c.commit("full", 0, "g", 500) and c.committed("full", 0, "g") == 500
            assert _kafka_commit(k, "full", 600, "kafka") == 0
            assert c.committed("full", 0, "g") == 600
        gw.kill()
        gw = GatewayProcess(data, "storage.flush=always", run_dir=run, stderr=stderr)
        with NativeClient(*gw.native) as c:
            assert c.committed("full", 0, "g") == 600
            assert c.commit("full", 0, "g", 601)
            assert c.produce("full", 0, [b"y"]) == [1]
        assert gw.stop() == 0
        gw = GatewayProcess(data, run_dir=run, stderr=stderr)
        with NativeClient(*gw.native) as c:
            assert c.committed("full", 0, "g") == 601
    finally:
        gw.kill()
        stderr.seek(0)
        log = stderr.read().decode(errors="replace")
        stderr.close()
    assert "Traceback" not in log, log


def test_kafka_offset_commit_refused_while_full(small_disk, tmp_path):
    with GatewayProcess(str(small_disk / "data"), "storage.flush=always", run_dir=str(tmp_path / "run"),
                        stderr=subprocess.DEVNULL) as gw:
        with NativeClient(*gw.native) as c, KafkaWireClient(*gw.addresses["kafka"]) as k:
            c.create_topic("full", 1)
            ballast = fill_disk(small_disk)
            _, errors = _commit_until_refused(c, "full", 1)
            assert errors, "the disk never filled up"
            assert _kafka_commit(k, "full", 99, "m" * 1000) != 0  # refused, never acknowledged
            os.unlink(ballast)
            assert _kafka_commit(k, "full", 100) == 0  # on the same connection
            assert c.committed("full", 0, "g") == 100
