"""`logway acls`, `logway users` and `logway quotas`, and the commands logging in (`--user` with LOGWAY_PASSWORD,
LOGWAY_TOKEN), as `python -m logway.cli` processes against a real gateway that requires logins: an operator makes a user and its ACLs,
the user works within them (topics, produce and consume over native and Kafka), refusals are one line and exit 1;
the quotas the CLI sets are Kafka's client quotas (DescribeClientQuotas sees them, AlterClientQuotas' are listed) and
slow the user down."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
import uuid

import pytest

from logway.bench.launcher import GatewayProcess
from logway.clients.kafka import KafkaClient, KafkaConfig
from logway.clients.native import NativeClient
from logway.codecs.kafka.api import quotas as Q

TOKEN = "ops-token"


@pytest.fixture(scope="module")
def gw(tmp_path_factory):
    data = str(tmp_path_factory.mktemp("cli-security") / "data")
    g = GatewayProcess(data, "auth.native_login=true", "auth.kafka_sasl_scram=true", f"auth.native_token={TOKEN}",
                       "auth.users.root=root-pw", "auth.super_users=User:root", "log_level=ERROR")
    yield g
    g.stop()


def logway(gw, *args: str, env: dict | None = None, stdin: str | None = None) -> subprocess.CompletedProcess:
    host, port = gw.native
    command = [sys.executable, "-m", "logway.cli", *args]
    if args[0] not in ("produce", "consume"):
        command += ["--gateway", f"{host}:{port}"]
    clean = {k: v for k, v in os.environ.items() if k not in ("LOGWAY_PASSWORD", "LOGWAY_TOKEN")}
    return subprocess.run(command, capture_output=True, text=True, timeout=60, input=stdin,
                          env={**clean, **(env or {})})


def as_root(gw, *args, **kw):
    return logway(gw, *args, "--user", "root", env={"LOGWAY_PASSWORD": "root-pw"}, **kw)


def test_an_operator_makes_a_user_and_its_acls_and_the_user_works_within_them(gw):
    user, topic = "u" + uuid.uuid4().hex[:6], "cli-" + uuid.uuid4().hex[:6]
    made = as_root(gw, "users", "set", user, "--password-stdin", stdin="pässword\n")
    assert made.returncode == 0, made.stderr
    assert f"set the password of {user} (SCRAM-SHA-256, SCRAM-SHA-512, 4096 iterations)" in made.stdout
    listed = as_root(gw, "users", "list", user)
    assert listed.stdout.splitlines() == ["user\tmechanism\titerations", f"{user}\tSCRAM-SHA-256\t4096",
                                          f"{user}\tSCRAM-SHA-512\t4096"]
    assert as_root(gw, "topics", "create", topic).returncode == 0
    added = as_root(gw, "acls", "add", "--principal", f"User:{user}", "--topic", topic, "--operation", "Write",
                    "--operation", "Read", "--json")
    assert [json.loads(line)["operation"] for line in added.stdout.splitlines()] == ["Write", "Read"]
    shown = as_root(gw, "acls", "list", "--principal", f"User:{user}")
    assert shown.stdout.splitlines() == ["resource_type\tname\tpattern\tprincipal\thost\toperation\tpermission",
                                         f"Topic\t{topic}\tLITERAL\tUser:{user}\t*\tWrite\tAllow",
                                         f"Topic\t{topic}\tLITERAL\tUser:{user}\t*\tRead\tAllow"]
    password = {"LOGWAY_PASSWORD": "pässword"}
    wrote = logway(gw, "produce", topic, "one", "two", "--gateway", "%s:%d" % gw.native, "--user", user, env=password)
    assert wrote.returncode == 0, wrote.stderr
    kafka = "%s:%d" % gw.addresses["kafka"]
    wrote = logway(gw, "produce", topic, "three", "--protocol", "kafka", "--gateway", kafka, "--user", user,
                   "--mechanism", "SCRAM-SHA-512", env=password)
    assert wrote.returncode == 0, wrote.stderr
    read = logway(gw, "consume", topic, "--gateway", "%s:%d" % gw.native, "--user", user, "--json", env=password)
    assert [json.loads(line)["value"] for line in read.stdout.splitlines()] == ["one", "two", "three"]
    refused = logway(gw, "topics", "delete", topic, "--user", user, env=password)
    assert refused.returncode == 1
    assert refused.stderr == f"logway: not authorized: User:{user} may not DELETE TOPIC '{topic}'\n"
    listed = logway(gw, "topics", "list", "--user", user, env=password)
    assert listed.stdout.splitlines() == ["name\tpartitions", f"{topic}\t1"]  # only what it may see
    removed = as_root(gw, "acls", "remove", "--principal", f"User:{user}", "--operation", "Write")
    assert removed.stdout == f"removed: Allow User:{user} Write on Topic '{topic}'\n"
    deleted = as_root(gw, "users", "delete", user, "--scram", "SCRAM-SHA-256")
    assert deleted.stdout == f"deleted the credentials of {user}: SCRAM-SHA-256\n"
    still = logway(gw, "topics", "list", "--user", user, "--mechanism", "SCRAM-SHA-512", env=password)
    assert still.returncode == 0
    gone = logway(gw, "topics", "list", "--user", user, env=password)  # (SCRAM-SHA-256: no credential left)
    assert gone.returncode == 1 and "authentication failed" in gone.stderr


def test_the_token_from_the_environment_and_what_is_refused(gw):
    with_token = logway(gw, "acls", "list", env={"LOGWAY_TOKEN": TOKEN})
    assert with_token.returncode == 0 and with_token.stdout.startswith("resource_type\t")
    nobody = logway(gw, "topics", "list")
    assert nobody.returncode == 1 and "authentication required" in nobody.stderr
    wrong = logway(gw, "topics", "list", "--user", "root", env={"LOGWAY_PASSWORD": "nope"})
    assert wrong.returncode == 1 and wrong.stderr.startswith("logway: authentication failed")
    no_password = logway(gw, "topics", "list", "--user", "root")  # (no terminal to ask on)
    assert no_password.returncode == 2 and "LOGWAY_PASSWORD" in no_password.stderr
    for bad, message in [(("acls", "add", "--principal", "alice", "--topic", "t", "--operation", "Read"),
                           "--principal expects TYPE:NAME"),
                         (("acls", "remove",), "needs at least one"),
                         (("acls", "add", "--principal", "User:a", "--topic", "t", "--operation", "Fly"),
                          "unknown Operation 'Fly'"),
                         (("users", "set", "x", "--iterations", "10", "--password-stdin"), "--iterations")]:
        answer = as_root(gw, *bad, stdin="pw\n")
        assert answer.returncode in (1, 2) and message in answer.stderr, answer.stderr


def test_quotas_are_kafkas_client_quotas_and_slow_the_user_down(gw):
    user, topic = "q" + uuid.uuid4().hex[:6], "quota-" + uuid.uuid4().hex[:6]
    assert as_root(gw, "users", "set", user, "--password-stdin", stdin="pw\n").returncode == 0
    assert as_root(gw, "topics", "create", topic).returncode == 0
    assert as_root(gw, "acls", "add", "--principal", f"User:{user}", "--topic", topic, "--operation", "Write",
                   ).returncode == 0
    made = as_root(gw, "quotas", "set", "--for-user", user, "--producer-byte-rate", "100000",
                   "--request-percentage", "50")
    assert made.returncode == 0, made.stderr
    assert made.stdout == f"set the quotas of user '{user}': producer_byte_rate=100000, request_percentage=50\n"
    made = as_root(gw, "quotas", "set", "--for-default-user", "--for-client-id", f"{user}-app",
                   "--consumer-byte-rate", "2048.5", "--json")
    assert json.loads(made.stdout) == {"user": "<default>", "client_id": f"{user}-app",
                                       "quotas": {"consumer_byte_rate": 2048.5}}
    listed = as_root(gw, "quotas", "list", "--for-user", user, "--strict")
    assert listed.stdout.splitlines() == ["user\tclient_id\tquota\tvalue", f"{user}\t-\tproducer_byte_rate\t100000",
                                          f"{user}\t-\trequest_percentage\t50"]
    host, port = gw.addresses["kafka"]
    with KafkaClient(KafkaConfig(host, port, connect_timeout=10, timeout=30, retries=0,
                                 security_protocol="SASL_PLAINTEXT", sasl_mechanism="SCRAM-SHA-256",
                                 sasl_username="root", sasl_password="root-pw")) as kafka:
        kafka.connect()
        seen = kafka.call(Q.DESCRIBE_CLIENT_QUOTAS_KEY, 1, Q.DescribeClientQuotasRequest(
            [Q.ComponentData("client-id", Q.MATCH_EXACT, f"{user}-app")], False)).body
        assert [([(e.entity_type, e.entity_name) for e in q.entity], [(v.key, v.value) for v in q.values])
                for q in seen.entries] == [([("client-id", f"{user}-app"), ("user", None)],
                                            [("consumer_byte_rate", 2048.5)])]
        altered = kafka.call(Q.ALTER_CLIENT_QUOTAS_KEY, 1, Q.AlterClientQuotasRequest([Q.AlterEntryData(
            [Q.EntityData("user", user), Q.EntityData("client-id", f"{user}-app")],
            [Q.OpData("consumer_byte_rate", 4096.0, False)])], False)).body
        assert altered.entries[0].error_code == 0
    listed = as_root(gw, "quotas", "list", "--for-client-id", f"{user}-app", "--json")
    assert sorted((json.loads(line) for line in listed.stdout.splitlines()), key=lambda row: row["value"]) == [
        {"user": "<default>", "client_id": f"{user}-app", "quota": "consumer_byte_rate", "value": 2048.5},
        {"user": user, "client_id": f"{user}-app", "quota": "consumer_byte_rate", "value": 4096}]
    with NativeClient(*gw.native, user=user, password="pw", mechanism="SCRAM-SHA-256") as c:
        started = time.monotonic()
        c.produce(topic, 0, [b"y" * 1_200_000])  # 120 kB/s over Kafka's 10 s window, bound 100 kB/s: 2 s late
        assert time.monotonic() - started >= 1.5
    password = {"LOGWAY_PASSWORD": "pw"}
    refused = logway(gw, "quotas", "list", "--user", user, env=password)
    assert refused.returncode == 1
    assert refused.stderr == (f"logway: not authorized: User:{user} may not DESCRIBE_CONFIGS CLUSTER "
                              "'kafka-cluster'\n")
    deleted = as_root(gw, "quotas", "delete", "--for-user", user)
    assert deleted.stdout == f"deleted the quotas of user '{user}': producer_byte_rate, request_percentage\n"
    deleted = as_root(gw, "quotas", "delete", "--for-user", user, "--for-client-id", f"{user}-app", "--quota",
                      "consumer_byte_rate")
    assert deleted.stdout == f"deleted the quotas of user '{user}', client-id '{user}-app': consumer_byte_rate\n"
    as_root(gw, "quotas", "delete", "--for-default-user", "--for-client-id", f"{user}-app")
    assert as_root(gw, "quotas", "list", "--for-client-id", f"{user}-app").stdout == "user\tclient_id\tquota\tvalue\n"
    for bad, message in [(("quotas", "set", "--producer-byte-rate", "1"), "needs an entity"),
                         (("quotas", "set", "--for-user", user), "needs a quota"),
                         (("quotas", "set", "--for-user", user, "--consumer-byte-rate", "-5"),
                          "invalid request: quota consumer_byte_rate must be a positive number"),
                         (("quotas", "delete", "--for-user", user, "--quota", "bogus"), "invalid choice")]:
        answer = as_root(gw, *bad)
        assert answer.returncode in (1, 2) and message in answer.stderr, answer.stderr


def test_over_tls_with_the_authority_given(tmp_path):
    from ..certs import self_signed

    cert, key = self_signed(tmp_path, "server")
    with GatewayProcess(str(tmp_path / "data"), "listeners.native.tls=true", "listeners.kafka.tls=true",
                        f"tls.cert_file={cert}", f"tls.key_file={key}", "auth.native_login=true",
                        "auth.kafka_sasl_scram=true", "auth.users.root=root-pw", "auth.super_users=User:root",
                        "log_level=ERROR") as tls_gw:
        env = {"LOGWAY_PASSWORD": "root-pw"}
        made = logway(tls_gw, "topics", "create", "secured", "--user", "root", "--tls-ca", cert, env=env)
        assert made.returncode == 0, made.stderr
        kafka = "%s:%d" % tls_gw.addresses["kafka"]
        wrote = logway(tls_gw, "produce", "secured", "over tls", "--protocol", "kafka", "--gateway", kafka,
                       "--user", "root", "--tls-ca", cert, env=env)
        assert wrote.returncode == 0, wrote.stderr
        plain = logway(tls_gw, "topics", "list", "--user", "root", env=env)  # (without --tls-ca: no TLS)
        assert plain.returncode == 1
