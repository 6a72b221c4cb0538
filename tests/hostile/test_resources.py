"""Exhausted resources, storage side (issue 33): a client that runs the gateway out of descriptors or disk gets the
protocol's refusal and nothing else changes; a gateway that runs out (a low RLIMIT_NOFILE, a full disk, no inode
left) reports what ran out in one line, never takes it for damage (nothing quarantined), never crashes its
shutdown, and starts again — serving everything it had — once the resource is back.

Real `logway serve` processes (`bench.launcher.GatewayProcess`: a child's descriptor limit, SIGTERM, SIGKILL),
its descriptors read from /proc/<pid>/fd, disk from st_blocks; the attacks are `logway.bench.abuse_storage`'s.
The full-disk cases run on small file systems mounted for the test (`small_fs`: ext4 on a loop device, else a
tmpfs; root needed, skipped with the reason otherwise, required in CI).
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from logway.bench.abuse_storage import (auto_create_topics, tank_create_topics, tiny_records_many_partitions,
                                        tiny_segments)
from logway.bench.launcher import GatewayProcess
from logway.bench.proc import allocated_bytes, open_files
from logway.clients.errors import KafkaError, NativeError
from logway.clients.native import NativeClient
from logway.clients.tank import TankClient
from logway.codecs.kafka.api import admin
from logway.codecs.kafka.error_codes import ErrorCode
from logway.codecs.kafka.records import encode_batch
from logway.codecs.records import Record
from logway.codecs.tank import CreateTopicError, ProduceError

from ..kafka_wire import KafkaWireClient

MiB = 1 << 20


#: Segment files beyond the budget that may be open at a given moment: the ones a sync or a read in flight holds
#: after the budget let them go (a directory a sync has open is not counted: it is not a segment file).
IN_FLIGHT = 4


def segment_files(pid: int, data: Path) -> list[str]:
    """The gateway's open descriptors that name segment files of its topics."""
    return [f for f in open_files(pid)
            if f.startswith(str(data / "topics")) and f.endswith((".log", ".index", ".timeindex", ".checksums"))]


def files_open(pid: int) -> list[str]:
    """The gateway's open descriptors but its connections' (which come and go with the clients)."""
    return sorted(f for f in open_files(pid) if not f.startswith("socket:"))


def read_native(c: NativeClient, topic: str, partition: int = 0) -> list[bytes]:
    end = c.describe_topic(topic).partitions[partition].log_end_offset
    out, offset = [], 0
    while offset < end:
        resp = c.fetch(topic, partition, offset, 1 << 20)
        out += [r.value for r in resp.records]
        offset = resp.next_offset
    return out


def log_of(path: Path) -> str:
    return path.read_text(errors="replace")


def nothing_set_aside(data: Path) -> None:
    """Nothing quarantined, nothing half-made left in tmp/ or trash/."""
    for sub in ("quarantine", "tmp", "trash"):
        assert not (data / sub).exists() or os.listdir(data / sub) == [], (sub, os.listdir(data / sub))


# -- descriptors ---------------------------------------------------------------------------------------------------

def test_a_segment_per_produce_keeps_open_files_within_the_budget(tmp_path):
    """3,000 produces rolling a 1 KiB segment each: 3,000 segments (9,000 files), at most
    `limits.open_segment_files` of them open while they are written and while all of them are read back."""
    data = tmp_path / "data"
    budget = 64
    with GatewayProcess(str(data), f"limits.open_segment_files={budget}") as gw:
        before = len(open_files(gw.pid))
        topic, out = tiny_segments(gw.native, 3000)
        assert out.accepted == 3000 and out.refused == []
        assert len(list((data / "topics" / topic / "0").glob("*.log"))) > 2500  # a segment per produce, about
        assert len(segment_files(gw.pid, data)) <= budget + IN_FLIGHT
        with NativeClient(*gw.native) as c:
            assert read_native(c, topic) == [b"s" * 900] * 3000  # every segment read again
            assert len(segment_files(gw.pid, data)) <= budget + IN_FLIGHT
            assert len(open_files(gw.pid)) <= before + budget + IN_FLIGHT + 1  # (+ this client's connection)
            c.ping()


