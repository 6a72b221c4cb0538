"""SCRAM and ACLs with unmodified Kafka clients against real gateway processes: confluent-kafka (librdkafka) and
kafka-python log in with SCRAM-SHA-256 and SCRAM-SHA-512 over SASL_PLAINTEXT and SASL_SSL, as users made with
confluent-kafka's Admin API (`alter_user_scram_credentials`, described with `describe_user_scram_credentials`);
ACLs are created, described and deleted with `create_acls` / `describe_acls` / `delete_acls`, and what they do not
allow is refused to the clients (produce, consume, groups, topic administration), durably across a restart; the
authorized operations the Admin API asks for are what the ACLs allow."""

from __future__ import annotations

import uuid

import pytest
from confluent_kafka import Consumer, KafkaError, KafkaException, Producer, TopicCollection
from confluent_kafka.admin import (AclBinding, AclBindingFilter, AclOperation, AclPermissionType, AdminClient,
                                   NewTopic, ResourcePatternType, ResourceType, ScramCredentialInfo, ScramMechanism,
                                   UserScramCredentialDeletion, UserScramCredentialUpsertion)
from kafka import KafkaConsumer, KafkaProducer
from kafka import errors as kafka_errors

from logway.bench.launcher import GatewayProcess

from ..certs import self_signed

pytestmark = pytest.mark.slow

ADMIN = ("admin", "admin-secret")
MECHANISMS = {"SCRAM-SHA-256": ScramMechanism.SCRAM_SHA_256, "SCRAM-SHA-512": ScramMechanism.SCRAM_SHA_512}


@pytest.fixture(scope="module")
def certs(tmp_path_factory):
    return self_signed(tmp_path_factory.mktemp("certs"), "server")


def _gateway(data, *extra):
    return GatewayProcess(data, "auth.kafka_sasl_scram=true", f"auth.users.{ADMIN[0]}={ADMIN[1]}",
                          f"auth.super_users=User:{ADMIN[0]}", "log_level=ERROR", *extra)


@pytest.fixture(scope="module")
def gateways(tmp_path_factory, certs):
    """SASL_PLAINTEXT and SASL_SSL: one gateway each."""
    cert, key = certs
    plain = _gateway(str(tmp_path_factory.mktemp("scram-plain") / "data"))
    tls = _gateway(str(tmp_path_factory.mktemp("scram-tls") / "data"), "listeners.kafka.tls=true",
                   f"tls.cert_file={cert}", f"tls.key_file={key}")
    yield {"SASL_PLAINTEXT": plain, "SASL_SSL": tls}
    plain.stop()
    tls.stop()


def bootstrap(gw) -> str:
    host, port = gw.addresses["kafka"]
    return f"{host}:{port}"


def rd_config(gw, protocol, certs, user, password, mechanism="SCRAM-SHA-256") -> dict:
    config = {"bootstrap.servers": bootstrap(gw), "security.protocol": protocol, "sasl.mechanisms": mechanism,
              "sasl.username": user, "sasl.password": password}
    if protocol == "SASL_SSL":
        config["ssl.ca.location"] = certs[0]
    return config


def kp_config(gw, protocol, certs, user, password, mechanism) -> dict:
    config = dict(bootstrap_servers=bootstrap(gw), security_protocol=protocol, sasl_mechanism=mechanism,
                  sasl_plain_username=user, sasl_plain_password=password)
    if protocol == "SASL_SSL":
        config["ssl_cafile"] = certs[0]
    return config


def admin_client(gw, protocol, certs) -> AdminClient:
    return AdminClient(rd_config(gw, protocol, certs, *ADMIN))


def make_user(admin: AdminClient, user: str, password: str, *mechanisms: str) -> None:
    upserts = [UserScramCredentialUpsertion(user, ScramCredentialInfo(MECHANISMS[m], 4096 + 1024 * i),
                                            password.encode()) for i, m in enumerate(mechanisms)]
    for future in admin.alter_user_scram_credentials(upserts).values():
        future.result(15)


def allow(admin: AdminClient, principal: str, resource_type, name: str, *operations,
          pattern=ResourcePatternType.LITERAL):
    bindings = [AclBinding(resource_type, name, pattern, principal, "*", op, AclPermissionType.ALLOW)
                for op in operations]
    for future in admin.create_acls(bindings).values():
        future.result(15)


def rd_produce(config: dict, topic: str, values) -> list:
    producer = Producer({**config, "linger.ms": 0, "message.timeout.ms": 10000})
    errors = []
    for v in values:
        producer.produce(topic, v, on_delivery=lambda err, msg: err and errors.append(err))
    producer.flush(15)
    return errors


