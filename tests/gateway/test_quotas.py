"""Client quotas (issue 34): which entity's quota applies to a (user, client id) and who shares it (Kafka's order),
the throttle time a client past its bound is charged (Kafka's formula), DescribeClientQuotas / AlterClientQuotas
through a Kafka client, and a gateway process throttling one tenant's produces and fetches — its answers carry
throttle_time_ms and its next request waits; a native client's answers are delayed — while another tenant's are
not."""

from __future__ import annotations

import time
import uuid

import pytest

from logway.bench.launcher import GatewayProcess
from logway.clients.kafka import KafkaClient, KafkaConfig
from logway.clients.native import NativeClient
from logway.codecs.kafka.api import fetch as F
from logway.codecs.kafka.api import produce as P
from logway.codecs.kafka.api import quotas as Q
from logway.codecs.kafka.error_codes import ErrorCode as E
from logway.codecs.kafka.records import encode_batch
from logway.codecs.records import Record
from logway.gateway.security.quotas import SAMPLE_S, WINDOW_SAMPLES, Quotas
from logway.storage.security import SecurityStore


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


@pytest.fixture
def store(tmp_path):
    s = SecurityStore(tmp_path)
    yield s
    s.close()


def test_the_first_entity_that_sets_a_key_gives_it_and_says_who_shares_it(store):
    store.set_quotas((("user", None),), {"producer_byte_rate": 1000.0, "request_percentage": 50.0})
    store.set_quotas((("user", "alice"),), {"producer_byte_rate": 5000.0})
    store.set_quotas((("client-id", "etl"), ("user", "alice")), {"consumer_byte_rate": 7.0})
    store.set_quotas((("client-id", None),), {"consumer_byte_rate": 100.0})
    quotas = Quotas(store, Clock())
    alice, bob = quotas._bounds_of("alice", "etl"), quotas._bounds_of("bob", "etl")
    assert alice["producer_byte_rate"].value == 5000 and alice["producer_byte_rate"].sensor == (
        "producer_byte_rate", "alice", "")  # one budget for every connection of alice's
    assert alice["consumer_byte_rate"].value == 7 and alice["request_percentage"].value == 50
    assert bob["producer_byte_rate"].value == 1000 and bob["producer_byte_rate"].sensor == (
        "producer_byte_rate", "bob", "")  # the default user's quota: a budget per user
    assert bob["consumer_byte_rate"].value == 100 and bob["consumer_byte_rate"].sensor == (
        "consumer_byte_rate", "", "etl")  # the default client id's: a budget per client id


def test_a_client_past_its_bound_is_throttled_as_kafka_computes_it(store):
    store.set_quotas((("user", "alice"),), {"producer_byte_rate": 1000.0})
    clock = Clock()
    quotas = Quotas(store, clock)
    window = SAMPLE_S * (WINDOW_SAMPLES - 1)  # (the shortest window a rate is measured over)
    assert quotas.charge("User:alice", "a", "produce", 1000 * window) == 0.0  # exactly at the bound
    delay = quotas.charge("User:alice", "b", "produce", 1000 * window)  # twice the bound: another client, shared
    assert delay == pytest.approx(window)  # (observed - bound) / bound × window
    assert quotas.charge("User:bob", "a", "produce", 10**9) == 0.0  # no quota of bob's
    clock.now += SAMPLE_S * WINDOW_SAMPLES  # the window has passed: the budget is whole again
    assert quotas.charge("User:alice", "a", "produce", 1000) == 0.0
    assert quotas.charge("User:alice", "a", "produce", 10**12) == SAMPLE_S * WINDOW_SAMPLES  # (at most the window)
    assert quotas.throttled == {"producer_byte_rate": 2}


def test_a_change_is_read_again(store):
    quotas = Quotas(store, Clock())
    assert quotas.charge("User:alice", None, "fetch", 10**9) == 0.0
    quotas.change([((("user", "alice"),), {"consumer_byte_rate": 1.0})])
    assert quotas.charge("User:alice", None, "fetch", 10**9) > 0
    quotas.change([((("user", "alice"),), {"consumer_byte_rate": None})])
    assert quotas.entries() == {} and quotas.charge("User:alice", None, "fetch", 10**9) == 0.0


