"""What the wire cases of `tests/hostile` share (not a test module; the pytest side is in `conftest.py`).

- the in-process gateway (`GatewayThread`, started once for the package by the `gw` fixture, which sets `GW`),
  the topics made for every case (`setup_topics`) and the collector of its ERROR log records;
- blocking sockets to it (`connect`, `send_and_close`, `read_to_eof`, `NativeSock`, `KafkaSock`, `tank_client`)
  and the checks that it still serves every protocol (`assert_native_alive`, `assert_kafka_alive`,
  `assert_tank_alive`, `assert_all_alive`), on fresh connections and on those in `OLD`;
- the tables every case is built from: one valid request of every request type of every protocol
  (`NATIVE_REQUESTS`, `kafka_body` over `KAFKA_CASES`, `TANK_REQUESTS`) with the answers they get, and the
  cuts the truncation cases make of their frames (`truncation_params`, `truncate`);
- the hostile names (`HOSTILE_NAMES`, `INVALID_UTF8`) and `assert_nothing_escaped`.
"""

from __future__ import annotations

import logging
import os
import socket
import threading
import time
import typing

import pytest
import trio

from logway.clients.kafka import KafkaClient, KafkaConfig
from logway.clients.native import NativeClient
from logway.clients.tank import TankClient
from logway.codecs import native as nv
from logway.codecs.kafka import legacy
from logway.codecs.kafka.api import acls as KACL
from logway.codecs.kafka.api import admin as KA
from logway.codecs.kafka.api import cluster as KC
from logway.codecs.kafka.api import configs as KCF
from logway.codecs.kafka.api import consumer_groups as KCG
from logway.codecs.kafka.api import fetch as KF
from logway.codecs.kafka.api import groups as KG
from logway.codecs.kafka.api import list_offsets as KL
from logway.codecs.kafka.api import metadata as KM
from logway.codecs.kafka.api import offsets as KO
from logway.codecs.kafka.api import produce as KP
from logway.codecs.kafka.api import quotas as KQ
from logway.codecs.kafka.api import scram_credentials as KS
from logway.codecs.kafka.api import share_groups as KSG
from logway.codecs.kafka.api import transactions as KX
from logway.codecs.kafka.api.api_versions import ApiVersionsRequest
from logway.codecs.kafka.api.registry import API_KEYS, SUPPORTED, request_schema
from logway.codecs.kafka.connection import KafkaClientConnection, KafkaRequest
from logway.codecs.kafka.error_codes import ErrorCode as E
from logway.codecs.kafka.primitives import ZERO_UUID
from logway.codecs.kafka.records import encode_batch
from logway.codecs.records import Record
from logway.codecs.stream import CLOSED
from logway.codecs import tank as tk
from logway.gateway.protocols.kafka.broker import HANDLERS as KAFKA_HANDLERS
from logway.storage.names import validate_topic_name

from ..conftest import running_gateway

#: Every wait on a socket: far above what any answer here takes, far below "hangs".
TIMEOUT = 5.0
TS = 1_700_000_000_000

# Topics made once for the package (see `setup_topics`).
KT = "hk"  # kafka format, 2 partitions, 3 records in partition 0
TT = "ht"  # tank format, 2 partitions, 3 messages in partition 0
TSEQ = "htseq"  # tank format, the control ProduceWithSeqnum writes here
ALIVE = "halive"  # tank format: the liveness produce after every case
NDEL = "hdel"  # deleted by the native DeleteTopic control
GROUP = "hg"


# ============================================================================================ the gateway

class GatewayThread:
    """`conftest.running_gateway` in a trio run of its own thread, so one gateway serves the whole package while
    the tests use plain blocking sockets. Collects the gateway's ERROR log records (a crashed handler logs one)."""

    def __init__(self, data_dir, *overrides: str) -> None:
        self.data_dir = str(data_dir)
        self.errors: list[logging.LogRecord] = []
        self._handler = _Collector(self.errors)
        logging.getLogger("logway").addHandler(self._handler)
        self._started = threading.Event()
        self._failure: BaseException | None = None
        self._thread = threading.Thread(target=self._run, args=(overrides,), name="hostile-gateway", daemon=True)
        self._thread.start()
        if not self._started.wait(30):
            raise RuntimeError("the gateway did not start")
        if self._failure is not None:
            raise self._failure

    def _run(self, overrides) -> None:
        try:
            trio.run(self._main, overrides)
        except BaseException as exc:  # reported by __init__ or stop()
            self._failure = exc
        finally:
            self._started.set()

    async def _main(self, overrides) -> None:
        async with running_gateway(self.data_dir, *overrides) as gw:
            self.gateway = gw
            self.addresses = dict(gw.addresses)
            self._token = trio.lowlevel.current_trio_token()
            self._stop = trio.Event()
            self._started.set()
            await self._stop.wait()

    def stop(self) -> None:
        try:
            trio.from_thread.run_sync(self._stop.set, trio_token=self._token)
            self._thread.join(30)
        finally:
            logging.getLogger("logway").removeHandler(self._handler)
        if self._failure is not None:
            raise self._failure


