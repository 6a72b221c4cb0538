"""TLS on every listener, SASL/PLAIN on the Kafka listener and the native access token, through real gateway
processes, real clients (kafka-python, librdkafka via confluent-kafka) and a self-signed certificate made at test
time; plus the raw SASL exchanges (v0 and v1 handshakes), every way a login can go wrong, and the warning for a
listener bound beyond loopback."""

from __future__ import annotations

import socket
import ssl
import time
import uuid

import pytest

from logway.bench.launcher import GatewayProcess
from logway.clients.errors import GatewayUnavailable, KafkaError, NativeError
from logway.clients.kafka import KafkaClient, KafkaConfig
from logway.clients.native import NativeClient
from logway.clients.tank import TankClient
from logway.codecs import native as nv
from logway.codecs.kafka.api import ApiVersionsRequest
from logway.codecs.kafka.api import metadata as M
from logway.codecs.kafka.api import sasl as S
from logway.codecs.kafka.connection import CLOSED, NEED_DATA, KafkaClientConnection, KafkaRequest, SaslToken
from logway.codecs.kafka.error_codes import ErrorCode as E
from logway.codecs.records import Record
from logway.gateway.protocols.kafka.sasl import parse_plain
from logway.gateway.config import ConfigError, load_config
from logway.gateway.server import Gateway

from ..certs import self_signed

USER, PASSWORD, TOKEN = "alice", "s3cret-Pässword", "native-token-0123"


@pytest.fixture(scope="module")
def certs(tmp_path_factory):
    d = tmp_path_factory.mktemp("certs")
    return {"server": self_signed(d, "server"), "other": self_signed(d, "other")}


def _tls_overrides(certs) -> list[str]:
    cert, key = certs["server"]
    return [f"tls.cert_file={cert}", f"tls.key_file={key}", "listeners.native.tls=true",
            "listeners.kafka.tls=true", "listeners.tank.tls=true"]


#: The Kafka clients here produce to topics they do not create (off by default: the gateway creates them on request).
AUTO_CREATE = ("kafka.auto_create_topics=true",)
#: These tests are about logging in: the users may do everything (ACLs: tests/gateway/test_acls.py).
SUPER_USERS = f"auth.super_users=User:{USER};User:bob"


@pytest.fixture(scope="module")
def secured(tmp_path_factory, certs):
    """TLS everywhere, SASL/PLAIN on Kafka, a native token."""
    data = str(tmp_path_factory.mktemp("secured") / "data")
    with GatewayProcess(data, *_tls_overrides(certs), "auth.kafka_sasl_plain=true", f"auth.users.{USER}={PASSWORD}",
                        "auth.users.bob=bob-password", f"auth.native_token={TOKEN}", "storage.flush=always",
                        SUPER_USERS,
                        "limits.request_timeout_ms=1000", "log_level=WARNING", *AUTO_CREATE) as gw:
        yield gw


@pytest.fixture(scope="module")
def tls_only(tmp_path_factory, certs):
    data = str(tmp_path_factory.mktemp("tls-only") / "data")
    with GatewayProcess(data, *_tls_overrides(certs), "log_level=WARNING", *AUTO_CREATE) as gw:
        yield gw


@pytest.fixture(scope="module")
def sasl_plaintext(tmp_path_factory):
    data = str(tmp_path_factory.mktemp("sasl-plain") / "data")
    with GatewayProcess(data, "auth.kafka_sasl_plain=true", f"auth.users.{USER}={PASSWORD}", SUPER_USERS,
                        "log_level=WARNING", *AUTO_CREATE) as gw:
        yield gw


def client_context(certs, which: str = "server") -> ssl.SSLContext:
    ctx = ssl.create_default_context(cafile=certs[which][0])
    return ctx


def bootstrap(gw) -> str:
    host, port = gw.addresses["kafka"]
    return f"{host}:{port}"


def topic_name() -> str:
    return f"sec-{uuid.uuid4().hex[:8]}"


# ------------------------------------------------------------------------------------------------ Kafka clients

