"""Two gateway processes over one PostgreSQL database in cluster mode (`storage.postgres.cluster`), as the tests
start them: `member` (one gateway), `leaders`/`settled` (the partitions' leaders as a Kafka client is told them,
once the cluster settled), `stored_records` (a topic read back whole, checked contiguous), and `GatewayPair` — two
members that look like one gateway to a test written for one: Kafka clients bootstrap from the first (and find
both), native and TANK clients connect to the second (which relays what the first leads)."""

from __future__ import annotations

import time

from confluent_kafka import Consumer, TopicPartition
from confluent_kafka.admin import AdminClient

from logway.bench.launcher import GatewayProcess
from logway.bench.postgres import PASSWORD, USER

#: Short leases, so a dead member's partitions are taken over in about a second and a half.
LEASE_MS = 1000


def cluster_settings(server, dbname: str) -> list[str]:
    """The --set flags of a cluster member on database `dbname` of `server` (a `PostgresServer`)."""
    keys = {"host": "127.0.0.1", "port": server.port, "user": USER, "password": PASSWORD, "dbname": dbname,
            "connect_timeout_ms": 2000, "cluster": "true", "lease_ms": LEASE_MS}
    return ["storage.backend=postgres", *(f"storage.postgres.{k}={v}" for k, v in keys.items())]


def member(data_dir, server, dbname: str, *extra: str) -> GatewayProcess:
    return GatewayProcess(str(data_dir), *cluster_settings(server, dbname), "log_level=WARNING", *extra)


def bootstrap(gw) -> str:
    return "%s:%d" % gw.addresses["kafka"]


def leaders(gw, topic: str | None, partitions: int = 0, timeout: float = 20.0,
            until=lambda brokers, leaders: True) -> tuple[set, list]:
    """(node ids of the brokers, each of `partitions` partitions' leader) as `gw` tells a Kafka client, once `until`
    holds (`topic` None: the brokers alone)."""
    admin = AdminClient({"bootstrap.servers": bootstrap(gw)})
    deadline = time.monotonic() + timeout
    while True:
        md = admin.list_topics(topic, timeout=5) if topic is not None else admin.list_topics(timeout=5)
        brokers = set(md.brokers)
        parts = md.topics[topic].partitions if topic in md.topics and md.topics[topic].error is None else {}
        found = [parts[p].leader if p in parts else -1 for p in range(partitions)]
        if until(brokers, found):
            return brokers, found
        assert time.monotonic() < deadline, f"the cluster did not settle: brokers {brokers}, leaders {found}"
        time.sleep(0.1)


def settled(a, b, topic: str, partitions: int) -> list[int]:
    """The partitions' leaders once both gateways tell them alike, each leading some."""
    _, found = leaders(b, topic, partitions, until=lambda brokers, found: len(brokers) == 2 and set(found) == brokers)
    return leaders(a, topic, partitions, until=lambda brokers, seen: seen == found)[1]


def stored_records(gw, topic: str, partitions: int) -> dict[tuple[int, int], bytes]:
    """Every record of `topic` by (partition, offset), read through a Kafka consumer of `gw`; each partition's
    offsets checked contiguous from 0 to its end."""
    reader = Consumer({"bootstrap.servers": bootstrap(gw), "group.id": "check", "enable.auto.commit": False})
    stored: dict[tuple[int, int], bytes] = {}
    try:
        for p in range(partitions):
            _, high = reader.get_watermark_offsets(TopicPartition(topic, p), timeout=10)
            reader.assign([TopicPartition(topic, p, 0)])
            offsets: set[int] = set()
            while len(offsets) < high:
                msg = reader.poll(5)
                assert msg is not None, f"partition {p}: nothing more before {high}"
                if msg.error() is None:
                    stored[(p, msg.offset())] = msg.value()
                    offsets.add(msg.offset())
            assert sorted(offsets) == list(range(high)), f"partition {p}: offsets not contiguous"
    finally:
        reader.close()
    return stored


class GatewayPair:
    """Two members of one cluster, started in a row and settled (each sees both), standing in for one gateway:
    `addresses["kafka"]` is the first's, `native` and `addresses["tank"]` the second's."""

    def __init__(self, tmp_path, server, dbname: str, *extra: str) -> None:
        self.first = member(tmp_path / "first", server, dbname, *extra)
        try:
            self.second = member(tmp_path / "second", server, dbname, *extra)
        except BaseException:
            self.first.stop()
            raise
        for gw in (self.first, self.second):
            leaders(gw, None, until=lambda brokers, _: len(brokers) == 2)
        self.addresses = {**self.first.addresses, "native": self.second.native, "tank": self.second.addresses["tank"]}

    @property
    def native(self) -> tuple[str, int]:
        return self.addresses["native"]

    def stop(self) -> None:
        self.first.stop()
        self.second.stop()

    def __enter__(self) -> "GatewayPair":
        return self

    def __exit__(self, *exc) -> None:
        self.stop()
