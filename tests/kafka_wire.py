"""`logway.clients.KafkaClient` for tests that must send exact bytes (e.g. the same idempotent batch twice) that
kafka-python would never send on purpose: one attempt, no retry, answers returned unchecked. Also what the wire-level
Kafka tests share: `new_topic` and the `client` fixture (on the module's own `gw` gateway process)."""

from __future__ import annotations

import uuid

import pytest

from logway.clients.kafka import KafkaClient, KafkaConfig
from logway.clients.native import NativeClient


class KafkaWireClient:
    """`call` gives a response body, `produce` a partition's (error code, base offset), whatever they say."""

    def __init__(self, host: str, port: int) -> None:
        self.client = KafkaClient(KafkaConfig(host, port, connect_timeout=10, timeout=10, retries=0))
        self.client.connect()

    def call(self, api_key: int, version: int, body):
        return self.client.call(api_key, version, body).body

    def init_producer_id(self) -> tuple[int, int]:
        return self.client.init_producer_id()

    def produce(self, topic: str, partition: int, records: bytes, *, acks: int = -1) -> tuple[int, int]:
        """(error code, base offset) of one partition's answer."""
        part = self.client.produce_answer(topic, partition, records, acks=acks, timeout_ms=10000)
        return part.error_code, part.base_offset

    def close(self) -> None:
        self.client.close()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()


def new_topic(gw, partitions: int = 1, prefix: str = "w-") -> str:
    """A fresh kafka-format topic on a running `GatewayProcess`, created over the native protocol."""
    name = prefix + uuid.uuid4().hex[:8]
    with NativeClient(*gw.native) as c:
        c.create_topic(name, partitions)
    return name


@pytest.fixture
def client(gw):
    """A `KafkaWireClient` on the test module's `gw` gateway process (import it into the module to use it)."""
    with KafkaWireClient(*gw.addresses["kafka"]) as c:
        yield c
