"""Logins and ACLs on the native and TANK protocols, and mutual TLS on all four listeners, through real gateway
processes:
native users log in with a password or SCRAM (their credentials made over the native protocol, salted by the
client), are held to their ACLs (the native `Error`, lists filtered), TANK's principal is its listener's or its
client certificate's (refusals with TANK's nearest codes), and a verified certificate's subject, mapped by the
rules, is the principal of a Kafka (confluent-kafka), native or TANK client, and of an HTTPS client of the admin
listener (held to its ACLs like a logged-in user)."""

from __future__ import annotations

import base64
import http.client
import socket
import ssl
import uuid

import orjson
import pytest
from confluent_kafka import KafkaError as RdKafkaError
from confluent_kafka import Producer
from cryptography.x509.oid import NameOID

from logway.bench.launcher import GatewayProcess
from logway.clients.errors import ConnectionClosed, NativeError, TankError
from logway.clients.native import NativeClient
from logway.clients.tank import TankClient
from logway.codecs import native as nv
from logway.codecs.records import Record

from ..certs import authority, client_certificate, self_signed

TOKEN = "ops-token"
READ_ONLY = 0xFE  # TANK's produce answer for a topic one may not write to


def entry(name, op, principal="User:alice", rtype="Topic", pattern="LITERAL", permission="Allow"):
    return nv.AclEntry(rtype, name, pattern, principal, "*", op, permission)


def fresh(prefix: str) -> str:
    return prefix + uuid.uuid4().hex[:8]


# -- native logins and ACLs ----------------------------------------------------------------------------------------

@pytest.fixture(scope="module")
def gw(tmp_path_factory):
    data = str(tmp_path_factory.mktemp("acls") / "data")
    g = GatewayProcess(data, "auth.native_login=true", f"auth.native_token={TOKEN}", "auth.users.alice=alice-pw",
                       "limits.auth_timeout_ms=2000", "log_level=ERROR")
    yield g
    g.stop()


def ops(gw) -> NativeClient:
    return NativeClient(*gw.native, token=TOKEN)


@pytest.mark.parametrize("mechanism", [None, "SCRAM-SHA-256", "SCRAM-SHA-512"])
def test_native_users_log_in_with_a_password_or_scram(gw, mechanism):
    with NativeClient(*gw.native) as c:
        assert c.login("alice", "alice-pw", mechanism) == "User:alice"
    with NativeClient(*gw.native, raise_errors=False) as c:
        with pytest.raises(NativeError, match="authentication failed"):
            c.login("alice", "wrong", mechanism)
        assert c.closed_by_peer(5)


def test_users_made_over_the_native_protocol_log_in_and_can_be_removed(gw):
    user = fresh("u")
    with ops(gw) as c:
        assert c.set_password(user, "s3cret", "SCRAM-SHA-512", iterations=8192)
        assert [(u.user, u.credentials) for u in c.describe_users([user])] == [(user, [("SCRAM-SHA-512", 8192)])]
    with NativeClient(*gw.native, user=user, password="s3cret", mechanism="SCRAM-SHA-512") as c:
        c.ping()
    with NativeClient(*gw.native, user=user, password="s3cret") as c:  # a password checked against its SCRAM
        c.ping()
    with ops(gw) as c:
        assert c.delete_credential(user, "SCRAM-SHA-512")
        with pytest.raises(NativeError, match="user not found"):
            c.describe_users([user])
        with pytest.raises(NativeError, match="iterations must be 4096..16384"):  # (our client refuses to salt it)
            c.request(nv.AlterUserRequest(user, "SCRAM-SHA-256", 100, b"s" * 16, b"p" * 32))
    with pytest.raises(NativeError, match="authentication failed"):
        NativeClient(*gw.native, user=user, password="s3cret")