def _kafka_python_roundtrip(gw, certs, security_protocol: str, **auth) -> None:
    from kafka import KafkaConsumer, KafkaProducer, TopicPartition

    common = dict(bootstrap_servers=bootstrap(gw), security_protocol=security_protocol, **auth)
    if "SSL" in security_protocol:
        common["ssl_cafile"] = certs["server"][0]
    topic = topic_name()
    producer = KafkaProducer(acks="all", **common)
    try:
        for i in range(20):
            producer.send(topic, key=b"k%d" % i, value=b"v%d" % i)
        producer.flush(timeout=30)
    finally:
        producer.close()
    consumer = KafkaConsumer(consumer_timeout_ms=10000, **common)
    try:
        consumer.assign([TopicPartition(topic, 0)])
        consumer.seek_to_beginning()
        got = []
        for msg in consumer:
            got.append((msg.offset, msg.key, msg.value))
            if len(got) == 20:
                break
    finally:
        consumer.close()
    assert got == [(i, b"k%d" % i, b"v%d" % i) for i in range(20)]


def test_kafka_python_over_tls_and_sasl_plain(secured, certs):
    _kafka_python_roundtrip(secured, certs, "SASL_SSL", sasl_mechanism="PLAIN", sasl_plain_username=USER,
                            sasl_plain_password=PASSWORD)


def test_kafka_python_over_tls_without_sasl(tls_only, certs):
    _kafka_python_roundtrip(tls_only, certs, "SSL")


def test_kafka_python_sasl_plain_without_tls(sasl_plaintext, certs):
    _kafka_python_roundtrip(sasl_plaintext, certs, "SASL_PLAINTEXT", sasl_mechanism="PLAIN",
                            sasl_plain_username=USER, sasl_plain_password=PASSWORD)


def test_kafka_python_wrong_password_is_refused(secured, certs):
    from kafka import KafkaProducer
    from kafka.errors import KafkaError

    with pytest.raises(KafkaError):
        KafkaProducer(bootstrap_servers=bootstrap(secured), security_protocol="SASL_SSL",
                      ssl_cafile=certs["server"][0], sasl_mechanism="PLAIN", sasl_plain_username=USER,
                      sasl_plain_password="wrong", bootstrap_timeout_ms=3000, max_block_ms=3000)


def test_kafka_python_refuses_a_certificate_it_does_not_trust(tls_only, certs):
    from kafka import KafkaProducer
    from kafka.errors import KafkaError

    with pytest.raises(KafkaError):
        KafkaProducer(bootstrap_servers=bootstrap(tls_only), security_protocol="SSL",
                      ssl_cafile=certs["other"][0], bootstrap_timeout_ms=3000, max_block_ms=3000)


def test_librdkafka_over_tls_and_sasl_plain(secured, certs):
    confluent_kafka = pytest.importorskip("confluent_kafka")
    conf = {"bootstrap.servers": bootstrap(secured), "security.protocol": "SASL_SSL",
            "ssl.ca.location": certs["server"][0], "sasl.mechanisms": "PLAIN", "sasl.username": "bob",
            "sasl.password": "bob-password"}
    topic = topic_name()
    producer = confluent_kafka.Producer({**conf, "enable.idempotence": True})
    for i in range(10):
        producer.produce(topic, value=b"r%d" % i)
    assert producer.flush(30) == 0
    consumer = confluent_kafka.Consumer({**conf, "group.id": f"g-{topic}", "auto.offset.reset": "earliest"})
    try:
        consumer.subscribe([topic])
        got = []
        deadline = time.monotonic() + 30
        while len(got) < 10 and time.monotonic() < deadline:
            msg = consumer.poll(1.0)
            if msg is not None and msg.error() is None:
                got.append(msg.value())
        consumer.commit(asynchronous=False)
    finally:
        consumer.close()
    assert got == [b"r%d" % i for i in range(10)]


# ------------------------------------------------------------------------------------------- raw SASL exchanges