def test_topics_and_partitions_past_the_limits_are_refused_by_every_protocol(tmp_path):
    """TANK CreateTopic of 5 topics of 100 partitions under `limits.max_partitions=250`: two are created, the
    others refused with TANK's system error and nothing of them left on disk or open; Kafka CreateTopics and
    CreatePartitions past the limit get POLICY_VIOLATION, past the limit per topic INVALID_PARTITIONS; native
    CreateTopic gets `limit reached: …`. The gateway serves the topics it has."""
    data = tmp_path / "data"
    with GatewayProcess(str(data), "limits.max_partitions=250", "limits.max_partitions_per_topic=120",
                        "limits.open_segment_files=64") as gw:
        before = len(open_files(gw.pid))
        names, codes = tank_create_topics(gw.addresses["tank"], topics=5, partitions=100)
        assert codes == [CreateTopicError.OK] * 2 + [CreateTopicError.SYSTEM_ERROR] * 3
        assert sorted(os.listdir(data / "topics")) == sorted(names[:2])
        nothing_set_aside(data)
        assert len(open_files(gw.pid)) <= before + 64 + IN_FLIGHT
        with TankClient(*gw.addresses["tank"]) as t:
            assert t.create_topic("toomany", 121) == CreateTopicError.INVALID_REQUEST  # past the limit per topic
            assert t.produce(names[0], 99, [b"kept"]) == ProduceError.OK
        with KafkaWireClient(*gw.addresses["kafka"]) as k:
            with pytest.raises(KafkaError) as refused:
                k.client.create_topic("kafka-many", 100, exist_ok=False)
            assert refused.value.code == ErrorCode.POLICY_VIOLATION and "max_partitions" in str(refused.value)
            with pytest.raises(KafkaError) as refused:
                k.client.create_topic("kafka-wide", 121, exist_ok=False)
            assert refused.value.code == ErrorCode.INVALID_PARTITIONS
        with NativeClient(*gw.native) as c:
            with pytest.raises(NativeError, match="^limit reached: 200 partitions exist and 100 more"):
                c.create_topic("native-many", 100)
            assert c.create_topic("fits", 50)  # what is left under the limit
            assert [t.name for t in c.list_topics()] == sorted([*names[:2], "fits"])
        with KafkaWireClient(*gw.addresses["kafka"]) as k:  # all 250 taken: one more partition is refused
            grow = admin.CreatePartitionsRequest(topics=[admin.CreatePartitionsTopic(name=names[0], count=101)],
                                                  timeout_ms=10000)
            [result] = k.call(admin.CREATE_PARTITIONS_KEY, 1, grow).results
            assert result.error_code == ErrorCode.POLICY_VIOLATION, result
        assert sorted(os.listdir(data / "topics")) == sorted([*names[:2], "fits"])


def test_metadata_auto_creation_stops_at_max_topics(tmp_path):
    """Kafka Metadata naming 40 unknown topics under `limits.max_topics=30`: 30 created, 10 refused with
    POLICY_VIOLATION, as Kafka answers a creation its policy refuses."""
    data = tmp_path / "data"
    with GatewayProcess(str(data), "limits.max_topics=30", "kafka.auto_create_topics=true") as gw:
        codes = auto_create_topics(gw.addresses["kafka"], 40, per_request=10)
        assert sorted(codes.values()) == [ErrorCode.NONE] * 30 + [ErrorCode.POLICY_VIOLATION] * 10
        assert len(os.listdir(data / "topics")) == 30