def test_nothing_but_a_login_before_logging_in(gw):
    with NativeClient(*gw.native, raise_errors=False) as c:
        answer = c.request(nv.ListTopicsRequest())
        assert isinstance(answer, nv.ErrorResponse) and "authentication required" in answer.message
        assert c.closed_by_peer(5)
    with NativeClient(*gw.native, raise_errors=False) as c:  # a SCRAM exchange left half-way
        c.send(nv.AuthRequest(mechanism="SCRAM-SHA-256", message="n,,n=alice,r=abc"))
        assert isinstance(c.receive(), nv.AuthResponse)
        answer = c.request(nv.ListTopicsRequest())
        assert isinstance(answer, nv.ErrorResponse) and c.closed_by_peer(5)
    with NativeClient(*gw.native, raise_errors=False) as c:  # and not in time: closed
        assert c.closed_by_peer(10)


def test_native_requests_are_held_to_the_acls(gw):
    mine, theirs = fresh("mine-"), fresh("theirs-")
    with ops(gw) as c:
        c.create_topic(mine, 1)
        c.create_topic(theirs, 1)
        assert c.create_acls([entry(mine, "Write"), entry(mine, "Read"), entry("g-", "Read", rtype="Group",
                                                                                   pattern="PREFIXED")]) == 3
    with NativeClient(*gw.native, user="alice", password="alice-pw") as c:
        assert c.produce(mine, 0, [b"a", b"b"]) == [0, 1]
        assert [r.value for r in c.fetch(mine, 0, 0, 1 << 20).records] == [b"a", b"b"]
        assert c.commit(mine, 0, "g-1", 2)
        listed = {t.name for t in c.list_topics()}
        assert mine in listed and theirs not in listed
        with pytest.raises(NativeError, match=f"not authorized: User:alice may not WRITE TOPIC '{theirs}'"):
            c.produce(theirs, 0, [b"x"])
        with pytest.raises(NativeError, match="not authorized"):
            c.fetch(theirs, 0, 0, 1 << 20)
        with pytest.raises(NativeError, match="not authorized: User:alice may not READ GROUP 'other'"):
            c.commit(mine, 0, "other", 1)
        with pytest.raises(NativeError, match="may not CREATE TOPIC"):
            c.create_topic(fresh("mine-"), 1)
        with pytest.raises(NativeError, match="may not DELETE TOPIC"):
            c.delete_topic(theirs)
        with pytest.raises(NativeError, match="may not ALTER CLUSTER"):
            c.create_acls([entry(theirs, "All")])
        c.ping()  # the connection goes on after each refusal
    with ops(gw) as c:
        deleted = c.delete_acls(nv.AclEntry(name=mine))
        assert sorted(a.operation for a in deleted) == ["Read", "Write"]
        assert c.describe_acls(nv.AclEntry(principal="User:alice", resource_type="Group")) == [
            entry("g-", "Read", rtype="Group", pattern="PREFIXED")]
        with pytest.raises(NativeError, match="invalid request: .*does not apply"):
            c.create_acls([entry("g", "Write", rtype="Group")])
        with pytest.raises(NativeError, match="unknown Operation"):
            c.create_acls([entry("t", "Fly")])