class RawKafka:
    """Our codec over a (TLS) socket, for exchanges no client sends on purpose."""

    def __init__(self, gw, certs, *, tls: bool = True) -> None:
        sock = socket.create_connection(gw.addresses["kafka"], timeout=10)
        self.sock = client_context(certs).wrap_socket(sock, server_hostname="127.0.0.1") if tls else sock
        self.codec = KafkaClientConnection()

    def _next(self):
        while True:
            event = self.codec.next_event()
            if event is NEED_DATA:
                try:
                    data = self.sock.recv(1 << 16)
                except (ConnectionError, ssl.SSLError):
                    data = b""
                self.codec.receive_data(data)
            else:
                return event

    def call(self, key: int, version: int, body):
        self.sock.sendall(self.codec.send(KafkaRequest(key, version, body=body)))
        event = self._next()
        return event if event is CLOSED else event.body

    def token(self, data: bytes):
        self.sock.sendall(self.codec.send(SaslToken(data)))
        return self._next()

    def closed(self) -> bool:
        return self._next() is CLOSED

    def close(self) -> None:
        self.sock.close()


def plain(user: str, password: str, authzid: str = "") -> bytes:
    return f"{authzid}\0{user}\0{password}".encode()


def metadata(raw: RawKafka):
    return raw.call(3, 1, M.MetadataRequest(topics=None))


def test_sasl_v1_handshake_then_authenticate(secured, certs):
    raw = RawKafka(secured, certs)
    hs = raw.call(17, 1, S.SaslHandshakeRequest("PLAIN"))
    assert (hs.error_code, hs.mechanisms) == (E.NONE, ["PLAIN"])
    auth = raw.call(36, 1, S.SaslAuthenticateRequest(plain(USER, PASSWORD)))
    assert (auth.error_code, auth.session_lifetime_ms) == (E.NONE, 0)
    assert metadata(raw).brokers
    again = raw.call(17, 1, S.SaslHandshakeRequest("PLAIN"))  # no re-authentication: the session never expires
    assert again.error_code == E.ILLEGAL_SASL_STATE and raw.closed()


def test_sasl_v0_handshake_then_raw_token(secured, certs):
    raw = RawKafka(secured, certs)
    assert raw.call(17, 0, S.SaslHandshakeRequest("PLAIN")).error_code == E.NONE
    answer = raw.token(plain(USER, PASSWORD, authzid=USER))
    assert isinstance(answer, SaslToken) and answer.data == b""
    assert metadata(raw).brokers


def test_sasl_v0_wrong_password_closes(secured, certs):
    raw = RawKafka(secured, certs)
    assert raw.call(17, 0, S.SaslHandshakeRequest("PLAIN")).error_code == E.NONE
    assert raw.token(plain(USER, "nope")) is CLOSED


@pytest.mark.parametrize("token", [plain(USER, "wrong"), plain("mallory", PASSWORD), plain(USER, PASSWORD, "bob"),
                                   b"no-nul-at-all", b"\0" + USER.encode(), b"\xff\0alice\0x", b"",
                                   plain(USER, PASSWORD) + b"\0extra", b"\0" * 5000],
                         ids=["wrong-password", "unknown-user", "other-authzid", "no-separators", "one-separator",
                              "bad-utf8", "empty", "extra-field", "oversized"])
def test_sasl_v1_bad_credentials_fail_and_close(secured, certs, token):
    raw = RawKafka(secured, certs)
    assert raw.call(17, 1, S.SaslHandshakeRequest("PLAIN")).error_code == E.NONE
    auth = raw.call(36, 0, S.SaslAuthenticateRequest(token))
    assert auth.error_code == E.SASL_AUTHENTICATION_FAILED
    assert "Authentication failed" in auth.error_message
    assert raw.closed()


def test_unsupported_mechanism(secured, certs):
    raw = RawKafka(secured, certs)
    hs = raw.call(17, 1, S.SaslHandshakeRequest("SCRAM-SHA-256"))
    assert (hs.error_code, hs.mechanisms) == (E.UNSUPPORTED_SASL_MECHANISM, ["PLAIN"])
    assert raw.closed()


def test_authenticate_before_handshake(secured, certs):
    raw = RawKafka(secured, certs)
    auth = raw.call(36, 1, S.SaslAuthenticateRequest(plain(USER, PASSWORD)))
    assert auth.error_code == E.ILLEGAL_SASL_STATE and raw.closed()