class _Collector(logging.Handler):
    def __init__(self, into: list) -> None:
        super().__init__(logging.ERROR)
        self.into = into

    def emit(self, record: logging.LogRecord) -> None:
        self.into.append(record)


#: The package's gateway while the `gw` fixture is up (set and cleared by `conftest.gw`).
GW: GatewayThread | None = None

#: One connection per protocol opened before every case and used after each: hostile input on other
#: connections must not disturb it.
OLD: dict[str, typing.Any] = {}


_ERRORS_BEFORE = [0]


def watch_gateway_errors() -> None:
    """From now on, an ERROR the gateway logs fails `assert_no_gateway_errors` (called as each case starts)."""
    _ERRORS_BEFORE[0] = len(GW.errors)


def assert_no_gateway_errors() -> None:
    new = GW.errors[_ERRORS_BEFORE[0]:]
    assert not new, "the gateway logged errors:\n" + "\n".join(
        f"{r.name}: {r.getMessage()} {r.exc_info[1]!r}" if r.exc_info else f"{r.name}: {r.getMessage()}"
        for r in new)


def setup_topics() -> None:
    with NativeSock() as n:
        for name, partitions in ((KT, 2), (NDEL, 1)):
            assert n.request(nv.CreateTopicRequest(name, partitions)) == nv.CreateTopicResponse(True)
        assert n.request(nv.ProduceRequest(KT, 0, [Record(b"a"), Record(b"b"), Record(b"c")])).offsets == [0, 1, 2]
    with tank_client() as t:
        for name in (TT, TSEQ, ALIVE):
            assert t.create_topic(name, 2) == tk.CreateTopicError.OK
        assert t.produce(TT, 0, [b"x", b"y", b"z"]) == tk.ProduceError.OK


# ============================================================================================ sockets

def connect(protocol: str) -> socket.socket:
    s = socket.create_connection(GW.addresses[protocol], timeout=TIMEOUT)
    if protocol == "tank":
        assert recv_exact(s, 5) == tk.PING_FRAME  # the broker's greeting
    return s


def recv_exact(s: socket.socket, n: int) -> bytes:
    out = bytearray()
    while len(out) < n:
        try:
            data = s.recv(n - len(out))
        except socket.timeout:
            pytest.fail(f"no answer within {TIMEOUT} s ({len(out)} of {n} bytes)")
        if not data:
            raise ConnectionError(f"closed after {len(out)} of {n} bytes")
        out += data
    return bytes(out)


def read_to_eof(s: socket.socket) -> bytes:
    """Everything the gateway sends until it closes the connection; fails if it neither closes nor stops
    within TIMEOUT (a reset counts as a close)."""
    out = bytearray()
    deadline = time.monotonic() + TIMEOUT
    while True:
        s.settimeout(max(0.01, deadline - time.monotonic()))
        try:
            chunk = s.recv(65536)
        except socket.timeout:
            pytest.fail(f"the gateway neither answered nor closed within {TIMEOUT} s (received {bytes(out)!r:.200})")
        except ConnectionResetError:
            break
        if not chunk:
            break
        out += chunk
    return bytes(out)


def send_and_close(protocol: str, data: bytes, *, half_close: bool) -> bytes:
    """Send `data` on a fresh connection (optionally then EOF) and return what arrives before the gateway
    closes the connection."""
    s = connect(protocol)
    try:
        s.sendall(data)
        if half_close:
            s.shutdown(socket.SHUT_WR)
        return read_to_eof(s)
    finally:
        s.close()


class NativeSock(NativeClient):
    """A native connection to the package's gateway; answers come back unchecked (an Error is a value to assert
    on, so is CLOSED)."""

    def __init__(self) -> None:
        super().__init__(*GW.addresses["native"], timeout=TIMEOUT, connect_timeout=TIMEOUT, raise_errors=False)


class KafkaSock(KafkaClient):
    """A Kafka connection to the package's gateway: `call` returns the `KafkaResponse`, nothing is retried."""

    def __init__(self) -> None:
        super().__init__(KafkaConfig(*GW.addresses["kafka"], connect_timeout=TIMEOUT, timeout=TIMEOUT, retries=0))
        self.connect()