def test_quotas_over_the_native_protocol_are_held_to_kafkas_acls(gw):
    user = fresh("q")
    with ops(gw) as c:
        c.set_password(user, "pw", "SCRAM-SHA-256")
        assert c.alter_quotas([("user", user)], set={"producer_byte_rate": 1024, "request_percentage": 50})
        assert c.alter_quotas([("user", None), ("client-id", user)], set={"consumer_byte_rate": 2048.5})
        assert not c.alter_quotas([("user", user)], set={"consumer_byte_rate": 1}, validate_only=True)
        assert c.describe_quotas([nv.QuotaComponent("user", user)], strict=True) == [
            nv.QuotaEntry([("user", user)], {"producer_byte_rate": 1024.0, "request_percentage": 50.0})]
        assert c.describe_quotas([nv.QuotaComponent("client-id", user), nv.QuotaComponent("user", default=True)]) == [
            nv.QuotaEntry([("client-id", user), ("user", None)], {"consumer_byte_rate": 2048.5})]
        with pytest.raises(NativeError, match="invalid request: .*not enforced"):
            c.alter_quotas([("user", user)], set={"controller_mutation_rate": 1})
        with pytest.raises(NativeError, match="invalid request: .*positive"):
            c.alter_quotas([("user", user)], set={"producer_byte_rate": 0})
        with pytest.raises(NativeError, match="invalid request: .*altered twice"):
            c.alter_quotas([("user", user)], set={"producer_byte_rate": 1}, delete=["producer_byte_rate"])
        with pytest.raises(NativeError, match="invalid request: .*user, a client-id or both"):
            c.alter_quotas([("ip", "10.0.0.1")], set={"producer_byte_rate": 1})
        with pytest.raises(NativeError, match="invalid request: unknown entity type 'ip'"):
            c.describe_quotas([nv.QuotaComponent("ip")])
    with NativeClient(*gw.native, user=user, password="pw", mechanism="SCRAM-SHA-256") as c:
        with pytest.raises(NativeError, match=f"not authorized: User:{user} may not DESCRIBE_CONFIGS CLUSTER"):
            c.describe_quotas()
        with pytest.raises(NativeError, match=f"not authorized: User:{user} may not ALTER_CONFIGS CLUSTER"):
            c.alter_quotas([("user", user)], delete=["producer_byte_rate"])
        c.ping()
    with ops(gw) as c:
        c.create_acls([entry("kafka-cluster", "DescribeConfigs", principal=f"User:{user}", rtype="Cluster")])
    with NativeClient(*gw.native, user=user, password="pw", mechanism="SCRAM-SHA-256") as c:
        assert [q.entity for q in c.describe_quotas([nv.QuotaComponent("user", user)])] == [[("user", user)]]
        with pytest.raises(NativeError, match="may not ALTER_CONFIGS CLUSTER"):
            c.alter_quotas([("user", user)], delete=["producer_byte_rate"])
    with ops(gw) as c:
        c.delete_acls(nv.AclEntry(principal=f"User:{user}"))
        assert c.alter_quotas([("user", user)], delete=["producer_byte_rate", "request_percentage"])
        assert c.alter_quotas([("user", None), ("client-id", user)], delete=["consumer_byte_rate"])
        assert c.describe_quotas([nv.QuotaComponent("user", user)]) == []


# -- TANK: the listener's principal, or the certificate's ------------------------------------------------------------

def test_tank_clients_are_the_listeners_principal_and_held_to_its_acls(gw):
    mine, theirs = fresh("tank-"), fresh("theirs-")
    with ops(gw) as c:
        c.create_topic(mine, 1)
        c.create_topic(theirs, 1)
        c.create_acls([entry(mine, op, principal="User:ANONYMOUS") for op in ("Write", "Read")])
    with TankClient(*gw.addresses["tank"], timeout=10) as t:
        assert t.produce_many([(mine, 0, _bundle(b"m")), (theirs, 0, _bundle(b"t"))]) == [0, READ_ONLY]
        assert [m.value for m in t.get(mine, 0, 1, max_wait_ms=0).messages] == [b"m"]
        with pytest.raises(TankError):
            t.get(theirs, 0, 1, max_wait_ms=0)  # answered as an unknown topic
        assert t.discover_partitions(theirs) == []
        names = {info.name for info in t.discover_topics()}
        assert mine in names and theirs not in names
        assert t.create_topic(fresh("tank-new-"), 1) != 0  # no Create: refused (READ_ONLY)
    with TankClient(*gw.addresses["tank"], timeout=10) as t:
        with pytest.raises((ConnectionClosed, OSError)):
            t.status()  # TANK has no "not authorized" here: the connection is closed


def _bundle(value: bytes):
    return [Record(value)]


# -- mutual TLS ------------------------------------------------------------------------------------------------------