def test_requests_before_authentication_close_the_connection(secured, certs):
    raw = RawKafka(secured, certs)
    versions = raw.call(18, 2, ApiVersionsRequest())
    assert {17, 36} <= {k.api_key for k in versions.api_keys}  # ApiVersions is allowed: clients ask it first
    assert metadata(raw) is CLOSED
    raw2 = RawKafka(secured, certs)  # the handshake does not authenticate by itself either
    assert raw2.call(17, 1, S.SaslHandshakeRequest("PLAIN")).error_code == E.NONE
    assert metadata(raw2) is CLOSED


def test_handshake_on_a_listener_without_sasl(tls_only, certs):
    raw = RawKafka(tls_only, certs)
    hs = raw.call(17, 1, S.SaslHandshakeRequest("PLAIN"))
    assert hs.error_code == E.ILLEGAL_SASL_STATE and raw.closed()


# ---------------------------------------------------------------------------------------- native and TANK

def native(gw, certs, **kw) -> NativeClient:
    return NativeClient(*gw.addresses["native"], timeout=10, ssl_context=client_context(certs), **kw)


def test_native_over_tls_with_token_reads_what_kafka_wrote(secured, certs):
    from kafka import KafkaProducer

    topic = topic_name()
    producer = KafkaProducer(bootstrap_servers=bootstrap(secured), security_protocol="SASL_SSL",
                             ssl_cafile=certs["server"][0], sasl_mechanism="PLAIN", sasl_plain_username=USER,
                             sasl_plain_password=PASSWORD)
    producer.send(topic, b"from kafka").get(timeout=30)
    producer.close()
    with native(secured, certs, token=TOKEN) as c:
        assert c.produce(topic, 0, [b"from native"]) == [1]
        records = c.request(nv.FetchRequest(topic, 0, 0, 1 << 20)).records
        assert [r.value for r in records] == [b"from kafka", b"from native"]


def test_native_request_before_auth_is_refused_and_closed(secured, certs):
    with native(secured, certs) as c:
        with pytest.raises(NativeError, match="authentication required"):
            c.request(nv.ListTopicsRequest())
        with pytest.raises((ConnectionError, ssl.SSLError)):
            c.request(nv.PingRequest())


def test_native_wrong_token_is_refused_and_closed(secured, certs):
    with pytest.raises(NativeError, match="authentication failed"):
        native(secured, certs, token="not-the-token")
    with native(secured, certs, token=TOKEN) as c:  # the gateway goes on serving
        assert isinstance(c.request(nv.PingRequest()), nv.PongResponse)


def test_native_auth_without_a_configured_token_succeeds(tls_only, certs):
    with native(tls_only, certs, token="anything") as c:
        assert isinstance(c.request(nv.PingRequest()), nv.PongResponse)


def test_tank_over_tls(secured, certs):
    """TANK cannot log in: its clients are the listener's principal (User:ANONYMOUS), which may do nothing until an
    ACL says so (authentication is on: a resource no ACL applies to is nobody's)."""
    topic = topic_name()
    with native(secured, certs, token=TOKEN) as c:
        c.request(nv.CreateTopicRequest(topic, 1))
    with TankClient(*secured.addresses["tank"], timeout=10, ssl_context=client_context(certs)) as t:
        assert t.produce(topic, 0, [Record(b"refused")]) == 0xFE  # READ_ONLY: TANK's nearest "you may not write"
    with native(secured, certs, token=TOKEN) as c:  # the token's holder is a super user: it may grant
        c.request(nv.CreateAclsRequest([nv.AclEntry("Topic", topic, "LITERAL", "User:ANONYMOUS", "*", op, "Allow")
                                        for op in ("Write", "Read")]))
    with TankClient(*secured.addresses["tank"], timeout=10, ssl_context=client_context(certs)) as t:
        assert t.produce(topic, 0, [Record(b"m%d" % i) for i in range(5)]) == 0
        result = t.get(topic, 0, 1, max_wait_ms=0)
    assert [m.value for m in result.messages] == [b"m%d" % i for i in range(5)]
    with native(secured, certs, token=TOKEN) as c:  # and the other protocols read it
        assert [r.value for r in c.request(nv.FetchRequest(topic, 0, 0, 1 << 20)).records] == \
            [b"m%d" % i for i in range(5)]


# --------------------------------------------------------------------------------------- hostile TLS peers