def tank_client():
    return TankClient(*GW.addresses["tank"], timeout=TIMEOUT)


# -- still serving ---------------------------------------------------------------------------------------------

def assert_native_alive() -> None:
    """No crash logged; a fresh connection and the one opened before the case both get a Pong."""
    assert_no_gateway_errors()
    with NativeSock() as n:
        assert n.request(nv.PingRequest()) == nv.PongResponse()
    assert OLD["native"].request(nv.PingRequest()) == nv.PongResponse()


def assert_kafka_alive() -> None:
    assert_no_gateway_errors()
    with KafkaSock() as k:
        assert k.call(18, 2, ApiVersionsRequest()).body.error_code == 0
    assert OLD["kafka"].call(18, 0, ApiVersionsRequest()).body.error_code == 0


def assert_tank_alive() -> None:
    assert_no_gateway_errors()
    with tank_client() as t:
        assert isinstance(t.status(), tk.StatusResponse)
        assert t.produce(ALIVE, 0, [b"alive"]) == tk.ProduceError.OK
    assert OLD["tank"].produce(ALIVE, 1, [b"still"]) == tk.ProduceError.OK


ALIVE_CHECKS = {"native": assert_native_alive, "kafka": assert_kafka_alive, "tank": assert_tank_alive}


def assert_all_alive() -> None:
    for check in ALIVE_CHECKS.values():
        check()


def log_state() -> dict[tuple[str, int], int]:
    """Every partition's log end offset: a refused request must leave it as it was."""
    return {(name, p.partition): p.log_end_offset
            for name, topic in GW.gateway.engine.topics_by_name.items() for p in topic.partitions}


# ============================================================================================ requests

# -- native ----------------------------------------------------------------------------------------------------

NATIVE_REQUESTS: dict[str, object] = {
    "Produce": nv.ProduceRequest(KT, 1, [Record(b"v1"), Record(b"v2", key=b"k", timestamp=TS)]),
    "Fetch": nv.FetchRequest(KT, 0, 0, 1 << 20, group_id=GROUP),
    "OffsetCommit": nv.OffsetCommitRequest(KT, 0, GROUP, 1, metadata="meta"),
    "OffsetFetch": nv.OffsetFetchRequest(KT, 0, GROUP),
    "CreateTopic": nv.CreateTopicRequest("hnew", 2),
    "DeleteTopic": nv.DeleteTopicRequest(NDEL),
    "ListTopics": nv.ListTopicsRequest(),
    "DescribeTopic": nv.DescribeTopicRequest(KT),
    "Ping": nv.PingRequest(),
    # the admin requests, in forms that leave the shared topics as they are
    "CreatePartitions": nv.CreatePartitionsRequest(KT, 3, validate_only=True),
    "DeleteRecords": nv.DeleteRecordsRequest(KT, 1, 0),
    "AlterTopicConfig": nv.AlterTopicConfigRequest(KT, {"retention.ms": 604800000}, validate_only=True),
    "DescribeTopicConfig": nv.DescribeTopicConfigRequest(KT),
    "DeleteGroupOffsets": nv.DeleteGroupOffsetsRequest("hg-never-there"),
    "ListGroups": nv.ListGroupsRequest(),
    "DescribeGroup": nv.DescribeGroupRequest(GROUP),
    "ResetGroupOffsets": nv.ResetGroupOffsetsRequest(GROUP, "latest", topics=[(KT, [0])], validate_only=True),
    # the security administration, on resources and users no other case uses (an ACL on a shared topic would close
    # it to the others: a resource an ACL applies to is no longer everyone's)
    "DescribeAcls": nv.DescribeAclsRequest(nv.AclEntry(principal="User:hostile")),
    "CreateAcls": nv.CreateAclsRequest([nv.AclEntry("Topic", "hacl-never-used", "LITERAL", "User:hostile", "*",
                                                    "Read", "Allow")]),
    "DeleteAcls": nv.DeleteAclsRequest(nv.AclEntry(name="hacl-never-there")),
    "DescribeUsers": nv.DescribeUsersRequest(),
    "AlterUser": nv.AlterUserRequest("hostile-user", "SCRAM-SHA-256", 4096, b"s" * 16, b"p" * 32),
    "DescribeQuotas": nv.DescribeQuotasRequest([nv.QuotaComponent("user", "hostile-user")]),
    "AlterQuotas": nv.AlterQuotasRequest([("user", "hostile-user")], {"producer_byte_rate": 1.0},
                                         validate_only=True),  # (a quota set would throttle the other cases)
    # the workers' internal requests (relay sockets only): a client's connection gets "unknown request type"
    "TxnEnd": nv.TxnEndRequest(1, 0, False, [(KT, 0)]),
    "TxnQuery": nv.TxnQueryRequest(1, 0, KT, 0),
}
if hasattr(nv, "AuthRequest"):  # without a configured token every Auth succeeds
    NATIVE_REQUESTS["Auth"] = nv.AuthRequest("any-token")
