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

import errno
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
from .test_resources import log_of, nothing_set_aside, read_native

SETTINGS = ("storage.flush=always",)
EIO_ANSWER = "storage error: Input/output error"


def stored_files(data: Path) -> dict[str, int]:
    """Every file of the topics and the stores, and its size (not the lock, the clean-stop marker, tmp/ or trash/:
    a start takes the marker away before it opens anything, and empties tmp/ and trash/)."""
    return {str(p.relative_to(data)): p.stat().st_size for p in data.rglob("*")
            if p.is_file() and p.relative_to(data).parts[0] not in (".lock", ".clean_shutdown", "tmp", "trash")}


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
            assert read_native(c, "a", 0)[:5] == acked[0]
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
            got = read_native(c, "a", p)
            assert [v for v in got if v in acked[p]] == acked[p], (p, got)
    nothing_set_aside(data)


#: Small segments with many index entries: a few hundred records roll segments and write and sync indexes.
SMALL = ("storage.segment_bytes=4096", "storage.index_interval_bytes=256")


def produce_some(c: NativeClient, topic: str, n: int, acked: list[bytes], tag: str) -> int:
    """`n` produces of one 300-byte record each; what is acknowledged goes into `acked`; how many were refused."""
    refused = 0
    for i in range(n):
        value = b"%s-%04d-" % (tag.encode(), i) + b"r" * 290
        try:
            c.produce(topic, 0, [value])
        except NativeError as exc:
            assert exc.message == EIO_ANSWER, exc.message
            refused += 1
            continue
        acked.append(value)
    return refused


@pytest.mark.parametrize("ops", [("fsync",), ("write", "fsync")])
def test_an_io_error_at_rolls_and_index_flushes_loses_nothing_acknowledged(powerfs, tmp_path, ops):
    """Segments of 4 KiB (a roll every 13 records) and an index entry every 256 bytes; syncs (and writes) of the
    index files fail with EIO while records are produced: the produces whose sync covers a rolled segment's index
    are refused with the storage error, the others acknowledged; after `heal` every produce is; a power cut then
    keeps every acknowledged record, in order, and nothing is quarantined."""
    data = Path(powerfs.path) / "data"
    log = tmp_path / "gw.log"
    acked: list[bytes] = []
    with open(log, "wb") as stderr:
        gw = GatewayProcess(str(data), *SETTINGS, *SMALL, stderr=stderr)
    try:
        with NativeClient(*gw.native) as c:
            c.create_topic("r", 1)
            assert produce_some(c, "r", 20, acked, "before") == 0
            powerfs.fail(*ops, paths="*.index")
            refused = produce_some(c, "r", 60, acked, "during")
            assert refused >= 3  # (a roll every 13 records: each one's sync syncs the frozen segment's index)
            assert powerfs.stats()["faults"] >= refused
            powerfs.heal()
            assert produce_some(c, "r", 30, acked, "after") == 0
            assert read_native(c, "r", 0) == acked  # (a refused append was cut back: not served either)
    finally:
        gw.kill()
    text = log_of(log)
    assert "Traceback" not in text and "I/O error (" in text and ".index)" in text, text[-3000:]
    powerfs.cut()
    with GatewayProcess(str(data), *SETTINGS, *SMALL) as gw, NativeClient(*gw.native) as c:
        assert read_native(c, "r", 0) == acked
    nothing_set_aside(data)


