"""A failing device (issue 33, item 8): I/O errors (EIO) at start, during appends, rolls, index flushes and shutdown
are reported as what they are — one line naming the I/O error, the file and what to do — never taken for damage
(nothing quarantined, nothing cut), never crash a shutdown or leave the directory locked, and the gateway serves
the rest meanwhile and everything it acknowledged once the device works again.

Real `logway serve` processes (`bench.launcher.GatewayProcess`) on the power-loss file system
(`logway.bench.powerfs`, the `powerfs` fixture: FUSE, skipped without it, required in CI), whose `fail(...)` makes
the chosen calls on matching files fail with EIO until `heal()`. Its model follows Linux where a sync fails: what
was written before a failed fsync is not made durable by a later one (the kernel marked those pages clean), so a
power cut (`powerfs.cut()`) after such a failure shows whether anything acknowledged depended on them.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from logway.bench.launcher import GatewayProcess
from logway.clients.errors import NativeError
from logway.clients.native import NativeClient
from logway.codecs.kafka.error_codes import ErrorCode
from logway.codecs.kafka.records import encode_batch
from logway.codecs.records import Record

from ..kafka_wire import KafkaWireClient

SETTINGS = ("storage.flush=always",)
EIO_ANSWER = "storage error: Input/output error"


def log_of(path: Path) -> str:
    return path.read_text(errors="replace")


def nothing_set_aside(data: Path) -> None:
    """Nothing quarantined, nothing half-made left in tmp/ or trash/."""
    for sub in ("quarantine", "tmp", "trash"):
        assert not (data / sub).exists() or os.listdir(data / sub) == [], (sub, os.listdir(data / sub))


def read_all(c: NativeClient, topic: str, partition: int) -> list[bytes]:
    end = c.describe_topic(topic).partitions[partition].log_end_offset
    out, offset = [], 0
    while offset < end:
        resp = c.fetch(topic, partition, offset, 1 << 20)
        out += [r.value for r in resp.records]
        offset = resp.next_offset
    return out


def kafka_batch(value: bytes) -> bytes:
    return encode_batch([Record(value)], default_timestamp=0)


@pytest.mark.parametrize("ops", [("write",), ("fsync",)])
def test_an_io_error_during_appends_fails_only_that_partition_and_loses_nothing_acknowledged(powerfs, tmp_path, ops):
    """Writes (or syncs) of partition a-0's files fail with EIO: native and Kafka (acks=all) produces to it get the
    protocol's storage error, one line names the I/O error, the file and what to do; the other partitions take
    writes and a-0 is read as before meanwhile. Once the device works again a-0 takes writes again, and a power cut
    then keeps every acknowledged record (what was written before the failed sync is not trusted)."""
    data = Path(powerfs.path) / "data"
    log = tmp_path / "gw.log"
    acked: dict[int, list[bytes]] = {0: [], 1: []}
    with open(log, "wb") as stderr:
        gw = GatewayProcess(str(data), *SETTINGS, stderr=stderr)
    try:
        with NativeClient(*gw.native) as c, KafkaWireClient(*gw.addresses["kafka"]) as k:
            c.create_topic("a", 2)
            for i in range(5):
                for p in (0, 1):
                    c.produce("a", p, [b"before-%d" % i])
                    acked[p].append(b"before-%d" % i)
            powerfs.fail(*ops, paths="*/topics/a/0/*")
            with pytest.raises(NativeError) as refused:
                c.produce("a", 0, [b"refused-native"])
            assert refused.value.message == EIO_ANSWER
            code, _ = k.produce("a", 0, kafka_batch(b"refused-kafka"))
            assert code == ErrorCode.KAFKA_STORAGE_ERROR
            for i in range(3):  # the other partition, meanwhile
                c.produce("a", 1, [b"during-%d" % i])
                acked[1].append(b"during-%d" % i)
                code, _ = k.produce("a", 1, kafka_batch(b"during-kafka-%d" % i))
                assert code == ErrorCode.NONE
                acked[1].append(b"during-kafka-%d" % i)
            assert read_all(c, "a", 0)[:5] == acked[0]
            assert powerfs.stats()["faults"] >= 2
            powerfs.heal()
            for i in range(3):
                c.produce("a", 0, [b"after-%d" % i])
                acked[0].append(b"after-%d" % i)
    finally:
        gw.kill()  # the power goes: nothing more is synced
    text = log_of(log)
    assert "I/O error (" in text and "/topics/a/0/" in text, text[-3000:]
    assert "Traceback" not in text
    powerfs.cut()
    with GatewayProcess(str(data), *SETTINGS) as gw, NativeClient(*gw.native) as c:
        for p in (0, 1):
            got = read_all(c, "a", p)
            assert [v for v in got if v in acked[p]] == acked[p], (p, got)
    nothing_set_aside(data)