def fresh(prefix="sec-") -> str:
    return prefix + uuid.uuid4().hex[:8]


@pytest.mark.parametrize("protocol", ["SASL_PLAINTEXT", "SASL_SSL"])
@pytest.mark.parametrize("mechanism", sorted(MECHANISMS))
def test_scram_users_made_with_the_admin_api_produce_and_consume(gateways, certs, protocol, mechanism):
    gw = gateways[protocol]
    admin = admin_client(gw, protocol, certs)
    user, password, topic = fresh("u-"), "pw-" + uuid.uuid4().hex, fresh()
    make_user(admin, user, password, mechanism)
    admin.create_topics([NewTopic(topic, 1)])[topic].result(15)
    allow(admin, f"User:{user}", ResourceType.TOPIC, topic, AclOperation.WRITE, AclOperation.READ)
    allow(admin, f"User:{user}", ResourceType.GROUP, "g-", AclOperation.READ, pattern=ResourcePatternType.PREFIXED)
    # confluent-kafka writes, kafka-python reads (in a group), both logged in as the user with SCRAM
    assert rd_produce(rd_config(gw, protocol, certs, user, password, mechanism), topic,
                      [b"rd-%d" % i for i in range(5)]) == []
    consumer = KafkaConsumer(topic, group_id="g-" + user, auto_offset_reset="earliest", consumer_timeout_ms=10000,
                             **kp_config(gw, protocol, certs, user, password, mechanism))
    try:
        got = []
        for message in consumer:
            got.append(message.value)
            if len(got) == 5:
                break
    finally:
        consumer.close()
    assert got == [b"rd-%d" % i for i in range(5)]
    # kafka-python writes, confluent-kafka reads
    producer = KafkaProducer(**kp_config(gw, protocol, certs, user, password, mechanism))
    producer.send(topic, b"kp").get(timeout=15)
    producer.close()
    reader = Consumer({**rd_config(gw, protocol, certs, user, password, mechanism), "group.id": "g-rd-" + user,
                       "auto.offset.reset": "earliest"})
    reader.subscribe([topic])
    values = []
    try:
        while len(values) < 6:
            message = reader.poll(10)
            assert message is not None, "nothing consumed"
            assert not message.error(), message.error()
            values.append(message.value())
    finally:
        reader.close()
    assert values[-1] == b"kp"


@pytest.mark.parametrize("client", ["confluent", "kafka-python"])
def test_a_wrong_scram_password_is_refused(gateways, certs, client):
    gw = gateways["SASL_PLAINTEXT"]
    user = fresh("u-")
    make_user(admin_client(gw, "SASL_PLAINTEXT", certs), user, "right", "SCRAM-SHA-512")
    if client == "kafka-python":
        with pytest.raises(kafka_errors.KafkaError):
            KafkaProducer(**kp_config(gw, "SASL_PLAINTEXT", certs, user, "wrong", "SCRAM-SHA-512"),
                          request_timeout_ms=5000, max_block_ms=5000, bootstrap_timeout_ms=5000)
        return
    admin = AdminClient(rd_config(gw, "SASL_PLAINTEXT", certs, user, "wrong", "SCRAM-SHA-512"))
    with pytest.raises(KafkaException) as refused:
        admin.list_topics(timeout=5)
    assert refused.value.args[0].code() in (KafkaError._AUTHENTICATION, KafkaError._TRANSPORT,
                                            KafkaError._TIMED_OUT, KafkaError._ALL_BROKERS_DOWN)


def test_user_credentials_are_described_altered_and_deleted(gateways, certs):
    gw = gateways["SASL_PLAINTEXT"]
    admin = admin_client(gw, "SASL_PLAINTEXT", certs)
    user = fresh("u-")
    make_user(admin, user, "pw", "SCRAM-SHA-256", "SCRAM-SHA-512")
    described = admin.describe_user_scram_credentials([user])[user].result(15)
    assert sorted((i.mechanism, i.iterations) for i in described.scram_credential_infos) == [
        (ScramMechanism.SCRAM_SHA_256, 4096), (ScramMechanism.SCRAM_SHA_512, 5120)]
    everyone = admin.describe_user_scram_credentials().result(15)
    assert user in everyone and ADMIN[0] not in everyone  # (configured users keep no stored credential)
    deletion = UserScramCredentialDeletion(user, ScramMechanism.SCRAM_SHA_512)
    admin.alter_user_scram_credentials([deletion])[user].result(15)
    with pytest.raises(KafkaException) as again:  # it is gone now
        admin.alter_user_scram_credentials([deletion])[user].result(15)
    assert again.value.args[0].code() == KafkaError.RESOURCE_NOT_FOUND
    with pytest.raises(KafkaException) as unknown:
        admin.describe_user_scram_credentials(["nobody-" + user])["nobody-" + user].result(15)
    assert unknown.value.args[0].code() == KafkaError.RESOURCE_NOT_FOUND
    with pytest.raises(KafkaException) as weak:
        admin.alter_user_scram_credentials([UserScramCredentialUpsertion(
            user, ScramCredentialInfo(ScramMechanism.SCRAM_SHA_256, 1000), b"pw")])[user].result(15)
    assert weak.value.args[0].code() == KafkaError.UNACCEPTABLE_CREDENTIAL