NATIVE_ANSWERS = {"Produce": nv.ProduceResponse, "Fetch": nv.FetchResponse, "OffsetCommit": nv.OffsetCommitResponse,
                  "OffsetFetch": nv.OffsetFetchResponse, "CreateTopic": nv.CreateTopicResponse,
                  "DeleteTopic": nv.DeleteTopicResponse, "ListTopics": nv.ListTopicsResponse,
                  "DescribeTopic": nv.DescribeTopicResponse, "Ping": nv.PongResponse,
                  "CreatePartitions": nv.CreatePartitionsResponse, "DeleteRecords": nv.DeleteRecordsResponse,
                  "AlterTopicConfig": nv.AlterTopicConfigResponse,
                  "DescribeTopicConfig": nv.DescribeTopicConfigResponse,
                  "DeleteGroupOffsets": nv.DeleteGroupOffsetsResponse,
                  "ListGroups": nv.ListGroupsResponse, "DescribeGroup": nv.DescribeGroupResponse,
                  "ResetGroupOffsets": nv.ResetGroupOffsetsResponse,
                  "Auth": getattr(nv, "AuthResponse", None), "TxnEnd": nv.ErrorResponse, "TxnQuery": nv.ErrorResponse,
                  "DescribeAcls": nv.AclsResponse, "CreateAcls": nv.CreateAclsResponse,
                  "DeleteAcls": nv.DeleteAclsResponse, "DescribeUsers": nv.UsersResponse,
                  "AlterUser": nv.AlterUserResponse, "DescribeQuotas": nv.QuotasResponse,
                  "AlterQuotas": nv.AlterQuotasResponse}


def native_frame(request) -> bytes:
    return nv.NativeConnection("client").send(request)


# -- Kafka -----------------------------------------------------------------------------------------------------

def _kafka_records(version: int) -> bytes:
    records = [Record(b"kv", key=b"k", timestamp=TS)]
    if version < 3:  # Produce v0-v2 carry legacy MessageSets (magic 0 before v2, magic 1 from v2)
        return legacy.encode_message_set(records, 0 if version < 2 else 1)
    return encode_batch(records, default_timestamp=TS)


def kt_topic_id() -> bytes:
    """The topic id of `KT` on the package's gateway (Produce and Fetch v13+ name topics by id)."""
    with KafkaSock() as k:
        answer = k.call(3, 12, KM.MetadataRequest(topics=[KM.MetadataRequestTopic(name=KT)],
                                                  allow_auto_topic_creation=False))
    return answer.body.topics[0].topic_id