# -- through a gateway process --------------------------------------------------------------------------------------

@pytest.fixture(scope="module")
def gw(tmp_path_factory):
    data = str(tmp_path_factory.mktemp("quotas") / "data")
    g = GatewayProcess(data, "auth.kafka_sasl_plain=true", "auth.users.admin=adm", "auth.users.slow=slow-pw",
                       "auth.users.fast=fast-pw", "auth.super_users=User:admin;User:slow;User:fast",
                       "auth.native_token=tok", "log_level=ERROR")
    yield g
    g.stop()


def kafka(gw, user: str) -> KafkaClient:
    host, port = gw.addresses["kafka"]
    client = KafkaClient(KafkaConfig(host, port, client_id=f"{user}-client", connect_timeout=10, timeout=30,
                                     retries=0, security_protocol="SASL_PLAINTEXT", sasl_username=user,
                                     sasl_password="adm" if user == "admin" else f"{user}-pw"))
    client.connect()
    return client


def call(client, key, version, body):
    return client.call(key, version, body).body


def test_quotas_are_altered_and_described_with_the_kafka_apis(gw):
    with kafka(gw, "admin") as admin:
        altered = call(admin, Q.ALTER_CLIENT_QUOTAS_KEY, 1, Q.AlterClientQuotasRequest([
            Q.AlterEntryData([Q.EntityData("user", "carol")], [Q.OpData("producer_byte_rate", 2048.0, False),
                                                                Q.OpData("request_percentage", 25.0, False)]),
            Q.AlterEntryData([Q.EntityData("user", None), Q.EntityData("client-id", "etl")],
                             [Q.OpData("consumer_byte_rate", 4096.0, False)]),
            Q.AlterEntryData([Q.EntityData("ip", "10.0.0.1")], [Q.OpData("connection_creation_rate", 5.0, False)]),
            Q.AlterEntryData([Q.EntityData("user", "carol")], [Q.OpData("controller_mutation_rate", 1.0, False)]),
            Q.AlterEntryData([Q.EntityData("user", "dan")], [Q.OpData("producer_byte_rate", -1.0, False)]),
        ], False))
        assert [e.error_code for e in altered.entries] == [E.NONE, E.NONE] + [E.INVALID_REQUEST] * 3
        assert "not enforced" in altered.entries[3].error_message
        everything = call(admin, Q.DESCRIBE_CLIENT_QUOTAS_KEY, 1, Q.DescribeClientQuotasRequest([], False))
        assert {tuple((e.entity_type, e.entity_name) for e in entry.entity): {v.key: v.value for v in entry.values}
                for entry in everything.entries} == {
            (("user", "carol"),): {"producer_byte_rate": 2048.0, "request_percentage": 25.0},
            (("client-id", "etl"), ("user", None)): {"consumer_byte_rate": 4096.0}}
        carol = call(admin, Q.DESCRIBE_CLIENT_QUOTAS_KEY, 1, Q.DescribeClientQuotasRequest(
            [Q.ComponentData("user", Q.MATCH_EXACT, "carol")], True))
        assert [[(e.entity_type, e.entity_name) for e in entry.entity] for entry in carol.entries] == [
            [("user", "carol")]]
        defaults = call(admin, Q.DESCRIBE_CLIENT_QUOTAS_KEY, 1, Q.DescribeClientQuotasRequest(
            [Q.ComponentData("user", Q.MATCH_DEFAULT, None)], False))
        assert len(defaults.entries) == 1 and defaults.entries[0].values[0].key == "consumer_byte_rate"
        assert call(admin, Q.DESCRIBE_CLIENT_QUOTAS_KEY, 0, Q.DescribeClientQuotasRequest(
            [Q.ComponentData("ip", Q.MATCH_ANY, None)], False)).error_code == E.INVALID_REQUEST
        removed = call(admin, Q.ALTER_CLIENT_QUOTAS_KEY, 1, Q.AlterClientQuotasRequest([Q.AlterEntryData(
            [Q.EntityData("user", "carol")], [Q.OpData("producer_byte_rate", 0.0, True),
                                              Q.OpData("request_percentage", 0.0, True)])], False))
        assert removed.entries[0].error_code == E.NONE
        validated = call(admin, Q.ALTER_CLIENT_QUOTAS_KEY, 1, Q.AlterClientQuotasRequest([Q.AlterEntryData(
            [Q.EntityData("user", "carol")], [Q.OpData("producer_byte_rate", 1.0, False)])], True))
        assert validated.entries[0].error_code == E.NONE
        left = call(admin, Q.DESCRIBE_CLIENT_QUOTAS_KEY, 1, Q.DescribeClientQuotasRequest(
            [Q.ComponentData("user", Q.MATCH_EXACT, "carol")], False))
        assert left.entries == []  # removed, and the validate-only change made nothing