def test_acls_are_created_described_and_deleted_with_the_admin_api(gateways, certs):
    gw = gateways["SASL_PLAINTEXT"]
    admin = admin_client(gw, "SASL_PLAINTEXT", certs)
    principal = f"User:{fresh('u-')}"
    bindings = [AclBinding(ResourceType.TOPIC, "orders", ResourcePatternType.LITERAL, principal, "*",
                           AclOperation.READ, AclPermissionType.ALLOW),
                AclBinding(ResourceType.TOPIC, "ord", ResourcePatternType.PREFIXED, principal, "10.0.0.1",
                           AclOperation.WRITE, AclPermissionType.DENY),
                AclBinding(ResourceType.GROUP, "billing", ResourcePatternType.LITERAL, principal, "*",
                           AclOperation.ALL, AclPermissionType.ALLOW),
                AclBinding(ResourceType.TRANSACTIONAL_ID, "tx", ResourcePatternType.LITERAL, principal, "*",
                           AclOperation.WRITE, AclPermissionType.ALLOW)]
    for future in admin.create_acls(bindings).values():
        assert future.result(15) is None
    mine = AclBindingFilter(ResourceType.ANY, None, ResourcePatternType.ANY, principal, None, AclOperation.ANY,
                            AclPermissionType.ANY)
    assert sorted(map(str, admin.describe_acls(mine).result(15))) == sorted(map(str, bindings))
    matching = AclBindingFilter(ResourceType.TOPIC, "orders", ResourcePatternType.MATCH, principal, None,
                                AclOperation.ANY, AclPermissionType.ANY)
    assert sorted(map(str, admin.describe_acls(matching).result(15))) == sorted(map(str, bindings[:2]))
    bad = AclBinding(ResourceType.GROUP, "g", ResourcePatternType.LITERAL, principal, "*", AclOperation.WRITE,
                     AclPermissionType.ALLOW)  # Write means nothing for a group
    with pytest.raises(KafkaException) as refused:
        admin.create_acls([bad])[bad].result(15)
    assert refused.value.args[0].code() == KafkaError.INVALID_REQUEST
    topic_filter = AclBindingFilter(ResourceType.TOPIC, None, ResourcePatternType.ANY, principal, None,
                                    AclOperation.ANY, AclPermissionType.ANY)
    deleted = admin.delete_acls([topic_filter])[topic_filter].result(15)
    assert sorted(map(str, deleted)) == sorted(map(str, bindings[:2]))
    assert sorted(map(str, admin.describe_acls(mine).result(15))) == sorted(map(str, bindings[2:]))


def test_what_the_acls_do_not_allow_is_refused_to_the_clients(gateways, certs):
    gw = gateways["SASL_PLAINTEXT"]
    admin = admin_client(gw, "SASL_PLAINTEXT", certs)
    user, password = fresh("u-"), "pw"
    make_user(admin, user, password, "SCRAM-SHA-256")
    topic = fresh()
    admin.create_topics([NewTopic(topic, 1)])[topic].result(15)
    config = rd_config(gw, "SASL_PLAINTEXT", certs, user, password)
    errors = rd_produce(config, topic, [b"x"])
    assert [e.code() for e in errors] == [KafkaError.TOPIC_AUTHORIZATION_FAILED]
    as_user = AdminClient(config)
    assert topic not in as_user.list_topics(timeout=10).topics  # it may not Describe it: it does not see it
    with pytest.raises(KafkaException) as refused:
        list(as_user.create_topics([NewTopic(fresh(), 1)]).values())[0].result(15)
    assert refused.value.args[0].code() == KafkaError.TOPIC_AUTHORIZATION_FAILED
    with pytest.raises(KafkaException) as refused:
        list(as_user.delete_topics([topic]).values())[0].result(15)
    assert refused.value.args[0].code() == KafkaError.TOPIC_AUTHORIZATION_FAILED
    binding = AclBinding(ResourceType.TOPIC, topic, ResourcePatternType.LITERAL, f"User:{user}", "*",
                         AclOperation.ALL, AclPermissionType.ALLOW)
    with pytest.raises(KafkaException) as refused:
        as_user.create_acls([binding])[binding].result(15)
    assert refused.value.args[0].code() == KafkaError.CLUSTER_AUTHORIZATION_FAILED
    # Read on the topic but not on the group: the consumer is refused its group
    allow(admin, f"User:{user}", ResourceType.TOPIC, topic, AclOperation.READ)
    consumer = Consumer({**config, "group.id": "not-granted", "auto.offset.reset": "earliest"})
    consumer.subscribe([topic])
    try:
        seen = None
        for _ in range(20):
            message = consumer.poll(1)
            if message is not None and message.error():
                seen = message.error().code()
                break
        assert seen == KafkaError.GROUP_AUTHORIZATION_FAILED
    finally:
        consumer.close()
    transactional = Producer({**config, "transactional.id": "not-granted"})
    with pytest.raises(KafkaException) as refused:
        transactional.init_transactions(10)
    assert refused.value.args[0].code() == KafkaError.TRANSACTIONAL_ID_AUTHORIZATION_FAILED