def kafka_body(key: int, version: int, topic: str = KT, group: str = GROUP, topic_id: bytes = ZERO_UUID):
    """A valid request body of (key, version) that the gateway answers at once (Produce and Fetch v13+: given the
    topic's id, else UNKNOWN_TOPIC_ID)."""
    if key == 0:
        return KP.ProduceRequest(transactional_id=None, acks=1, timeout_ms=5000, topic_data=[
            KP.TopicProduceData(name=topic, topic_id=topic_id, partition_data=[
                KP.PartitionProduceData(index=1, records=_kafka_records(version))])])
    if key == 1:
        return KF.FetchRequest(replica_id=-1, max_wait_ms=0, min_bytes=0, max_bytes=1 << 20, topics=[
            KF.FetchTopic(topic=topic, topic_id=topic_id, partitions=[
                KF.FetchPartition(partition=0, fetch_offset=0, partition_max_bytes=1 << 20)])])
    if key == 2:
        return KL.ListOffsetsRequest(replica_id=-1, topics=[
            KL.ListOffsetsTopic(name=topic, partitions=[KL.ListOffsetsPartition(partition_index=0, timestamp=-1)])])
    if key == 3:
        return KM.MetadataRequest(topics=[KM.MetadataRequestTopic(name=topic)], allow_auto_topic_creation=False)
    if key == 8:
        return KO.OffsetCommitRequest(group_id=group, generation_id_or_member_epoch=-1, member_id="", topics=[
            KO.OffsetCommitRequestTopic(name=topic, partitions=[
                KO.OffsetCommitRequestPartition(partition_index=0, committed_offset=2, committed_metadata="m")])])
    if key == 9:
        return KO.OffsetFetchRequest(group_id=group, topics=[
            KO.OffsetFetchRequestTopic(name=topic, partition_indexes=[0, 1])])
    if key == 10:
        return KG.FindCoordinatorRequest(key=group, key_type=0)
    if key == 11:  # an unknown member of an unknown group: UNKNOWN_MEMBER_ID at once, nothing parks
        return KG.JoinGroupRequest(group_id=group + "-join", session_timeout_ms=10000, rebalance_timeout_ms=10000,
                                   member_id="nobody", protocol_type="consumer",
                                   protocols=[KG.JoinGroupRequestProtocol(name="range", metadata=b"\x00\x01")])
    if key == 12:
        return KG.HeartbeatRequest(group_id=group, generation_id=1, member_id="nobody")
    if key == 13:
        return KG.LeaveGroupRequest(group_id=group, member_id="nobody",
                                    members=[KG.MemberIdentity(member_id="nobody")])
    if key == 14:
        return KG.SyncGroupRequest(group_id=group, generation_id=1, member_id="nobody", assignments=[
            KG.SyncGroupRequestAssignment(member_id="nobody", assignment=b"\x00")])
    if key == 15:
        return KG.DescribeGroupsRequest(groups=[group, group + "-2"])
    if key == 16:
        return KG.ListGroupsRequest()
    if key == 18:
        return ApiVersionsRequest()
    if key == 19:
        return KA.CreateTopicsRequest(timeout_ms=5000, validate_only=True, topics=[
            KA.CreatableTopic(name=f"hkc{version}", num_partitions=1, replication_factor=1,
                              configs=[KA.CreatableTopicConfig(name="retention.ms", value="60000")])])
    if key == 20:
        return KA.DeleteTopicsRequest(topic_names=["hk-never-there"], timeout_ms=5000)
    if key == 22:
        return KA.InitProducerIdRequest(transactional_id=None, transaction_timeout_ms=60000)
    if key == 21:  # nothing of the shared topics is deleted
        return KA.DeleteRecordsRequest(timeout_ms=5000, topics=[KA.DeleteRecordsTopic(
            name="hk-never-there", partitions=[KA.DeleteRecordsPartition(partition_index=0, offset=0)])])
    if key == 24:  # transactions of a transactional id that never initialised: refused, nothing changes
        return KX.AddPartitionsToTxnRequest(transactional_id="hk-no-txn", producer_id=1, producer_epoch=0,
                                            topics=[KX.AddPartitionsToTxnTopic(name=topic, partitions=[0])])
    if key == 25:
        return KX.AddOffsetsToTxnRequest(transactional_id="hk-no-txn", producer_id=1, producer_epoch=0,
                                         group_id=group)
    if key == 26:
        return KX.EndTxnRequest(transactional_id="hk-no-txn", producer_id=1, producer_epoch=0, committed=False)
    if key == 28:
        return KX.TxnOffsetCommitRequest(transactional_id="hk-no-txn", group_id=group, producer_id=1,
                                         producer_epoch=0, topics=[KX.TxnOffsetCommitRequestTopic(
                                             name=topic, partitions=[KX.TxnOffsetCommitRequestPartition(
                                                 partition_index=0, committed_offset=1)])])
    if key == 32:
        return KCF.DescribeConfigsRequest(resources=[KCF.DescribeConfigsResource(
            resource_type=KCF.ConfigResourceType.TOPIC, resource_name=topic, configuration_keys=None)])
    if key == 33:
        return KCF.AlterConfigsRequest(validate_only=True, resources=[KCF.AlterConfigsResource(
            resource_type=KCF.ConfigResourceType.TOPIC, resource_name="hk-never-there",
            configs=[KCF.AlterableConfig(name="retention.ms", value="60000")])])
    if key == 35:
        return KC.DescribeLogDirsRequest(topics=None)
    if key == 37:
        return KA.CreatePartitionsRequest(timeout_ms=5000, validate_only=True, topics=[
            KA.CreatePartitionsTopic(name="hk-never-there", count=3, assignments=None)])
    if key == 42:
        return KG.DeleteGroupsRequest(groups_names=[group + "-never-there"])
    if key == 44:
        return KCF.IncrementalAlterConfigsRequest(validate_only=True, resources=[
            KCF.IncrementalAlterConfigsResource(resource_type=KCF.ConfigResourceType.TOPIC,
                                                resource_name="hk-never-there", configs=[
                                                    KCF.IncrementalAlterableConfig(name="retention.ms",
                                                                                   value="60000")])])
    if key == 47:
        return KO.OffsetDeleteRequest(group_id=group + "-never-there", topics=[
            KO.OffsetDeleteRequestTopic(name=topic, partitions=[KO.OffsetDeleteRequestPartition(0)])])
    if key == 60:
        return KC.DescribeClusterRequest(include_cluster_authorized_operations=False)
    if key == 68:  # a consumer group member's first heartbeat (v1: its own member id)
        return KCG.ConsumerGroupHeartbeatRequest(group_id=group + "-cg", member_id="hk-member", member_epoch=0,
                                                 rebalance_timeout_ms=10000, subscribed_topic_names=[topic],
                                                 topic_partitions=[])
    if key == 69:
        return KCG.ConsumerGroupDescribeRequest(group_ids=[group + "-cg", group + "-never-there"])
    if key == 76:
        return KSG.ShareGroupHeartbeatRequest(group_id=group + "-sg", member_id="hk-share-member", member_epoch=0,
                                              subscribed_topic_names=[topic])
    if key == 77:
        return KSG.ShareGroupDescribeRequest(group_ids=[group + "-sg"])
    if key == 78:  # a member that never joined: refused at once
        return KSG.ShareFetchRequest(group_id=group + "-sg", member_id="nobody", share_session_epoch=0,
                                     max_wait_ms=0, max_records=10, batch_size=10)
    if key == 79:
        return KSG.ShareAcknowledgeRequest(group_id=group + "-sg", member_id="nobody", share_session_epoch=1)
    if key == 90:
        return KSG.DescribeShareGroupOffsetsRequest(groups=[KSG.DescribeShareGroupOffsetsRequestGroup(
            group_id=group + "-sg", topics=None)])
    if key == 91:
        return KSG.AlterShareGroupOffsetsRequest(group_id=group + "-never-there", topics=[])
    if key == 92:
        return KSG.DeleteShareGroupOffsetsRequest(group_id=group + "-never-there", topics=[])
    if key in (KACL.DESCRIBE_ACLS_KEY, KACL.DELETE_ACLS_KEY):  # (bindings of a principal no case uses)
        flt = dict(resource_type_filter=1, resource_name_filter=None, pattern_type_filter=1,
                   principal_filter="User:hostile", host_filter=None, operation=1, permission_type=1)
        return KACL.DescribeAclsRequest(**flt) if key == KACL.DESCRIBE_ACLS_KEY else \
            KACL.DeleteAclsRequest([KACL.DeleteAclsFilter(**flt)])
    if key == KACL.CREATE_ACLS_KEY:
        return KACL.CreateAclsRequest([KACL.AclCreation(2, "hk-acl-never-used", 3, "User:hostile", "*", 3, 3)])
    if key == KQ.DESCRIBE_CLIENT_QUOTAS_KEY:
        return KQ.DescribeClientQuotasRequest([KQ.ComponentData("user", KQ.MATCH_EXACT, "hostile")], False)
    if key == KQ.ALTER_CLIENT_QUOTAS_KEY:
        return KQ.AlterClientQuotasRequest([KQ.AlterEntryData([KQ.EntityData("user", "hostile")],
                                                              [KQ.OpData("producer_byte_rate", 1e9)])], True)
    if key == KS.DESCRIBE_USER_SCRAM_CREDENTIALS_KEY:
        return KS.DescribeUserScramCredentialsRequest(None)
    if key == KS.ALTER_USER_SCRAM_CREDENTIALS_KEY:
        return KS.AlterUserScramCredentialsRequest([], [KS.ScramCredentialUpsertion("hostile-user", 1, 4096,
                                                                                    b"s" * 16, b"p" * 32)])
    if key == 17:  # SaslHandshake
        return request_schema(key, version).cls(mechanism="PLAIN")
    if key == 36:  # SaslAuthenticate
        return request_schema(key, version).cls(auth_bytes=b"\0user\0password")
    return request_schema(key, version).cls()  # a key added later: its defaults are still a valid request


