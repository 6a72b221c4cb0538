"""Retention through a real gateway: segments deleted while native, TANK (both transcoding) and Kafka (the stored
bytes) clients read the partition leave no descriptor of a deleted file open in the gateway — Linux frees an
unlinked file's disk space only when its last descriptor closes — and reading goes on from the new log start. With
`workers: 2` too, native and TANK through the shared ports (handed over or relayed to the partition's owner)."""

from __future__ import annotations

import os
import time

import pytest

from logway.bench.launcher import GatewayProcess
from logway.bench.proc import gateway_processes
from logway.clients.errors import NativeError, TankBoundaryError
from logway.clients.native import NativeClient
from logway.clients.tank import TankClient
from logway.codecs.kafka.api import fetch
from logway.codecs.kafka.records import decode_records
from logway.gateway.cluster.ownership import partition_leader
from logway.gateway.cluster.relays import RELAYS_SUPPORTED

from ..kafka_wire import KafkaWireClient

pytestmark = pytest.mark.slow


def _deleted_segment_files(pid: int) -> list[str]:
    """The files of the gateway's open descriptors that were deleted from a topic directory."""
    out = []
    for fd in os.listdir(f"/proc/{pid}/fd"):
        try:
            target = os.readlink(f"/proc/{pid}/fd/{fd}")
        except OSError:
            continue  # closed meanwhile
        if "/topics/" in target and target.endswith(" (deleted)"):
            out.append(target)
    return out


class _Behind(Exception):
    """A read below the log start: retention moved it since the reader looked."""


def _kafka_fetch(client: KafkaWireClient, topic: str, offset: int) -> list[int]:
    body = fetch.FetchRequest(replica_id=-1, max_wait_ms=0, min_bytes=0, max_bytes=2048, isolation_level=0,
                              topics=[fetch.FetchTopic(topic=topic, partitions=[fetch.FetchPartition(
                                  partition=0, fetch_offset=offset, partition_max_bytes=2048)])])
    part = client.call(1, 11, body).responses[0].partitions[0]
    if part.error_code == 1:  # OFFSET_OUT_OF_RANGE
        raise _Behind
    assert part.error_code == 0, part.error_code
    return [r.offset for r in decode_records(part.records or b"")]


def _read_at_the_start(native: NativeClient, tank: TankClient, kafka: KafkaWireClient) -> int:
    """Read the partition from its log start through every protocol, as a consumer that fell behind retention does
    (it starts again from the new start); the start read from."""
    for _ in range(50):
        start = native.describe_topic("ret").partitions[0].log_start_offset
        try:
            assert native.fetch("ret", 0, start, max_bytes=512).records
            assert tank.get("ret", 0, start + 1, 1024).messages
            assert _kafka_fetch(kafka, "ret", start)
            return start
        except NativeError as exc:
            if "offset out of range" not in str(exc):
                raise
        except (TankBoundaryError, _Behind):
            pass  # retention ran between the look and a read: look again
    raise AssertionError("the log start kept moving")


@pytest.mark.parametrize("workers", [1, pytest.param(2, marks=pytest.mark.skipif(
    not RELAYS_SUPPORTED, reason="workers need Linux"))])
def test_segments_deleted_by_retention_leave_no_descriptor_open_in_the_gateway(tmp_path, workers):
    with GatewayProcess(str(tmp_path / "data"), "log_level=WARNING", "storage.segment_bytes=4096",
                        "storage.retention_bytes=8192", "storage.retention_check_interval_ms=100",
                        "listeners.tank.enabled=true", f"workers={workers}") as gw:
        owner = partition_leader("ret", 0, workers)
        leader = gw.addresses[f"kafka.{owner}" if owner else "kafka"]
        with NativeClient(*gw.addresses["native"]) as native, TankClient(*gw.addresses["tank"]) as tank, \
                KafkaWireClient(*leader) as kafka:
            native.create_topic("ret", 1)
            for i in range(60):  # ~30 segments of 4 KiB, read as they come by every protocol
                native.produce("ret", 0, [b"%03d-%d" % (i, j) * 20 for j in range(3)])
                _read_at_the_start(native, tank, kafka)
            deadline = time.monotonic() + 10
            while (start := native.describe_topic("ret").partitions[0].log_start_offset) < 60:
                assert time.monotonic() < deadline, f"retention did not run: the log starts at {start}"
                time.sleep(0.05)
            time.sleep(0.3)  # (a retention pass that was running finishes)
            for role, pid in gateway_processes(gw.pid).items():
                assert _deleted_segment_files(pid) == [], role
            assert _read_at_the_start(native, tank, kafka) >= start  # reading goes on from the new start
