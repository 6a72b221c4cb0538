"""Logins, ACLs and quotas with `workers: 2`: worker 0 writes the security store and the other reads it again (every
`worker_refresh_ms`), so both enforce the same ACLs; changes sent to the other worker are relayed to worker 0
(native) or answered NOT_CONTROLLER (Kafka, as DeleteTopics), and described anywhere; the workers' relays carry
requests their worker authorized, with logins required and no token."""

from __future__ import annotations

import time
import uuid

import pytest

from logway.bench.launcher import GatewayProcess
from logway.clients.errors import NativeError
from logway.clients.kafka import KafkaClient, KafkaConfig
from logway.clients.native import NativeClient
from logway.codecs import native as nv
from logway.codecs.kafka.api import acls as ACL
from logway.codecs.kafka.error_codes import ErrorCode as E
from logway.gateway.cluster.ownership import partition_leader

pytestmark = pytest.mark.slow


def until(check, timeout=15.0):
    deadline = time.monotonic() + timeout
    while not check():
        assert time.monotonic() < deadline, "not seen in time"
        time.sleep(0.05)


def test_every_worker_enforces_the_acls_worker_0_keeps(tmp_path):
    gw = GatewayProcess(str(tmp_path / "data"), "workers=2", "log_level=ERROR", "auth.native_login=true",
                        "auth.kafka_sasl_scram=true", "auth.users.root=root-pw", "auth.users.alice=alice-pw",
                        "auth.super_users=User:root", "worker_refresh_ms=100")
    try:
        name = "ws-" + uuid.uuid4().hex[:8]
        owners = [partition_leader(name, p, 2) for p in range(4)]
        mine, theirs = owners.index(0), owners.index(1)
        with NativeClient(*gw.addresses["native.1"], user="root", password="root-pw") as c:  # a change at worker 1:
            c.create_topic(name, 4)                                                          # relayed to worker 0
            c.create_acls([nv.AclEntry("Topic", name, "LITERAL", "User:alice", "*", "Write", "Allow")])
        for via in ("native.0", "native.1"):
            with NativeClient(*gw.addresses[via], user="alice", password="alice-pw", mechanism="SCRAM-SHA-256") as c:
                for p in (mine, theirs):  # (worker 1 reads the store again within the refresh)
                    until(lambda: _allowed(c, name, p))
                with pytest.raises(NativeError, match="not authorized"):
                    c.delete_topic(name)
        host, port = gw.addresses["kafka.1"]
        with KafkaClient(KafkaConfig(host, port, retries=0, security_protocol="SASL_PLAINTEXT", sasl_username="root",
                                     sasl_password="root-pw", sasl_mechanism="SCRAM-SHA-512")) as k:
            k.connect()
            created = k.call(ACL.CREATE_ACLS_KEY, 3, ACL.CreateAclsRequest([ACL.AclCreation(
                2, name, 3, "User:bob", "*", 3, 3)])).body
            assert [r.error_code for r in created.results] == [E.NOT_CONTROLLER]
            described = k.call(ACL.DESCRIBE_ACLS_KEY, 3, ACL.DescribeAclsRequest(2, name, 3, None, None, 1, 1)).body
            assert [(r.resource_name, [a.principal for a in r.acls]) for r in described.resources] == [
                (name, ["User:alice"])]
    finally:
        assert gw.stop() == 0


def _allowed(client: NativeClient, topic: str, partition: int) -> bool:
    try:
        client.produce(topic, partition, [b"probe"])
        return True
    except NativeError as exc:
        assert "not authorized" in exc.message
        return False
