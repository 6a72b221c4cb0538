"""Values from the wire bounded before they are stored (issue 33, the storage side): a sequence number that would
leave no offset after it, a retention that no 64-bit number of milliseconds holds, topic names as long as Kafka
allows. Each is refused with the protocol's own error (or, for names, served), the partition or topic stays usable,
and what an older logway stored before these bounds existed opens and serves again.

Real `logway serve` processes (`bench.launcher.GatewayProcess`), the attacks of `logway.bench.abuse_storage`.
"""

from __future__ import annotations

import json
import os

import pytest
from crc32c import crc32c

from logway.bench.abuse_storage import SEQNUM_JUMP, long_names, seqnum_jump, tank_retention_overflow
from logway.bench.launcher import GatewayProcess
from logway.clients.errors import KafkaError, NativeError
from logway.clients.native import NativeClient
from logway.clients.tank import TankClient
from logway.codecs.kafka.error_codes import ErrorCode
from logway.codecs.records import Record
from logway.codecs.tank import CreateTopicError, ProduceError, encode_bundle, wrap
from logway.storage.checksums import ENTRY as CHECKSUM_ENTRY

from ..kafka_wire import KafkaWireClient

MAX_LONG = 2**63 - 1


def values(t: TankClient, topic: str) -> list[tuple[int, bytes]]:
    return [(m.seq, m.value) for m in t.get(topic, 0, 0).messages]


def test_a_sequence_number_near_the_end_of_offsets_is_refused(tmp_path):
    """TANK ProduceWithSeqnum at 2^63 - 2 into a `tank` topic is refused (invalid sequence number) and the partition
    keeps taking writes — plain and with a modest jump (gaps stay allowed); into a `kafka` topic too."""
    with GatewayProcess(str(tmp_path / "data")) as gw, TankClient(*gw.addresses["tank"]) as t:
        assert t.create_topic("jump", 1) == CreateTopicError.OK
        assert t.produce("jump", 0, [b"a", b"b"]) == ProduceError.OK
        assert seqnum_jump(gw.addresses["tank"], "jump") == ProduceError.INVALID_SEQNUM
        assert t.produce("jump", 0, [b"c"]) == ProduceError.OK
        assert t.produce_with_seqnum("jump", 0, [b"later"], 1000) == ProduceError.OK
        assert t.produce("jump", 0, [b"after"]) == ProduceError.OK
        assert values(t, "jump") == [(1, b"a"), (2, b"b"), (3, b"c"), (1000, b"later"), (1001, b"after")]
        with NativeClient(*gw.native) as c:
            c.create_topic("jumpk", 1)
        assert seqnum_jump(gw.addresses["tank"], "jumpk") == ProduceError.INVALID_SEQNUM
        assert t.produce("jumpk", 0, [b"k"]) == ProduceError.OK


def test_a_partition_an_older_logway_let_jump_to_the_end_recovers(tmp_path):
    """The state the jump left behind before it was refused — a segment based at offset 2^63 - 3, after which the
    partition refused every write, even after a restart — is set aside when the partition opens (an error line
    naming it), and the partition takes writes again after what it held before."""
    data = tmp_path / "data"
    with GatewayProcess(str(data)) as gw, TankClient(*gw.addresses["tank"]) as t:
        assert t.create_topic("bricked", 1) == CreateTopicError.OK
        assert t.produce("bricked", 0, [b"a", b"b"]) == ProduceError.OK
    partition = data / "topics" / "bricked" / "0"
    stored = wrap(encode_bundle([Record(b"jump", timestamp=1)], sparse_seqs=[SEQNUM_JUMP]))
    base = partition / f"{SEQNUM_JUMP - 1:020d}"
    base.with_suffix(".log").write_bytes(stored)
    base.with_suffix(".checksums").write_bytes(CHECKSUM_ENTRY.pack(0, crc32c(stored)))
    log = tmp_path / "gateway.log"
    with open(log, "wb") as stderr, GatewayProcess(str(data), stderr=stderr) as gw:
        with TankClient(*gw.addresses["tank"]) as t:
            assert t.produce("bricked", 0, [b"c"]) == ProduceError.OK
            assert values(t, "bricked") == [(1, b"a"), (2, b"b"), (3, b"c")]
    text = log.read_text()
    assert f"{SEQNUM_JUMP - 1:020d}.log: base offset beyond" in text and "moved to" in text, text
    assert any(name.startswith(f"bricked-0.{SEQNUM_JUMP - 1:020d}.log.") for name in os.listdir(data / "quarantine"))