@pytest.fixture(scope="module")
def pki(tmp_path_factory):
    d = tmp_path_factory.mktemp("pki")
    ca, other_ca = authority(d, "clients"), authority(d, "strangers")
    return {"server": self_signed(d, "server"), "ca": ca[0],
            "alice": client_certificate(d, ca, "alice", [(NameOID.ORGANIZATION_NAME, "Acme"),
                                                         (NameOID.COMMON_NAME, "Alice")]),
            "robot": client_certificate(d, ca, "robot", [(NameOID.COMMON_NAME, "robot")]),
            "bob": client_certificate(d, ca, "bob", [(NameOID.ORGANIZATION_NAME, "Acme"), (NameOID.COMMON_NAME, "bob")]),
            "stranger": client_certificate(d, other_ca, "stranger", [(NameOID.COMMON_NAME, "Alice")])}


@pytest.fixture(scope="module")
def mtls(tmp_path_factory, pki):
    cert, key = pki["server"]
    data = str(tmp_path_factory.mktemp("mtls") / "data")
    g = GatewayProcess(data, f"tls.cert_file={cert}", f"tls.key_file={key}", f"tls.client_ca_file={pki['ca']}",
                       r"tls.principal_mapping_rules=RULE:^CN=([^,]+),O=Acme$/$1/L,DEFAULT",
                       *[f"listeners.{name}.tls=true" for name in ("native", "kafka", "tank")],
                       *[f"listeners.{name}.tls_client_auth=required" for name in ("kafka", "tank")],
                       "listeners.native.tls_client_auth=requested", f"auth.native_token={TOKEN}",
                       "auth.super_users=User:CN=robot", "log_level=ERROR")
    yield g
    g.stop()


def tls(pki, who: str | None) -> ssl.SSLContext:
    ctx = ssl.create_default_context(cafile=pki["server"][0])
    if who is not None:
        ctx.load_cert_chain(*pki[who])
    return ctx


def test_a_client_certificate_is_the_principal_on_every_protocol(mtls, pki):
    topic = fresh("mtls-")
    with NativeClient(*mtls.native, ssl_context=tls(pki, "robot")) as c:  # robot (DEFAULT rule) is a super user
        c.create_topic(topic, 1)
        c.create_acls([entry(topic, op) for op in ("Write", "Read")])  # alice: "CN=Alice,O=Acme" mapped, lowered
    with TankClient(*mtls.addresses["tank"], timeout=10, ssl_context=tls(pki, "alice")) as t:
        assert t.produce(topic, 0, _bundle(b"tank")) == 0
    host, port = mtls.addresses["kafka"]
    producer = Producer({"bootstrap.servers": f"{host}:{port}", "security.protocol": "SSL",
                         "ssl.ca.location": pki["server"][0], "ssl.certificate.location": pki["alice"][0],
                         "ssl.key.location": pki["alice"][1], "linger.ms": 0, "message.timeout.ms": 10000})
    failures = []
    producer.produce(topic, b"kafka", on_delivery=lambda err, msg: err and failures.append(err))
    producer.produce(fresh("other-"), b"x", on_delivery=lambda err, msg: err and failures.append(err))
    producer.flush(15)
    assert [e.code() for e in failures] in ([RdKafkaError.TOPIC_AUTHORIZATION_FAILED],
                                           [RdKafkaError.UNKNOWN_TOPIC_OR_PART])
    with NativeClient(*mtls.native, ssl_context=tls(pki, "alice")) as c:
        assert [r.value for r in c.fetch(topic, 0, 0, 1 << 20).records] == [b"tank", b"kafka"]
        with pytest.raises(NativeError, match="not authorized: User:alice"):
            c.delete_topic(topic)


