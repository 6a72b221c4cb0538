"""The storage side's attacks on a running gateway (issue 33): what a hostile or buggy client does to exhaust
descriptors and disk or to break a partition for good, as plain functions over the wire, for tests/hostile/ (which
assert on what the gateway answers and holds afterwards) and for a benchmark that runs them against a gateway while
a probe measures the others' latency.

Each function takes the address of one protocol's listener, performs its attack with blocking clients (one
connection, requests one after another: the gateway's work is what is measured, not the client's concurrency), and
returns what the gateway answered: error codes or messages per request, so the caller can assert that every refusal
was the protocol's own error and that everything acknowledged is there. None of them checks anything itself.

- `tiny_segments`: a topic whose segments roll every 1 KiB, then many one-batch produces (a segment each): before
  the descriptor budget, every segment kept its data file open — 20,000 produces held 20,000 descriptors.
- `tank_create_topics`: TANK CreateTopic of topics with many partitions each (TANK has no authentication).
- `auto_create_topics`: Kafka Metadata requests naming unknown topics, each created by auto-creation.
- `tiny_records_many_partitions`: one tiny record into each of many partitions: each partition reserved 16 MiB of
  disk for its first byte before reservations followed what a partition had written.
- `seqnum_jump`: TANK ProduceWithSeqnum with a sequence number near 2^63: the partition refused every write after
  it, even after a restart.
- `tank_retention_overflow`: TANK CreateTopic with `log.retention.secs` beyond what a 64-bit number of
  milliseconds holds: stored, it crashed every DescribeTopicConfig of the topic.
- `long_names`: topics whose names are as long as Kafka allows, created and deleted through the native and Kafka
  protocols (names derived from them — temporary, trash, quarantine — passed 255 bytes).
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass, field

__all__ = ["Refusals", "tiny_segments", "tank_create_topics", "auto_create_topics", "tiny_records_many_partitions",
           "seqnum_jump", "tank_retention_overflow", "long_names", "SEQNUM_JUMP"]

Address = tuple[str, int]
#: The sequence number of `seqnum_jump` (2^63 - 2: the offset 2^63 - 3, one below the last an offset may be).
SEQNUM_JUMP = 2**63 - 2


@dataclass
class Refusals:
    """What an attack's requests got: how many were accepted, and each refusal (a protocol's error code or text)."""

    accepted: int = 0
    refused: list = field(default_factory=list)


def _name(prefix: str) -> str:
    return f"{prefix}-{uuid.uuid4().hex[:8]}"


def tiny_segments(native: Address, produces: int = 20_000, *, segment_bytes: int = 1024,
                  record_bytes: int = 900, topic: str | None = None) -> tuple[str, Refusals]:
    """A topic with `segment.bytes=segment_bytes` (native CreateTopic, then AlterTopicConfig), then `produces`
    native Produce requests of one `record_bytes` record each: about a segment per produce. Returns the topic and
    the produces' outcome (the refusals: error texts)."""
    from logway.clients.errors import NativeError
    from logway.clients.native import NativeClient

    topic = topic or _name("abuse-segments")
    out = Refusals()
    with NativeClient(*native) as c:
        c.create_topic(topic, 1)
        c.alter_topic_config(topic, {"segment.bytes": segment_bytes})
        value = b"s" * record_bytes
        for _ in range(produces):
            try:
                c.produce(topic, 0, [value])
                out.accepted += 1
            except NativeError as exc:
                out.refused.append(exc.message)
    return topic, out


def tank_create_topics(tank: Address, topics: int = 5, partitions: int = 1000,
                       prefix: str | None = None) -> tuple[list[str], list[int]]:
    """TANK CreateTopic of `topics` topics of `partitions` partitions each; their names and error codes (0
    created)."""
    from logway.clients.tank import TankClient

    prefix = prefix or _name("abusetank")
    names = [f"{prefix}{i}" for i in range(topics)]
    with TankClient(*tank, timeout=120) as c:
        return names, [c.create_topic(name, partitions) for name in names]