def _produce(client, topic: str, size: int):
    batch = encode_batch([Record(b"x" * size)], default_timestamp=int(time.time() * 1000))
    return call(client, P.API_KEY, 8, P.ProduceRequest(None, -1, 10000, [
        P.TopicProduceData(topic, [P.PartitionProduceData(0, batch)])]))


def test_one_tenant_past_its_quota_is_throttled_and_the_others_are_not(gw):
    topic = "q-" + uuid.uuid4().hex[:8]
    with NativeClient(*gw.native, token="tok") as c:
        c.create_topic(topic, 1)
    with kafka(gw, "admin") as admin:
        call(admin, Q.ALTER_CLIENT_QUOTAS_KEY, 1, Q.AlterClientQuotasRequest([Q.AlterEntryData(
            [Q.EntityData("user", "slow")], [Q.OpData("producer_byte_rate", 20_000.0, False),
                                             Q.OpData("consumer_byte_rate", 20_000.0, False)])], False))
    with kafka(gw, "slow") as slow, kafka(gw, "fast") as fast:
        first = _produce(slow, topic, 240_000)  # 24 kB/s over the 10 s window, bound 20 kB/s: (24 - 20) / 20 × 10 s
        assert first.responses[0].partition_responses[0].error_code == E.NONE
        assert 1500 <= first.throttle_time_ms <= 2500
        for _ in range(3):  # the other tenant, at the same time, is not slowed at all
            assert _produce(fast, topic, 400_000).throttle_time_ms == 0
        started = time.monotonic()
        second = _produce(slow, topic, 10)  # muted: this request is read only once the throttle time has passed
        assert time.monotonic() - started >= first.throttle_time_ms / 1000 * 0.9
        assert second.throttle_time_ms > 0  # (still past its bound: the window remembers)
        fetch = F.FetchRequest(-1, 0, 1, 1 << 22, 0, 0, -1, [F.FetchTopic(topic, [F.FetchPartition(0, -1, 0, -1,
                                                                                                 1 << 22)])])
        assert call(fast, F.API_KEY, 11, fetch).throttle_time_ms == 0
    with kafka(gw, "slow") as slow_again:  # a budget is the user's, whichever its connection
        assert call(slow_again, F.API_KEY, 11, fetch).throttle_time_ms > 0


def test_a_native_client_past_its_quota_gets_its_answers_late(gw):
    topic = "qn-" + uuid.uuid4().hex[:8]
    with NativeClient(*gw.native, token="tok") as c:
        c.create_topic(topic, 1)
    with kafka(gw, "admin") as admin:  # the token's principal is Token:native: its user name is "native"
        call(admin, Q.ALTER_CLIENT_QUOTAS_KEY, 1, Q.AlterClientQuotasRequest([Q.AlterEntryData(
            [Q.EntityData("user", "native")], [Q.OpData("producer_byte_rate", 100_000.0, False)])], False))
    with NativeClient(*gw.native, token="tok") as c:
        started = time.monotonic()
        c.produce(topic, 0, [b"y" * 1_200_000])  # 120 kB/s over the window, bound 100 kB/s: 2 s late
        assert time.monotonic() - started >= 1.5