#: Keys whose answer to `kafka_body` is known exactly (the control checks their error codes).
KNOWN_KAFKA_KEYS = {0, 1, 2, 3, 8, 9, 10, 11, 12, 13, 14, 15, 16, 18, 19, 20, 22}
#: Keys `kafka_body` builds by hand (any other key would fall back to its dataclass defaults).
KAFKA_BUILT_KEYS = KNOWN_KAFKA_KEYS | {17, 36} | {21, 24, 25, 26, 28, 32, 33, 35, 37, 42, 44, 47, 60} | {
    68, 69, 76, 77, 78, 79, 90, 91, 92} | {29, 30, 31, 48, 49, 50, 51}
#: The keys the gateway serves: its broker's handlers, and SASL (the session answers it). The codec knows more
#: (`registry.SUPPORTED`); the others are not advertised, and a request for one closes its connection.
KAFKA_SERVED_KEYS = set(KAFKA_HANDLERS) | {17, 36}
#: Every served key at its lowest and highest supported version.
KAFKA_CASES = sorted({(key, v) for key, (lo, hi) in SUPPORTED.items() if key in KAFKA_SERVED_KEYS
                      for v in (lo, hi)})


def kafka_frame(key: int, version: int, body=None) -> bytes:
    return KafkaClientConnection().send(KafkaRequest(key, version, client_id="hostile",
                                                     body=kafka_body(key, version) if body is None else body))