@pytest.mark.parametrize("proto", ["native", "kafka", "tank"])
def test_plain_tcp_to_a_tls_listener_is_closed(secured, certs, proto):
    sock = socket.create_connection(secured.addresses[proto], timeout=10)
    sock.sendall(b"\x00\x00\x00\x0c" + b"\x00\x12\x00\x00\x00\x00\x00\x01\x00\x00\x00\x00")
    data = sock.recv(4096)  # a TLS alert at most, then EOF; never a protocol answer
    while data:
        assert not data.startswith(b"\x00\x00\x00"), data
        data = sock.recv(4096)
    sock.close()
    with native(secured, certs, token=TOKEN) as c:
        assert isinstance(c.request(nv.PingRequest()), nv.PongResponse)


def test_stalled_tls_handshake_is_dropped(secured, certs):
    sock = socket.create_connection(secured.addresses["native"], timeout=10)
    start = time.monotonic()
    assert sock.recv(4096) == b""  # closed after limits.request_timeout_ms (1 s here)
    assert time.monotonic() - start < 8
    sock.close()


def test_client_distrusting_the_certificate_fails_and_gateway_serves_on(secured, certs):
    with pytest.raises(ssl.SSLCertVerificationError):
        NativeClient(*secured.addresses["native"], timeout=10, ssl_context=client_context(certs, "other"))
    with native(secured, certs, token=TOKEN) as c:
        assert isinstance(c.request(nv.PingRequest()), nv.PongResponse)


# --------------------------------------------------------------------------------------------- configuration

def test_tls_listener_needs_a_certificate(tmp_path):
    with pytest.raises(ConfigError, match="tls.cert_file"):
        load_config(env={}, overrides=["listeners.tank.tls=true"])


def test_unreadable_certificate_is_a_config_error(tmp_path, certs):
    cfg = load_config(env={}, overrides=[f"data_dir={tmp_path}", "listeners.native.tls=true",
                                         f"tls.cert_file={tmp_path}/missing.pem", f"tls.key_file={certs['server'][1]}"])
    with pytest.raises(ConfigError, match="missing.pem"):
        Gateway(cfg)
    mismatched = load_config(env={}, overrides=[f"data_dir={tmp_path}", "listeners.native.tls=true",
                                                f"tls.cert_file={certs['server'][0]}",
                                                f"tls.key_file={certs['other'][1]}"])
    with pytest.raises(ConfigError, match="cannot load"):
        Gateway(mismatched)


def test_sasl_without_users_is_a_config_error():
    for mechanism in ("auth.kafka_sasl_plain=true", "auth.kafka_sasl_scram=true", "auth.native_login=true"):
        with pytest.raises(ConfigError, match="auth.users is empty"):
            load_config(env={}, overrides=[mechanism])
        load_config(env={}, overrides=[mechanism, "auth.super_users=User:admin"])  # (stored credentials may exist)


def test_users_from_the_environment_keep_their_case_and_text():
    cfg = load_config(env={"LOGWAY_AUTH__USERS__Alice": "0123", "LOGWAY_AUTH__NATIVE_TOKEN": "007"})
    assert cfg.auth.users == {"Alice": "0123"} and cfg.auth.native_token == "007"


def test_parse_plain():
    assert parse_plain(b"\0alice\0pw") == ("alice", "pw")
    assert parse_plain(b"alice\0alice\0pw") == ("alice", "pw")
    assert parse_plain(b"bob\0alice\0pw") is None  # acting as another user
    assert parse_plain(b"\0alice\0pw\0") is None
    assert parse_plain(b"\0alice\0\xff") is None
    assert parse_plain(b"\0alice\0" + b"x" * 5000) is None


# ------------------------------------------------------------------- the Spark data source's own Kafka client

def pipeline_client(gw, certs, **settings) -> KafkaClient:
    return KafkaClient(KafkaConfig.parse(bootstrap(gw), retries=1, retry_backoff=0.01, **settings))