def test_requested_certificates_are_optional_and_required_ones_are_not(mtls, pki):
    with NativeClient(*mtls.native, ssl_context=tls(pki, None)) as c:  # requested: without one, a login it is
        with pytest.raises(NativeError, match="authentication required"):
            c.create_topic(fresh("x-"), 1)
    # required: without a certificate, or with one another authority signed, the TANK listener serves nothing
    assert tank_refused(mtls, tls(pki, None)) and tank_refused(mtls, tls(pki, "stranger"))
    assert not tank_refused(mtls, tls(pki, "alice"))


def tank_refused(gw, context: ssl.SSLContext) -> bool:
    """Whether the TANK listener refuses a TLS client (the handshake fails, or — TLS 1.3, where the server checks
    the client's certificate after the client finished — the connection closes before TANK's greeting)."""
    try:
        with socket.create_connection(gw.addresses["tank"], timeout=10) as raw:
            with context.wrap_socket(raw, server_hostname="localhost") as s:
                return s.recv(1) == b""
    except (ssl.SSLError, OSError):
        return True


# -- the admin listener: a client certificate is a login -------------------------------------------------------------

def https(gw, pki, who: str | None, path: str, headers: dict | None = None) -> tuple[int, bytes]:
    """GET `path` from the admin listener over HTTPS, showing `who`'s client certificate (None: none)."""
    host, port = gw.addresses["admin"]
    connection = http.client.HTTPSConnection(host, port, timeout=10, context=tls(pki, who))
    try:
        connection.request("GET", path, headers=headers or {})
        answer = connection.getresponse()
        return answer.status, answer.read()
    finally:
        connection.close()


def test_the_admin_listeners_client_certificate_is_its_callers_principal(tmp_path, pki):
    cert, key = pki["server"]
    shown, hidden = fresh("shown-"), fresh("hidden-")
    with GatewayProcess(str(tmp_path / "data"), f"tls.cert_file={cert}", f"tls.key_file={key}",
                        f"tls.client_ca_file={pki['ca']}",
                        r"tls.principal_mapping_rules=RULE:^CN=([^,]+),O=Acme$/$1/L",  # (robot's maps to nothing)
                        "listeners.admin.tls=true", "listeners.admin.tls_client_auth=requested",
                        "auth.native_login=true", "auth.users.root=root-pw", "auth.super_users=User:root",
                        f"auth.native_token={TOKEN}", "log_level=ERROR") as gw:
        with ops(gw) as c:
            for topic in (shown, hidden):
                c.create_topic(topic, 1)
            c.produce(shown, 0, [b"for alice"])
            c.create_acls([entry(shown, "Read")])  # alice: Read (and so Describe) on one topic, nothing else
        status, body = https(gw, pki, "alice", "/api/console")
        assert status == 200 and orjson.loads(body)["user"] == "User:alice"
        status, body = https(gw, pki, "alice", "/api/topics")
        assert status == 200 and [t["name"] for t in orjson.loads(body)["topics"]] == [shown]
        status, body = https(gw, pki, "alice", f"/api/topics/{shown}/partitions/0/messages")
        assert status == 200 and b"for alice" in body
        assert https(gw, pki, "alice", f"/api/topics/{hidden}/partitions/0/messages")[0] == 403
        assert https(gw, pki, "alice", "/metrics")[0] == 403  # no Describe on the cluster
        status, body = https(gw, pki, "bob", "/api/topics")  # a principal with no ACL sees nothing
        assert status == 200 and orjson.loads(body)["topics"] == []
        assert https(gw, pki, "robot", "/api/topics")[0] == 401  # a subject no rule maps: no one
        assert https(gw, pki, None, "/api/topics")[0] == 401  # (requested, not required: no certificate, no login)
        root = {"Authorization": "Basic " + base64.b64encode(b"root:root-pw").decode()}
        assert https(gw, pki, "alice", "/metrics", root)[0] == 200  # a login speaks louder than the certificate
        assert https(gw, pki, None, "/health")[0] == 200
        with pytest.raises((ssl.SSLError, ConnectionError)):  # another authority's: refused (TLS 1.3: after the
            https(gw, pki, "stranger", "/api/topics")           # client's side of the handshake, so a close)