def kafka_id(key: int, version: int) -> str:
    return f"{API_KEYS.get(key, key)}-v{version}"


def kafka_errors(body) -> set[int]:
    """The error codes of a response, without the NONE of top-level fields when a partition has an error."""
    codes = kafka_error_codes(body)
    return codes - {E.NONE} if len(codes) > 1 else codes


def kafka_error_codes(body) -> set[int]:
    """Every `error_code` anywhere in a response body."""
    codes = set()
    if hasattr(body, "__dataclass_fields__"):
        for name in body.__dataclass_fields__:
            value = getattr(body, name)
            if name == "error_code":
                codes.add(value)
            else:
                codes |= kafka_error_codes(value)
    elif isinstance(body, list):
        for item in body:
            codes |= kafka_error_codes(item)
    return codes


# -- TANK ------------------------------------------------------------------------------------------------------

def tank_bundle(values=(b"t1", b"t2")) -> bytes:
    return tk.encode_bundle([Record(v, timestamp=TS) for v in values], codec=0)


TANK_REQUESTS: dict[str, object] = {
    "Produce": tk.ProduceRequest(7, [tk.ProduceEntry(TT, 1, tank_bundle()),
                                     tk.ProduceEntry(TT, 1, tank_bundle([b"t3"]))]),
    "ProduceWithSeqnum": tk.ProduceRequest(7, [tk.ProduceEntry(TSEQ, 0, tank_bundle(), base_seqnum=1000)],
                                           with_seqnum=True),
    "Consume-v2": tk.ConsumeRequest(7, 0, 0, [tk.ConsumeTopic(TT, [tk.ConsumePartition(0, 1, 65536),
                                                                   tk.ConsumePartition(1, 0, 65536)])]),
    "Consume-v3-flags": tk.ConsumeRequest(7, 0, 0, [tk.ConsumeTopic(TT, [tk.ConsumePartition(0, 2, 4096)])],
                                          client_version=3, flags=0),
    "Ping": tk.PingEvent(),
    "DiscoverPartitions": tk.DiscoverPartitionsRequest(7, TT, [0, 1]),
    "DiscoverPartitions-all": tk.DiscoverPartitionsRequest(7, TT, None),
    "CreateTopic": tk.CreateTopicRequest(7, "htnew", 1, b"log.retention.secs=3600\nlog.segment.bytes=1048576\n"),
    "ReloadConf": tk.ReloadConfRequest(7, TT, 0),
    "Status": tk.StatusRequest(7),
    "DiscoverTopics": tk.DiscoverTopicsRequest(7, 0),
    "DiscoverTopology": tk.DiscoverTopologyRequest(7, 0),
}
TANK_ANSWERS = {"Produce": tk.ProduceResponse, "ProduceWithSeqnum": tk.ProduceResponse,
                "Consume-v2": tk.ConsumeResponse, "Consume-v3-flags": tk.ConsumeResponse, "Ping": None,
                "DiscoverPartitions": tk.DiscoverPartitionsResponse,
                "DiscoverPartitions-all": tk.DiscoverPartitionsResponse, "CreateTopic": tk.CreateTopicResponse,
                "ReloadConf": tk.ReloadConfResponse, "Status": tk.StatusResponse,
                "DiscoverTopics": tk.DiscoverTopicsResponse, "DiscoverTopology": tk.DiscoverTopologyResponse}


def tank_frame(request) -> bytes:
    return tk.TankClientConnection().send(request)


def tank_responses(data: bytes, client: tk.TankClientConnection | None = None) -> list:
    client = client or tk.TankClientConnection()
    client.receive_data(data)
    client.receive_data(b"")
    out = []
    while (event := client.next_event()) is not CLOSED:
        out.append(event)
    return out