def test_pipeline_client_over_tls_and_sasl(secured, certs):
    from logway.codecs.kafka.records import encode_batch

    topic = topic_name()
    settings = dict(security_protocol="SASL_SSL", ssl_cafile=certs["server"][0], sasl_username=USER,
                    sasl_password=PASSWORD)
    assert "s3cret" not in repr(KafkaConfig.parse(bootstrap(secured), **settings))
    with pipeline_client(secured, certs, **settings) as client:
        client.create_topic(topic, 1)
        assert client.produce(topic, 0, encode_batch([Record(b"a"), Record(b"b")], default_timestamp=1)) == 0
        client.close()  # a new connection logs in again
        assert client.fetch(topic, 0, 0, 1 << 20).high_watermark == 2


def test_pipeline_client_wrong_password_is_not_retried(secured, certs):
    client = pipeline_client(secured, certs, security_protocol="SASL_SSL", ssl_cafile=certs["server"][0],
                             sasl_username=USER, sasl_password="wrong")
    with pytest.raises(KafkaError) as info:
        client.partition_counts()
    assert info.value.code == E.SASL_AUTHENTICATION_FAILED and client.requests == 2  # handshake + authenticate


def test_pipeline_client_untrusted_certificate(secured, certs):
    client = pipeline_client(secured, certs, security_protocol="SSL", ssl_cafile=certs["other"][0])
    with pytest.raises(GatewayUnavailable, match="not trusted"):
        client.partition_counts()


def test_pipeline_security_options():
    from logway.pipeline.errors import OptionError
    from logway.pipeline.options import read_options, write_options

    opts = write_options({"gateway": "h:1", "security.protocol": "sasl_ssl", "sasl.username": "u",
                          "sasl.password": "p", "ssl.cafile": "/ca.pem", "ssl.checkHostname": "false"})
    c = opts.client
    assert (c.security_protocol, c.sasl_username, c.sasl_password, c.ssl_cafile, c.ssl_check_hostname) == \
        ("SASL_SSL", "u", "p", "/ca.pem", False)
    base = {"gateway": "h:1", "subscribe": "t"}
    for bad, message in [({"security.protocol": "TLS"}, "expected one of"),
                         ({"security.protocol": "SASL_SSL", "sasl.username": "u"}, "sasl.password"),
                         ({"ssl.cafile": "/ca.pem"}, "needs security.protocol SSL"),
                         ({"security.protocol": "SSL", "sasl.username": "u"}, "needs security.protocol SASL")]:
        with pytest.raises(OptionError, match=message):
            read_options({**base, **bad}, streaming=False)


def test_a_listener_reachable_from_other_hosts_is_warned_about(caplog):
    """The one warning every listener bound beyond loopback logs (the gateway's own listeners, and a `workers: N`
    supervisor's admin listener): the admin one says what it exposes; loopback binds are quiet."""
    from logway.gateway.listeners import warn_if_exposed

    with caplog.at_level("WARNING", logger="logway.gateway"):
        for host in ("127.0.0.1", "127.3.4.5", "::1", "localhost"):
            warn_if_exposed("admin", host)
            warn_if_exposed("kafka", host)
        assert caplog.records == []
        warn_if_exposed("admin", "0.0.0.0")
        warn_if_exposed("admin", "0.0.0.0", logins=True)
        warn_if_exposed("admin", "0.0.0.0", logins=True, tls=True)  # (it asks who you are, over TLS: as the others)
        warn_if_exposed("native", "192.0.2.7")
        warn_if_exposed("tank", "gateway.example")
    assert [r.getMessage() for r in caplog.records] == [
        "admin listener is bound to 0.0.0.0: its metrics and console (topics, groups, record contents, and actions "
        "that change them) are reachable from other hosts, held only to the ACLs of listeners.admin.principal (no "
        "login is required: see docs/security.md)",
        "admin listener is bound to 0.0.0.0 without TLS: its logins (HTTP Basic passwords, the access token) cross "
        "the network in clear text (set listeners.admin.tls)",
        "admin listener is bound to 0.0.0.0: reachable from other hosts (an explicit config choice; see the threat "
        "model in docs/security.md)",
        "native listener is bound to 192.0.2.7: reachable from other hosts (an explicit config choice; see the "
        "threat model in docs/security.md)",
        "tank listener is bound to gateway.example: reachable from other hosts (an explicit config choice; see the "
        "threat model in docs/security.md)"]