def test_a_retention_beyond_a_long_is_refused_by_every_protocol(tmp_path):
    """`log.retention.secs=10^30` over TANK (10^33 ms) is an invalid config and no topic is made; a Kafka
    CreateTopics with `retention.ms` beyond 2^63 - 1 gets INVALID_CONFIG; a native AlterTopicConfig with it is an
    invalid request; the largest long itself is taken, and DescribeTopicConfig answers it."""
    with GatewayProcess(str(tmp_path / "data")) as gw:
        topic, code = tank_retention_overflow(gw.addresses["tank"])
        assert code == CreateTopicError.INVALID_CONFIG
        with KafkaWireClient(*gw.addresses["kafka"]) as k:
            with pytest.raises(KafkaError) as refused:
                k.client.create_topic("kafka-ret", 1, exist_ok=False, configs={"retention.ms": str(MAX_LONG + 1)})
            assert refused.value.code == ErrorCode.INVALID_CONFIG
        with NativeClient(*gw.native) as c:
            assert [t.name for t in c.list_topics()] == []
            c.create_topic("ret", 1)
            with pytest.raises(NativeError, match="^invalid request: retention_ms must be between -1 and "):
                c.alter_topic_config("ret", {"retention.ms": str(10**33)})
            c.alter_topic_config("ret", {"retention.ms": str(MAX_LONG)})
            [entry] = c.describe_topic_config("ret", ["retention.ms"])
            assert entry.value == MAX_LONG


def test_a_stored_retention_beyond_a_long_is_brought_within_range(tmp_path):
    """A topic an older logway stored with retention 10^33 ms (and whose DescribeTopicConfig then crashed the
    connection) opens with the largest long instead, a warning saying so, its data served."""
    data = tmp_path / "data"
    with GatewayProcess(str(data)) as gw, NativeClient(*gw.native) as c:
        c.create_topic("old", 1)
        c.produce("old", 0, [b"kept"])
    meta_path = data / "topics" / "old" / "topic.json"
    meta = json.loads(meta_path.read_text())
    meta["config"] = {"retention.ms": 10**33}
    meta_path.write_text(json.dumps(meta))
    log = tmp_path / "gateway.log"
    with open(log, "wb") as stderr, GatewayProcess(str(data), stderr=stderr) as gw, NativeClient(*gw.native) as c:
        [entry] = c.describe_topic_config("old", ["retention.ms"])
        assert entry.value == MAX_LONG and entry.source == "topic"
        assert c.fetch("old", 0, 0).records[0].value == b"kept"
    assert f"retention.ms={10**33} → {MAX_LONG}" in log.read_text()
    assert not (data / "quarantine").exists()


def test_topic_names_as_long_as_kafka_allows(tmp_path):
    """Names of 247–249 characters (the names derived from them — being created, being deleted — passed the
    255 bytes a file name may have) are created, written and deleted through the native and Kafka protocols; one
    character more is an invalid name."""
    data = tmp_path / "data"
    with GatewayProcess(str(data)) as gw:
        answers = long_names(gw.native, gw.addresses["kafka"])
        assert set(answers.values()) == {"ok"}, answers
        with NativeClient(*gw.native) as c:
            with pytest.raises(NativeError, match="^invalid topic name: topic name is longer than 249"):
                c.create_topic("n" * 250, 1)
            assert c.list_topics() == []
    assert os.listdir(data / "topics") == [] and os.listdir(data / "tmp") == [] and os.listdir(data / "trash") == []
