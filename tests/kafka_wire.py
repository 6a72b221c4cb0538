"""A tiny blocking Kafka client over `logway.codecs.kafka.connection`, for tests that must send exact bytes
(e.g. the same idempotent batch twice) that kafka-python would never send on purpose."""

from __future__ import annotations

import socket

from logway.codecs.kafka.api import admin, produce
from logway.codecs.kafka.connection import CLOSED, NEED_DATA, KafkaClientConnection


class KafkaWireClient:
    def __init__(self, host: str, port: int) -> None:
        self.sock = socket.create_connection((host, port), timeout=10)
        self.codec = KafkaClientConnection()

    def call(self, api_key: int, version: int, body):
        self.sock.sendall(self.codec.send_request(api_key, version, body))
        while True:
            event = self.codec.next_event()
            if event is NEED_DATA:
                self.codec.receive_data(self.sock.recv(1 << 20))
            elif event is CLOSED:
                raise ConnectionError("closed by the gateway")
            else:
                return event.body

    def init_producer_id(self) -> tuple[int, int]:
        resp = self.call(22, 1, admin.InitProducerIdRequest(transactional_id=None, transaction_timeout_ms=60000))
        assert resp.error_code == 0, resp
        return resp.producer_id, resp.producer_epoch

    def produce(self, topic: str, partition: int, records: bytes, *, acks: int = -1) -> tuple[int, int]:
        """(error code, base offset) of one partition's answer."""
        body = produce.ProduceRequest(transactional_id=None, acks=acks, timeout_ms=10000, topic_data=[
            produce.TopicProduceData(name=topic, partition_data=[
                produce.PartitionProduceData(index=partition, records=records)])])
        resp = self.call(0, 8, body)
        part = resp.responses[0].partition_responses[0]
        return part.error_code, part.base_offset

    def close(self) -> None:
        self.sock.close()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()