def test_acls_and_users_survive_a_restart(tmp_path, certs):
    data = str(tmp_path / "data")
    gw = _gateway(data)
    admin = admin_client(gw, "SASL_PLAINTEXT", certs)
    make_user(admin, "carol", "carol-pw", "SCRAM-SHA-256")
    topic = fresh()
    admin.create_topics([NewTopic(topic, 1)])[topic].result(15)
    allow(admin, "User:carol", ResourceType.TOPIC, topic, AclOperation.WRITE)
    gw.kill()  # no clean shutdown: what was acknowledged must be on disk
    gw = _gateway(data)
    try:
        assert rd_produce(rd_config(gw, "SASL_PLAINTEXT", certs, "carol", "carol-pw"), topic, [b"after"]) == []
    finally:
        gw.stop()


def test_authorized_operations_are_what_the_acls_allow(gateways, certs):
    """confluent-kafka's describe_topics / describe_consumer_groups / describe_cluster with
    include_authorized_operations: a user gets what its ACLs allow (Describe implied by Read and Write), a super
    user every operation of each resource type, and no Describe on the cluster leaves it none there."""
    gw = gateways["SASL_PLAINTEXT"]
    admin = admin_client(gw, "SASL_PLAINTEXT", certs)
    user, topic, group = fresh("u-"), fresh(), fresh("g-")
    make_user(admin, user, "pw", "SCRAM-SHA-256")
    admin.create_topics([NewTopic(topic, 1)])[topic].result(15)
    allow(admin, f"User:{user}", ResourceType.TOPIC, topic, AclOperation.READ, AclOperation.WRITE)
    allow(admin, f"User:{user}", ResourceType.GROUP, group, AclOperation.READ)
    as_user = AdminClient(rd_config(gw, "SASL_PLAINTEXT", certs, user, "pw"))

    def operations(client, what: str):
        if what == "topic":
            found = client.describe_topics(TopicCollection([topic]), include_authorized_operations=True)[topic]
        elif what == "group":
            found = client.describe_consumer_groups([group], include_authorized_operations=True)[group]
        else:
            found = client.describe_cluster(include_authorized_operations=True)
        return set(found.result(15).authorized_operations or ())

    O = AclOperation
    assert operations(as_user, "topic") == {O.READ, O.WRITE, O.DESCRIBE}
    assert operations(as_user, "group") == {O.READ, O.DESCRIBE}
    assert operations(as_user, "cluster") == set()  # no Describe on the cluster: none
    allow(admin, f"User:{user}", ResourceType.BROKER, "kafka-cluster", O.DESCRIBE, O.IDEMPOTENT_WRITE)
    assert operations(as_user, "cluster") == {O.DESCRIBE, O.IDEMPOTENT_WRITE}
    assert operations(admin, "topic") == {O.READ, O.WRITE, O.CREATE, O.DELETE, O.ALTER, O.DESCRIBE,
                                          O.DESCRIBE_CONFIGS, O.ALTER_CONFIGS}
    assert operations(admin, "group") == {O.READ, O.DELETE, O.DESCRIBE}
    assert operations(admin, "cluster") == {O.CREATE, O.ALTER, O.DESCRIBE, O.CLUSTER_ACTION, O.DESCRIBE_CONFIGS,
                                            O.ALTER_CONFIGS, O.IDEMPOTENT_WRITE}
    plain = as_user.describe_topics(TopicCollection([topic]))[topic].result(15)
    assert plain.authorized_operations is None  # not asked for: not answered
