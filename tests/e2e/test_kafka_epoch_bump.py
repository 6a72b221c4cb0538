"""KIP-360 with a real client: librdkafka's idempotent producer whose in-flight messages time out bumps its epoch
itself (keeping its producer id, as KIP-360 lets an idempotent producer do) and goes on producing with sequence 0
of the next epoch: the partition takes it — no gap refused, nothing lost, nothing written twice. (The transactional
bump through InitProducerId v3+ is tested at the byte level in tests/gateway/test_kafka_versions.py.)

The gateway advertises a proxy (kafka.advertised_port) that can hold back everything the gateway answers, so a
produce request stays in flight past the client's message.timeout.ms."""

from __future__ import annotations

import socket
import threading
import time
import uuid

import pytest

from logway.bench.launcher import GatewayProcess
from logway.clients.kafka import KafkaClient, KafkaConfig
from logway.codecs.kafka.connection import KafkaRequest, KafkaServerConnection
from logway.codecs.kafka.records import decode_batch, iter_batches

pytestmark = pytest.mark.slow

confluent_kafka = pytest.importorskip("confluent_kafka")


class HoldingProxy:
    """Forwards bytes both ways between clients and `target`; while `hold` is set, the answers wait in the proxy
    (forwarded, in order, once it is cleared). Requests always go through, and are kept (`requests`, parsed by the
    gateway's own codec)."""

    def __init__(self, listener: socket.socket, target: tuple[str, int]) -> None:
        self.listener, self.target = listener, target
        self.hold = threading.Event()
        self.requests: list[KafkaRequest] = []
        threading.Thread(target=self._accept, daemon=True).start()

    def _accept(self) -> None:
        while True:
            try:
                conn, _ = self.listener.accept()
            except OSError:
                return
            upstream = socket.create_connection(self.target)
            threading.Thread(target=self._pipe, args=(conn, upstream, False), daemon=True).start()
            threading.Thread(target=self._pipe, args=(upstream, conn, True), daemon=True).start()

    def _pipe(self, src: socket.socket, dst: socket.socket, answers: bool) -> None:
        held: list[bytes] = []
        requests = None if answers else KafkaServerConnection()
        try:
            while True:
                if answers and not self.hold.is_set() and held:
                    dst.sendall(b"".join(held))
                    held.clear()
                src.settimeout(0.05)
                try:
                    data = src.recv(1 << 16)
                except socket.timeout:
                    continue
                if not data:
                    return
                if requests is not None:
                    requests.receive_data(data)
                    while isinstance(event := requests.next_event(), KafkaRequest):
                        self.requests.append(event)
                if answers and (self.hold.is_set() or held):
                    held.append(data)
                else:
                    dst.sendall(data)
        except OSError:
            return
        finally:
            for s in (src, dst):
                try:
                    s.shutdown(socket.SHUT_RDWR)
                except OSError:
                    pass

    def close(self) -> None:
        self.listener.close()