def auto_create_topics(kafka: Address, topics: int, *, per_request: int = 50,
                       prefix: str | None = None) -> dict[str, int]:
    """Kafka Metadata (allow_auto_topic_creation) naming `topics` unknown topics, `per_request` at a time; each
    topic's error code (0 created, or the refusal)."""
    from logway.clients.kafka import KafkaClient, KafkaConfig
    from logway.clients.kafka_routes import V_METADATA
    from logway.codecs.kafka.api import metadata

    prefix = prefix or _name("abuse-auto")
    names = [f"{prefix}-{i}" for i in range(topics)]
    codes: dict[str, int] = {}
    client = KafkaClient(KafkaConfig(*kafka, connect_timeout=10, timeout=120, retries=0))
    client.connect()
    try:
        for start in range(0, topics, per_request):
            body = metadata.MetadataRequest(topics=[metadata.MetadataRequestTopic(name=n)
                                                    for n in names[start:start + per_request]],
                                            allow_auto_topic_creation=True)
            for t in client.call(metadata.API_KEY, V_METADATA, body).body.topics:
                codes[t.name] = t.error_code
    finally:
        client.close()
    return codes


def tiny_records_many_partitions(native: Address, partitions: int = 64, *, record: bytes = b"x",
                                 topic: str | None = None) -> tuple[str, Refusals]:
    """One topic of `partitions` partitions and one `record` produced into each (native)."""
    from logway.clients.errors import NativeError
    from logway.clients.native import NativeClient

    topic = topic or _name("abuse-tiny")
    out = Refusals()
    with NativeClient(*native) as c:
        c.create_topic(topic, partitions)
        for p in range(partitions):
            try:
                c.produce(topic, p, [record])
                out.accepted += 1
            except NativeError as exc:
                out.refused.append(exc.message)
    return topic, out


def seqnum_jump(tank: Address, topic: str, partition: int = 0, seq: int = SEQNUM_JUMP) -> int:
    """TANK ProduceWithSeqnum of one message at sequence number `seq` into an existing topic; the error code (0
    appended, 0x0a invalid sequence number)."""
    from logway.clients.tank import TankClient

    with TankClient(*tank) as c:
        return c.produce_with_seqnum(topic, partition, [b"jump"], seq)


def tank_retention_overflow(tank: Address, secs: int = 10**30, topic: str | None = None) -> tuple[str, int]:
    """TANK CreateTopic with `log.retention.secs=secs`; the topic's name and the error code (4: invalid config)."""
    from logway.clients.tank import TankClient

    topic = topic or _name("abuseret")
    with TankClient(*tank) as c:
        return topic, c.create_topic(topic, 1, {"log.retention.secs": str(secs)})


def long_names(native: Address, kafka: Address, lengths=(247, 248, 249)) -> dict[tuple[str, int], str]:
    """For each protocol (native, Kafka) and each length, create a topic whose name has that many characters, produce
    to it, delete it; what each step answered ("ok" or the error) by (protocol, length)."""
    from logway.clients.errors import KafkaError, NativeError
    from logway.clients.kafka import KafkaClient, KafkaConfig
    from logway.clients.native import NativeClient

    out: dict[tuple[str, int], str] = {}
    with NativeClient(*native) as c:
        for n in lengths:
            name = ("n" + uuid.uuid4().hex * 8)[:n]
            try:
                c.create_topic(name, 2)
                c.produce(name, 1, [b"long"])
                c.delete_topic(name)
                out["native", n] = "ok"
            except NativeError as exc:
                out["native", n] = exc.message
    client = KafkaClient(KafkaConfig(*kafka, connect_timeout=10, timeout=60, retries=0))
    client.connect()
    try:
        for n in lengths:
            name = ("k" + uuid.uuid4().hex * 8)[:n]
            try:
                client.create_topic(name, 2, exist_ok=False)
                client.delete_topic(name)
                out["kafka", n] = "ok"
            except KafkaError as exc:
                out["kafka", n] = str(exc)
    finally:
        client.close()
    return out