def test_a_descriptor_limit_below_what_the_partitions_need(tmp_path):
    """40 topics of 10 partitions (each partition's active segment is 3 files) under RLIMIT_NOFILE 256: created,
    written, stopped and started again — nothing quarantined, every topic and record there, and one line at each
    start saying the limit is low and what to do. Under a limit too low to open storage at all, the start fails
    with one line naming the descriptor limit — nothing moved — and the next start with descriptors to spare
    serves everything."""
    data = tmp_path / "data"
    small = ("limits.max_connections=32",)

    def check_all(gw: GatewayProcess) -> None:
        with NativeClient(*gw.native) as c:
            assert len(c.list_topics()) == 40
            for t in range(40):
                for p in range(10):
                    assert c.fetch(f"t{t}", p, 0).records[0].value == b"v%d-%d" % (t, p)

    log = tmp_path / "first.log"
    with open(log, "wb") as stderr, GatewayProcess(str(data), *small, nofile=256, stderr=stderr) as gw:
        with NativeClient(*gw.native) as c:
            for t in range(40):
                c.create_topic(f"t{t}", 10)
                for p in range(10):
                    c.produce(f"t{t}", p, [b"v%d-%d" % (t, p)])
        assert len(open_files(gw.pid)) < 256
    assert gw.proc.returncode == 0
    assert log_of(log).count("descriptor limit: this process may have 256 files open") == 1
    log = tmp_path / "second.log"
    with open(log, "wb") as stderr, GatewayProcess(str(data), *small, nofile=256, stderr=stderr) as gw:
        check_all(gw)
    assert "Traceback" not in log_of(log) and "quarantine" not in log_of(log)
    nothing_set_aside(data)

    log = tmp_path / "starved.log"
    with open(log, "wb") as stderr, pytest.raises(RuntimeError, match="exited with status 2"):
        GatewayProcess(str(data), *small, nofile=20, stderr=stderr)
    last = log_of(log).strip().splitlines()[-1]  # (storage opens first: with a few more it is a listener's line)
    assert last.startswith("logway: ") and "out of file descriptors" in last and "RLIMIT_NOFILE" in last, last
    assert "Traceback" not in log_of(log)
    nothing_set_aside(data)
    assert len(os.listdir(data / "topics")) == 40
    with GatewayProcess(str(data), *small) as gw:
        check_all(gw)


def test_ready_says_unready_while_descriptors_run_out(tmp_path):
    """Under RLIMIT_NOFILE 256, idle connections up to the last 64 descriptors: `/ready` answers 503 (a load balancer
    sends no new clients), and 200 again once they are gone."""
    import socket
    import time

    from logway.bench.abuse import Target, _http

    with GatewayProcess(str(tmp_path / "data"), "limits.max_connections=240", nofile=256) as gw:
        target = Target(gw.addresses, gw.pid, str(tmp_path / "data"))
        assert _http(target, "/ready")[0] == 200
        socks = [socket.create_connection(gw.native) for _ in range(256 - 64 - len(open_files(gw.pid)) + 8)]
        try:
            deadline = time.monotonic() + 10
            while len(open_files(gw.pid)) <= 256 - 64 and time.monotonic() < deadline:
                time.sleep(0.02)
            deadline = time.monotonic() + 10  # (the gateway counts its descriptors at most once a second)
            while (answer := _http(target, "/ready"))[0] != 503:
                assert time.monotonic() < deadline, answer
                time.sleep(0.05)
        finally:
            for s in socks:
                s.close()
        deadline = time.monotonic() + 10
        while _http(target, "/ready")[0] != 200:
            assert time.monotonic() < deadline, "still unready with the connections gone"
            time.sleep(0.2)


# -- disk ----------------------------------------------------------------------------------------------------------

def test_idle_partitions_reserve_no_disk_and_a_crash_leaves_no_reservation(tmp_path):
    """64 one-byte records into 64 partitions take a few blocks each, not 16 MiB (1 GiB in all before): blocks are
    reserved ahead as a partition grows. What a busy partition reserved ahead when the gateway was killed is
    given back when it opens again."""
    data = tmp_path / "data"
    gw = GatewayProcess(str(data))
    try:
        topic, out = tiny_records_many_partitions(gw.native, 64)
        assert out.accepted == 64
        assert allocated_bytes(str(data / "topics" / topic)) < 64 * 64 * 1024
        with NativeClient(*gw.native) as c:
            c.create_topic("busy", 1)
            for i in range(80):  # 5.2 MB: blocks are reserved up to 8.4 MB
                c.produce("busy", 0, [b"%04d" % i + b"b" * 65_536])
        busy = data / "topics" / "busy" / "0"
        stored = sum(f.stat().st_size for f in busy.iterdir())
        assert allocated_bytes(str(busy)) > stored + 2 * MiB  # blocks reserved ahead of the active segment
    finally:
        gw.kill()  # as a crash: nothing gives them back
    assert allocated_bytes(str(busy)) > stored + 2 * MiB
    with GatewayProcess(str(data)) as gw, NativeClient(*gw.native) as c:
        assert allocated_bytes(str(busy)) < stored + 256 * 1024
        assert [v[:4] for v in read_native(c, "busy")] == [b"%04d" % i for i in range(80)]
        assert all(c.fetch(topic, p, 0).records[0].value == b"x" for p in range(64))