def tank_responses_for(request) -> list:
    s = connect("tank")
    try:
        client = tk.TankClientConnection()
        s.sendall(client.send(request))
        s.shutdown(socket.SHUT_WR)
        return tank_responses(read_to_eof(s), client)
    finally:
        s.close()


# ============================================================================================ truncation

def _eof_cuts(header: int, n: int) -> dict[str, int]:
    """Where to cut a frame of `header` + `n` bytes before the half-close (labels -> bytes sent)."""
    cuts = {"in-header": 1, "header-only": header, "1-byte": header + 1, "half": header + n // 2,
            "all-but-1": header + n - 1}
    return _unique({k: v for k, v in cuts.items() if 0 < v < header + n})


def _short_cuts(n: int) -> dict[str, int]:
    """Body sizes the rewritten length prefix declares (labels -> bytes of the body kept)."""
    return _unique({k: v for k, v in {"empty": 0, "1-byte": 1, "half": n // 2, "all-but-1": n - 1}.items()
                    if 0 <= v < n})


def _unique(cuts: dict[str, int]) -> dict[str, int]:
    seen, out = set(), {}
    for label, cut in cuts.items():
        if cut not in seen:
            seen.add(cut)
            out[label] = cut
    return out


def truncation_params(frames: dict[str, bytes], header: int):
    """(name, mode, cut) of every truncation of every frame: `eof` cuts (`_eof_cuts`) and `short` ones
    (`_short_cuts`), see `truncate`."""
    params = []
    for name, frame in frames.items():
        n = len(frame) - header
        for label, cut in _eof_cuts(header, n).items():
            params.append(pytest.param(name, "eof", cut, id=f"{name}-eof-{label}"))
        for label, cut in _short_cuts(n).items():
            params.append(pytest.param(name, "short", cut, id=f"{name}-short-{label}"))
    return params


def truncate(frame: bytes, mode: str, cut: int, header: int, pack_length) -> bytes:
    """`eof`: the first `cut` bytes of `frame`; `short`: the header with its length rewritten (`pack_length`)
    to `cut`, then that many bytes of the body."""
    if mode == "eof":
        return frame[:cut]
    return pack_length(frame[:header], cut) + frame[header:header + cut]


# ============================================================================================ hostile names

_ESCAPE = "hescape"  # the marker every escaping name carries: it must never appear on disk
HOSTILE_NAMES: dict[str, str] = {
    "empty": "",
    "dot": ".",
    "dotdot": "..",
    "slash": "a/b",
    "dotdot-slash": f"../{_ESCAPE}",
    "dotdot-dotdot": f"../../{_ESCAPE}",
    "absolute": f"/tmp/{_ESCAPE}-{os.getpid()}",
    "backslash": f"..\\{_ESCAPE}",
    "nul": f"{_ESCAPE}\x00x",
    "newline": f"{_ESCAPE}\nx",
    "overlong-250": "h" * 250,
    "non-ascii": f"{_ESCAPE}é",
}
#: Raw bytes that are not UTF-8, for the protocols that carry names as bytes.
INVALID_UTF8 = b"h\xff\xfe\xc0\x80h"


def assert_nothing_escaped() -> None:
    """Only legal topic names under <data>/topics, nothing but the engine's own entries in <data>, nothing
    next to <data>, and no path any hostile name could have produced exists."""
    data = GW.data_dir
    parent = os.path.dirname(data)
    assert os.listdir(parent) == ["data"], os.listdir(parent)
    assert set(os.listdir(data)) <= {".lock", ".clean_shutdown", "topics", "tmp", "trash", "offsets",
                                     "producer_ids", "quarantine", "transactions", "share_groups", "security"}, \
        os.listdir(data)
    for name in os.listdir(os.path.join(data, "topics")):
        validate_topic_name(name)
    for sub in ("", "topics", "tmp", "trash", "offsets"):
        for name in HOSTILE_NAMES.values():
            if name and _ESCAPE in name:
                path = os.path.normpath(os.path.join(data, sub, name.replace("\x00", "")))
                assert not os.path.exists(path), path
    for root, dirs, files in os.walk(parent):
        assert not any(_ESCAPE in n for n in dirs + files), (root, dirs, files)
    assert not os.path.exists(f"/tmp/{_ESCAPE}-{os.getpid()}")
    assert not any(_ESCAPE in t or t in HOSTILE_NAMES.values() for t in GW.gateway.engine.topics_by_name)