def test_an_idempotent_producer_whose_messages_time_out_bumps_its_epoch_and_goes_on(tmp_path):
    listener = socket.create_server(("127.0.0.1", 0))
    port = listener.getsockname()[1]
    topic = "bump-" + uuid.uuid4().hex[:8]
    with GatewayProcess(str(tmp_path / "data"), f"kafka.advertised_port={port}", "log_level=WARNING") as gw:
        proxy = HoldingProxy(listener, gw.addresses["kafka"])
        try:
            with KafkaClient(KafkaConfig.parse("%s:%d" % gw.addresses["kafka"])) as admin:
                admin.create_topic(topic, 1)
            reports: list[tuple[bytes, str | None]] = []
            producer = confluent_kafka.Producer({
                "bootstrap.servers": f"127.0.0.1:{port}", "enable.idempotence": True, "linger.ms": 0,
                "message.timeout.ms": 1500, "request.timeout.ms": 30000, "retry.backoff.ms": 50})

            def report(err, msg):
                reports.append((msg.value(), None if err is None else err.name()))

            for i in range(5):
                producer.produce(topic, b"before-%d" % i, partition=0, on_delivery=report)
            assert producer.flush(20) == 0
            proxy.hold.set()  # the next produce is appended, but its answer never reaches the client in time
            producer.produce(topic, b"held", partition=0, on_delivery=report)
            deadline = time.monotonic() + 20
            while not any(v == b"held" for v, _ in reports) and time.monotonic() < deadline:
                producer.poll(0.1)
            proxy.hold.clear()
            for i in range(5):
                producer.produce(topic, b"after-%d" % i, partition=0, on_delivery=report)
            assert producer.flush(20) == 0
            del producer
        finally:
            proxy.close()
        assert (b"held", "_MSG_TIMED_OUT") in reports
        assert [e for v, e in reports if v != b"held"] == [None] * 10  # no sequence error after the bump
        with KafkaClient(KafkaConfig.parse("%s:%d" % gw.addresses["kafka"])) as client:
            batches = [decode_batch(b) for b in iter_batches(client.fetch(topic, 0, 0, 1 << 20).records)]
    values = [r.value for _, records in batches for r in records]
    # the held message was appended once (its answer was late, not lost); everything else once, in order
    assert values == [b"before-%d" % i for i in range(5)] + [b"held"] + [b"after-%d" % i for i in range(5)]
    ids = {(h.producer_id, h.producer_epoch) for h, _ in batches}
    (pid, first_epoch), = {(h.producer_id, h.producer_epoch) for h, records in batches
                           if records[0].value == b"before-0"}
    after = [(h.producer_id, h.producer_epoch, h.base_sequence) for h, records in batches
             if records[0].value == b"after-0"]
    assert after == [(pid, first_epoch + 1, 0)], ids  # the same producer id, the next epoch, sequences anew


def test_a_transactional_producer_whose_messages_time_out_aborts_bumps_its_epoch_and_commits_the_next(tmp_path):
    """An abortable error (a message timed out in a transaction): librdkafka aborts, then asks InitProducerId v3+
    for the next epoch of the producer id and epoch it names (KIP-360); the next transaction commits."""
    listener = socket.create_server(("127.0.0.1", 0))
    port = listener.getsockname()[1]
    topic = "bumptx-" + uuid.uuid4().hex[:8]
    with GatewayProcess(str(tmp_path / "data"), f"kafka.advertised_port={port}", "log_level=WARNING",
                        "kafka.transaction_abort_check_ms=200") as gw:
        proxy = HoldingProxy(listener, gw.addresses["kafka"])
        try:
            with KafkaClient(KafkaConfig.parse("%s:%d" % gw.addresses["kafka"])) as admin:
                admin.create_topic(topic, 1)
            producer = confluent_kafka.Producer({
                "bootstrap.servers": f"127.0.0.1:{port}", "transactional.id": "tx-" + uuid.uuid4().hex[:6],
                "linger.ms": 0, "message.timeout.ms": 1500, "request.timeout.ms": 30000,
                "transaction.timeout.ms": 60000})
            producer.init_transactions(20)
            producer.begin_transaction()
            producer.produce(topic, b"committed-1", partition=0)
            producer.commit_transaction(20)
            producer.begin_transaction()
            proxy.hold.set()
            producer.produce(topic, b"held", partition=0)
            producer.flush(5)  # (the message times out: an abortable error)
            proxy.hold.clear()
            with pytest.raises(confluent_kafka.KafkaException) as failed:
                producer.commit_transaction(20)
            assert failed.value.args[0].txn_requires_abort()
            producer.abort_transaction(20)
            producer.begin_transaction()
            producer.produce(topic, b"committed-2", partition=0)
            producer.commit_transaction(20)
            del producer
        finally:
            proxy.close()
        with KafkaClient(KafkaConfig.parse("%s:%d" % gw.addresses["kafka"])) as client:
            batches = [decode_batch(b) for b in iter_batches(client.fetch(topic, 0, 0, 1 << 20).records)]
    data = [(h.producer_id, h.producer_epoch, records[0].value) for h, records in batches if not h.is_control]
    (pid, epoch, _), = [d for d in data if d[2] == b"committed-1"]
    assert [d for d in data if d[2] == b"committed-2"] == [(pid, epoch + 1, b"committed-2")]
    inits = [(r.api_version >= 3, r.body.producer_id, r.body.producer_epoch) for r in proxy.requests
             if r.api_key == 22]
    assert inits[-1] == (True, pid, epoch)  # the bump named the producer it bumps