def test_a_full_disk_is_reported_never_taken_for_damage(tmp_path, small_fs):
    """On a 32 MiB file system filled up by a client: produces of every protocol are refused with the protocol's
    storage error (nothing acknowledged that is not there), the gateway logs what ran out in one line, SIGTERM
    stops it cleanly (no traceback, the directory unlocked), it starts again on the still full disk and serves
    what it holds, and takes writes again once there is room — every acknowledged record there, nothing
    quarantined."""
    disk = small_fs(32)
    data = disk / "data"
    settings = ("storage.flush=always",)
    log = tmp_path / "full.log"
    acked: list[tuple[int, bytes]] = []
    with open(log, "wb") as stderr, GatewayProcess(str(data), *settings, stderr=stderr) as gw:
        with NativeClient(*gw.native) as c, TankClient(*gw.addresses["tank"]) as t:
            c.create_topic("full", 4)
            assert t.create_topic("fullt", 1) == CreateTopicError.OK
            st = os.statvfs(disk)
            (disk / "ballast").write_bytes(b"\0" * (st.f_bavail * st.f_frsize - MiB))  # 1 MiB left
            refused = []
            for i in range(400):
                value = b"%04d" % i + b"f" * 20_000
                try:
                    c.produce("full", i % 4, [value])
                    acked.append((i % 4, value))
                except NativeError as exc:
                    refused.append(exc.message)
                    if len(refused) == 3:
                        break
            assert acked and refused == ["storage error: No space left on device"] * 3
            assert t.produce("fullt", 0, [b"t" * 200_000] * 8) == ProduceError.SYSTEM_ERROR
        with KafkaWireClient(*gw.addresses["kafka"]) as k:
            code, _ = k.produce("full", 0, encode_batch([Record(b"k" * 300_000)], default_timestamp=0))
            assert code == ErrorCode.KAFKA_STORAGE_ERROR
    assert gw.proc.returncode == 0
    text = log_of(log)
    assert "Traceback" not in text
    assert "disk full (" in text and "bytes free" in text  # which resource, its limit, what to do
    log = tmp_path / "restart.log"
    with open(log, "wb") as stderr, GatewayProcess(str(data), *settings, stderr=stderr) as gw:  # still full
        with NativeClient(*gw.native) as c:
            for p in range(4):
                assert read_native(c, "full", p) == [v for q, v in acked if q == p]
    assert gw.proc.returncode == 0
    assert "Traceback" not in log_of(log) and "did not shut down cleanly" not in log_of(log)
    (disk / "ballast").unlink()  # space comes back
    with GatewayProcess(str(data), *settings) as gw, NativeClient(*gw.native) as c:
        for p in range(4):
            c.produce("full", p, [b"after"])
            assert read_native(c, "full", p) == [v for q, v in acked if q == p] + [b"after"]
    nothing_set_aside(data)


def test_a_creation_that_runs_out_of_inodes_leaves_nothing(tmp_path, small_fs):
    """TANK CreateTopic of 400 partitions on a file system with 1,024 inodes: its directories fit, its partitions'
    files do not. Refused with TANK's system error, and nothing of it stays — no topic directory, nothing in tmp/
    or trash/, no descriptor — and once the inodes it took are back a smaller topic is created and written."""
    disk = small_fs(32, inodes=1024)
    data = disk / "data"
    with GatewayProcess(str(data), "limits.open_segment_files=64") as gw:
        before = files_open(gw.pid)
        names, codes = tank_create_topics(gw.addresses["tank"], topics=1, partitions=400)
        assert codes == [CreateTopicError.SYSTEM_ERROR]
        assert os.listdir(data / "topics") == []
        nothing_set_aside(data)
        assert files_open(gw.pid) == before
        with TankClient(*gw.addresses["tank"]) as t:
            assert t.create_topic("small", 4) == CreateTopicError.OK
            assert t.produce("small", 3, [b"fits"]) == ProduceError.OK
            assert [m.value for m in t.get("small", 3, 0).messages] == [b"fits"]
