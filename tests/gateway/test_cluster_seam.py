"""The cluster seam (`logway.gateway.cluster`): with one process no code of the cluster package runs while requests
of every protocol are served; a membership source other than the supervisor's workers plugs in without touching a
protocol (Kafka clients see its members as brokers and its ownership as partition leaders); storage opens only
the partitions the ownership predicate it is handed gives it."""

from __future__ import annotations

import sys
from pathlib import Path

import trio

from logway.clients.kafka import AsyncKafkaClient, KafkaConfig
from logway.clients.tank import AsyncTankClient
from logway.codecs.kafka.api import groups as G
from logway.codecs.kafka.api import metadata as M
from logway.codecs.kafka.error_codes import ErrorCode as E
from logway.codecs.kafka.records import encode_batch
from logway.codecs.records import Record
from logway.gateway import cluster
from logway.gateway.cluster.membership import Member, Membership
from logway.gateway.cluster.ownership import Ownership, leaders, partition_leader
from logway.gateway.formats import STORAGE_FORMATS
from logway.gateway.server import Gateway
from logway.storage import LogEngine
from logway.storage.engine import ForeignPartition, Share

from ..conftest import AsyncNative, gateway_config

CLUSTER_DIR = str(Path(cluster.__file__).resolve().parent)


def _batch(value: bytes) -> bytes:
    return encode_batch([Record(value)], base_offset=0, default_timestamp=0)


class _CalledInto:
    """Every function of `directory`'s modules called in this thread while installed (a `sys.setprofile` hook)."""

    def __init__(self, directory: str) -> None:
        self.directory = directory
        self.calls: set[str] = set()

    def __call__(self, frame, event, arg) -> None:
        if event == "call" and frame.f_code.co_filename.startswith(self.directory):
            self.calls.add(f"{Path(frame.f_code.co_filename).name}:{frame.f_code.co_name}")

    def __enter__(self):
        sys.setprofile(self)
        return self

    def __exit__(self, *exc) -> None:
        sys.setprofile(None)


async def test_one_process_runs_no_cluster_code_on_the_request_path(tmp_path):
    gw = Gateway(gateway_config(tmp_path / "data", "storage.flush=always"))
    async with trio.open_nursery() as nursery:
        await nursery.start(gw.run)
        assert gw.cluster is None and gw.context.cluster is None
        native = await AsyncNative.connect(gw)
        host, port = gw.addresses["kafka"]
        kafka = AsyncKafkaClient(KafkaConfig(host, port, timeout=10, retries=0))
        tank = await AsyncTankClient.connect(*gw.addresses["tank"], timeout=10)
        try:
            with _CalledInto(CLUSTER_DIR) as probe:
                assert await native.create_topic("seam", 2)
                assert (await native.produce("seam", 1, [b"n"])).offsets == [0]
                await kafka.create_topic("seam-k", 2)
                part = await kafka.produce_answer("seam-k", 1, _batch(b"k"))
                assert part.error_code == E.NONE
                assert await tank.produce("seam", 0, [b"t"]) >= 0
                got = await tank.get("seam", 1, 0)
                assert [m.value for m in got.messages] == [b"n"]
                metadata = (await kafka.call(M.API_KEY, 9, M.MetadataRequest(topics=None))).body
                assert [b.node_id for b in metadata.brokers] == [0]
        finally:
            await native.aclose()
            await kafka.aclose()
            await tank.aclose()
            gw.request_shutdown()
    assert probe.calls == set(), f"cluster code ran with one process: {sorted(probe.calls)}"


class StaticMembership(Membership):
    """A second membership source, as a test writes one: members fixed at construction (this one first)."""

    def __init__(self, me: int, members: list[Member]) -> None:
        super().__init__()
        self.me, self.count, self._members = me, len(members), members
        self.looked_up: list[set[str]] = []

    def members(self) -> list[Member]:
        return self._members

    async def look_up(self, engine, names) -> None:
        self.looked_up.append(set(names))

    async def refresh(self, engine, max_age: float = 0.0) -> None:
        pass


async def test_a_second_membership_source_plugs_in_without_touching_the_protocols(tmp_path):
    """Member 0 of two, its ownership from the source: Metadata lists both members as brokers with their leaders;
    a produce to a partition member 1 leads is NOT_LEADER_OR_FOLLOWER, one to member 0's is appended; the
    coordinator is member 0; a topic the request names that this member does not know is looked up first."""
    other = Member(1, kafka=("127.0.0.1", 1))
    source = StaticMembership(0, [Member(0, kafka=("127.0.0.1", 2)), other])
    gw = Gateway(gateway_config(tmp_path / "data"), worker=source)
    async with trio.open_nursery() as nursery:
        await nursery.start(gw.run)
        assert gw.cluster is not None and gw.cluster.several
        host, port = gw.addresses["kafka"]
        kafka = AsyncKafkaClient(KafkaConfig(host, port, timeout=10, retries=0))
        try:
            await kafka.create_topic("spread", 4)
            metadata = (await kafka.call(M.API_KEY, 9, M.MetadataRequest(
                topics=[M.MetadataRequestTopic(name="spread")]))).body
            assert [(b.node_id, b.host, b.port) for b in metadata.brokers] == [(0, "127.0.0.1", 2), (1, "127.0.0.1", 1)]
            leaders = {p.partition_index: p.leader_id for p in metadata.topics[0].partitions}
            assert leaders == {p: partition_leader("spread", p, 2) for p in range(4)}
            assert set(leaders.values()) == {0, 1}
            for p, leader in leaders.items():
                part = await kafka.produce_answer("spread", p, _batch(b"x"))
                assert part.error_code == (E.NONE if leader == 0 else E.NOT_LEADER_OR_FOLLOWER), p
            found = (await kafka.call(G.FIND_COORDINATOR_KEY, 1, G.FindCoordinatorRequest(key="g", key_type=0))).body
            assert (found.error_code, found.node_id, found.port) == (E.NONE, 0, 2)
            assert source.looked_up == []
            part = await kafka.produce_answer("elsewhere", 0, _batch(b"y"))  # another member's new topic?
            assert part.error_code == E.UNKNOWN_TOPIC_OR_PARTITION and source.looked_up == [{"elsewhere"}]
        finally:
            await kafka.aclose()
            gw.request_shutdown()


def test_storage_opens_only_what_the_ownership_predicate_gives_it(tmp_path):
    data = str(tmp_path / "data")
    supervisor = LogEngine(data, STORAGE_FORMATS, share=Share(2, leaders(2)))
    odd = Share(2, lambda topic, partition: partition % 2, 1, supervisor.clean_start)
    engine = LogEngine(data, STORAGE_FORMATS, share=odd)
    try:
        engine.create_topic("owned", 6)
        entries = [engine.topic("owned").partitions[p] for p in range(6)]
        assert [p for p, e in enumerate(entries) if not isinstance(e, ForeignPartition)] == [1, 3, 5]
        assert {e.owner for e in entries if isinstance(e, ForeignPartition)} == {0}
    finally:
        engine.close()
        supervisor.close()


def test_ownership_spreads_consecutive_partitions_over_consecutive_members():
    for members in (1, 2, 3, 5):
        first = partition_leader("orders", 0, members)
        assert [partition_leader("orders", p, members) for p in range(2 * members)] == \
            [(first + p) % members for p in range(2 * members)]
        assert sum(Ownership(m, members).leads("orders", 0) for m in range(members)) == 1
    # one-partition topics land on different members by name
    assert len({partition_leader(f"t{i}", 0, 3) for i in range(30)}) == 3