def test_an_io_error_during_shutdown_is_one_line_and_unlocks(powerfs, tmp_path):
    """Every write and sync fails from the moment SIGTERM is sent: the gateway exits without a traceback, says in
    one line that storage closed with an I/O error (which file, what to do), leaves the directory unlocked, and
    once the device works again starts (recovering, as after a crash) with every acknowledged record."""
    data = Path(powerfs.path) / "data"
    log = tmp_path / "stop.log"
    acked: list[bytes] = []
    with open(log, "wb") as stderr:
        gw = GatewayProcess(str(data), *SETTINGS, *SMALL, stderr=stderr)
    with NativeClient(*gw.native) as c:
        c.create_topic("s", 1)
        produce_some(c, "s", 30, acked, "acked")
    powerfs.fail("write", "fsync", "fsyncdir", "truncate", paths="data/*")
    assert gw.stop() == 0
    text = log_of(log)
    assert "Traceback" not in text, text[-3000:]
    closing = [line for line in text.splitlines() if "ERROR" in line]
    assert len(closing) == 1 and "I/O error (" in closing[0] and "/data/" in closing[0], closing
    powerfs.heal()
    log = tmp_path / "again.log"
    with open(log, "wb") as stderr, GatewayProcess(str(data), *SETTINGS, *SMALL, stderr=stderr) as gw:
        with NativeClient(*gw.native) as c:
            assert read_native(c, "s", 0) == acked
    assert "in use by another" not in log_of(log)
    nothing_set_aside(data)


@pytest.mark.parametrize("paths", ["*/topics/a/0/*.log", "*/topics/a/0/*.index", "*/topics/a/topic.json",
                                   "*/offsets/*", "*/transactions/*"])
def test_an_io_error_at_start_fails_it_in_one_line_and_moves_nothing(powerfs, tmp_path, paths):
    """Reads of one file the start needs fail with EIO (a segment's data or index, a topic's metadata, a store):
    the start fails with one line naming the I/O error and the file, exit status 2, nothing quarantined or cut;
    once the device works again it starts and serves every acknowledged record and committed offset."""
    data = Path(powerfs.path) / "data"
    acked: list[bytes] = []
    with GatewayProcess(str(data), *SETTINGS, *SMALL) as gw, NativeClient(*gw.native) as c:
        c.create_topic("a", 1)
        produce_some(c, "a", 40, acked, "acked")  # (three segments)
        c.commit("a", 0, "g", 17)
    before = stored_files(data)
    powerfs.fail("read", paths=paths)
    log = tmp_path / "start.log"
    with open(log, "wb") as stderr, pytest.raises(RuntimeError, match="exited with status 2"):
        GatewayProcess(str(data), *SETTINGS, *SMALL, stderr=stderr)
    text = log_of(log)
    assert powerfs.stats()["faults"] > 0
    last = text.strip().splitlines()[-1]
    assert last.startswith("logway: cannot start: I/O error (") and "/data/" in last, text[-3000:]
    assert "Traceback" not in text and "quarantine" not in text and "moved to" not in text, text[-3000:]
    powerfs.heal()
    assert stored_files(data) == before  # nothing moved, nothing cut
    with GatewayProcess(str(data), *SETTINGS, *SMALL) as gw, NativeClient(*gw.native) as c:
        assert read_native(c, "a", 0) == acked
        assert c.committed("a", 0, "g") == 17
    nothing_set_aside(data)


def test_an_io_error_reading_the_producer_ids_is_no_damage(powerfs):
    """The engine itself (no gateway allocates a producer id without a Kafka client): an I/O error reading
    `producer_ids` fails the open with that error — the file is not set aside as damaged (which would make the
    next ids start from a clock-based floor) — and once the device works again the ids go on after the last."""
    from logway.codecs.kafka.records import KafkaFormat
    from logway.storage import LogEngine

    data = os.path.join(powerfs.path, "data")
    eng = LogEngine(data, {"kafka": KafkaFormat()})
    last = eng.producer_ids.next_id()
    eng.close()
    powerfs.fail("read", paths="data/producer_ids")
    with pytest.raises(OSError) as failed:
        LogEngine(data, {"kafka": KafkaFormat()})
    assert failed.value.errno == errno.EIO and failed.value.filename.endswith("producer_ids")
    powerfs.heal()
    nothing_set_aside(Path(data))
    eng = LogEngine(data, {"kafka": KafkaFormat()})
    assert last < eng.producer_ids.next_id() < last + 10_000
    eng.close()
