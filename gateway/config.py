"""Gateway configuration: the schema, declared once as dataclasses, and the layering that fills it.

Layers, each winning over the one before: the embedded defaults, a YAML file, `LOGWAY_*` environment variables,
`--set key=value` flags. Environment variables name a key path with `__` between levels:
`LOGWAY_STORAGE__FLUSH=always`, `LOGWAY_LISTENERS__NATIVE__PORT=9999`. Values are parsed as YAML scalars
(`true`, `123`, `1.5`), except that a text setting stays text. Unknown keys are refused with the key's path, so a
typo never silently does nothing.

The dataclasses below are the schema. Every field is declared with one of the helpers, which carry its default,
its description and its checks in the field's metadata:

    max_connections: int = setting(1024, "across all listeners; further connections are closed at once",
                                   minimum=1)
    tls: TlsSettings = section(TlsSettings, "the certificate of every listener with tls: true")

From the declarations come the embedded defaults (`DEFAULT_YAML`, one comment per key), the checks of a merged
tree (`load_config`: types, minimums and maximums, allowed values) and the table of docs/configuration.md
(`config_doc`).
"""

from __future__ import annotations

import copy
import enum
import json
import os
import re
import typing
from dataclasses import dataclass, field, fields, replace
from typing import Any, Callable, Iterator, Mapping

import yaml

from logway.storage import MAX_PARTITIONS, InvalidConfig, TopicConfig

from .flush import Flush


MiB = 1024 * 1024


class ConfigError(Exception):
    """The configuration is invalid; the message names the key."""


# ---- the declaration helpers -------------------------------------------------------------------------------------
# Field metadata: "kind" (value | section | keyed | flat | key | derived), "doc" (one line: the YAML comment and
# the docs' meaning), "more" (the docs only), "secret" (hidden by `logway config`), and the checks: "minimum",
# "maximum", "choices", "expects" (the words after "must be" in the error), "nonempty", "normalize" (applied before
# the checks), "check" (called with the parsed value and the key path; returns the value or raises ConfigError).

def setting(default: Any, doc: str, *, more: str = "", minimum: int | None = None, maximum: int | None = None,
            choices: tuple[str, ...] | None = None, expects: str | None = None, nonempty: bool = False,
            normalize: Callable[[Any], Any] | None = None, check: Callable[[Any, str], Any] | None = None,
            secret: bool = False) -> Any:
    """One key with a scalar value (bool, int, text, an enum) or a free-form mapping (its keys are the user's).
    `secret`: `logway config` shows whether it is set, never its value (a token, passwords)."""
    meta = {"kind": "value", "doc": doc, "more": more, "minimum": minimum, "maximum": maximum, "choices": choices,
            "expects": expects, "nonempty": nonempty, "normalize": normalize, "check": check, "secret": secret}
    if isinstance(default, dict):
        return field(default_factory=lambda: copy.deepcopy(default), metadata=meta)
    return field(default=default, metadata=meta)


def section(cls: type, doc: str) -> Any:
    """A nested mapping whose keys are the fields of the dataclass `cls`."""
    return field(default_factory=cls, metadata={"kind": "section", "doc": doc, "more": ""})


def keyed(cls: type, doc: str, entries: Mapping[str, tuple[str, Mapping[str, Any]]]) -> Any:
    """A mapping with a fixed set of keys, each a `cls` section: `entries` maps key → (its doc, its defaults).
    The key itself fills the field of `cls` declared with `key()`."""
    name = next(f.name for f in fields(cls) if f.metadata.get("kind") == "key")
    return field(default_factory=lambda: {k: cls(**{name: k}, **over) for k, (_, over) in entries.items()},
                 metadata={"kind": "keyed", "doc": doc, "more": "", "of": cls,
                           "keys": {k: d for k, (d, _) in entries.items()}})


def flattened(cls: type, doc: str, docs: Mapping[str, str], *,
              check: Callable[[Any, str], Any] | None = None) -> Any:
    """Fields of another dataclass (with its own defaults) written as keys of the enclosing section: `docs` names
    the fields that are settings, with their descriptions; the others keep `cls`'s defaults."""
    return field(default_factory=cls, metadata={"kind": "flat", "doc": doc, "more": "", "docs": dict(docs),
                                                "check": check})


def key(doc: str) -> Any:
    """Not a setting: the key this section is found under (filled by `keyed`)."""
    return field(metadata={"kind": "key", "doc": doc})


def derived(doc: str, *, factory: Callable[[], Any]) -> Any:
    """Not a setting: filled by `load_config` itself."""
    return field(default_factory=factory, metadata={"kind": "derived", "doc": doc})


# ---- the schema ----------------------------------------------------------------------------------------------------

def _valid_principal(value: str, where: str) -> str:
    kind, sep, name = value.partition(":")
    if not sep or not kind or not name:
        raise ConfigError(f"{where} must be a principal Type:name (e.g. User:ANONYMOUS), got {value!r}")
    return value


def _valid_principals(value: str, where: str) -> str:
    for item in value.split(";"):
        if item.strip():
            _valid_principal(item.strip(), where)
    return value


def _valid_mapping_rules(value: str, where: str) -> str:
    from .security.principals import PrincipalMapper  # (the rules' grammar lives with the mapper)

    try:
        PrincipalMapper(value)
    except ValueError as exc:
        raise ConfigError(f"{where}: {exc}") from None
    return value


@dataclass(frozen=True, slots=True)
class ListenerConfig:
    protocol: str = key("the protocol this listener serves: its key under listeners")
    enabled: bool = setting(True, "start this listener")
    host: str = setting("127.0.0.1", "address to listen on", expects="a host name or address", nonempty=True)
    port: int = setting(0, "TCP port; 0 picks a free port", minimum=0, maximum=65535)
    tls: bool = setting(False, "serve TLS (the certificate in tls:) instead of plain TCP",
                        more="(TLS 1.2+; the handshake must finish within `limits.request_timeout_ms`)")
    tls_client_auth: str = setting("none", "with tls: true, ask clients for a certificate signed by "
                                           "tls.client_ca_file (mutual TLS); its subject becomes the connection's "
                                           "principal", choices=("none", "requested", "required"),
                                   more="(Kafka's ssl.client.auth: `required` refuses a client without one; "
                                        "see [security.md](security.md))")
    principal: str = setting("User:ANONYMOUS", "the principal of a connection that has not logged in and has no "
                                               "client certificate", expects="a principal Type:name",
                             check=_valid_principal,
                             more="(TANK clients, which cannot log in; give it ACLs like any user)")


def _valid_topic_defaults(value: TopicConfig, where: str) -> TopicConfig:
    try:  # (the policy in any order and spacing, as a topic's own: "delete, compact" is compact,delete)
        return value.with_overrides({"cleanup_policy": value.cleanup_policy})
    except InvalidConfig as exc:
        raise ConfigError(f"{where}: {exc}") from None


def _valid_schema(value: str, where: str) -> str:
    if not SCHEMA_NAME.fullmatch(value):
        raise ConfigError(f"{where} must be a PostgreSQL schema name of lower-case letters, digits and _ (not "
                          f"starting with a digit or pg_), at most 63 characters, got {value!r}")
    return value


#: The schema names `storage.postgres.schema` takes: written as they are in SQL, never quoted.
SCHEMA_NAME = re.compile(r"(?!pg_)[a-z_][a-z0-9_]{0,62}")


@dataclass(frozen=True, slots=True)
class PostgresSettings:
    dsn: str = setting("", "a libpq connection string or URI (\"host=db1 dbname=logway\", "
                           "\"postgresql://logway@db1/logway\"); the keys below, where set, win over it",
                       more="(libpq's own environment variables — PGHOST, PGPASSWORD, PGPASSFILE, PGSSLMODE, … — "
                            "fill in what neither gives)", secret=True)
    host: str = setting("", "the server's host name, address or Unix-socket directory; \"\" = from dsn or libpq")
    port: int = setting(0, "the server's port; 0 = from dsn or libpq (5432)", minimum=0, maximum=65535)
    dbname: str = setting("", "the database; \"\" = from dsn or libpq (the user's name)")
    user: str = setting("", "the user logway connects as; \"\" = from dsn or libpq")
    password: str = setting("", "the user's password (e.g. LOGWAY_STORAGE__POSTGRES__PASSWORD); \"\" = from dsn, "
                                "PGPASSWORD or ~/.pgpass", secret=True)
    schema: str = setting("logway", "the schema logway creates its tables in (and migrates) in that database",
                          check=_valid_schema)
    pool_size: int = setting(4, "connections for reads and topic changes, besides the one that commits writes",
                             minimum=1, maximum=100)
    statement_timeout_ms: int = setting(30000, "a statement that runs longer is cancelled (PostgreSQL's "
                                               "statement_timeout)", minimum=1)
    connect_timeout_ms: int = setting(5000, "a connection attempt that takes longer fails", minimum=1000)
    commit_retry_ms: int = setting(
        15000, "how long a commit whose connection was lost (a server restart, a failover) keeps reconnecting "
               "before the writes it held are answered with an error", more="(they stay in memory and are committed "
               "by a later round; a commit whose outcome was unknown is looked up first, never written twice)",
        minimum=0)
    cache_bytes: int = setting(64 * MiB, "stored batches kept in memory for readers, across partitions",
                               more="(the newest first: consumers at the log end read from memory; older batches are "
                                    "read from the database)", minimum=0)
    cluster: bool = setting(False, "several gateways share the database, each writing the partitions of its share "
                                   "of slots held by lease",
                            more="(every gateway of the database must set it; Kafka clients see the live gateways "
                                 "as brokers: see [scaling.md](scaling.md#several-gateways-over-one-postgresql))")
    lease_ms: int = setting(3000, "(cluster) a gateway that has not renewed its lease for this long is taken for "
                                  "dead and its partitions are taken over by the others",
                            more="(it renews every third of it; a dead gateway's partitions have a leader again "
                                 "within about 1⅓ of it)", minimum=300, maximum=600_000)
    cluster_name: str = setting("", "(cluster) the cluster this gateway belongs to: the first gateway that names one "
                                    "records it in the database, and a gateway naming another is refused at start",
                                more="(\"\" = whichever cluster the database holds; a name guards against a gateway "
                                     "of one deployment pointed at another's database)")
    relay_host: str = setting("", "(cluster) where this gateway takes the native and TANK requests the others relay "
                                  "to it; \"\" = the Kafka listener's advertised host",
                              more="(the other gateways must reach it; each connection shows the cluster's secret, "
                                   "kept in the database)")
    relay_port: int = setting(0, "(cluster) the relay socket's port; 0 = any free port (told to the others through "
                                 "the database)", minimum=0, maximum=65535)


@dataclass(frozen=True, slots=True)
class StorageSettings:
    backend: str = setting("local", "where the log is kept", choices=("local", "postgres"),
                           more=". `local`: segment files under `data_dir` (the default, and the fastest); "
                                "`postgres`: a PostgreSQL database (`storage.postgres`), which takes every write "
                                "before it is acknowledged, whatever `flush` says — see [storage.md](storage.md)")
    postgres: PostgresSettings = section(PostgresSettings, "the database of backend: postgres")
    flush: Flush = setting(Flush.INTERVAL, "when an acknowledged write reaches the disk",
                           more=". `none`: the OS writes back; `interval`: fdatasync every `flush_interval_ms`; "
                                "`always`: a produce or commit is acknowledged only after fdatasync (concurrent "
                                "writers share one sync — group commit) and readers see only synced records. "
                                "What each promises: [durability.md](durability.md)")
    flush_interval_ms: int = setting(1000, "with flush: interval, how often everything is fdatasynced", minimum=1)
    retention_check_interval_ms: int = setting(60000, "how often retention runs", minimum=1)
    offsets_retention_ms: int = setting(
        604800000, "a committed consumer offset is forgotten once it is this old and its group has had no members "
                   "for as long", more="(Kafka's offsets.retention.minutes, for every protocol's commits; 0 = kept "
                   "for good)", minimum=0)
    transcode_cache_bytes: int = setting(
        4 * MiB, "stored bytes of the transcoded batches kept for other readers", more=": readers that ask for "
        "another format than the stored one (native readers, TANK consumers of a Kafka topic, …) share one decode "
        "and encode of each batch they read (from any offset, with any byte budget); 0 = off", minimum=0)
    topic_defaults: TopicConfig = flattened(TopicConfig, "defaults of every topic (its own config overrides them)", {
        "segment_bytes": "roll the active segment at this size",
        "segment_ms": "roll the active segment once it is this old",
        "retention_bytes": "per partition: delete whole old segments (never the active one) beyond this size; "
                           "-1 = unlimited",
        "retention_ms": "delete whole segments older than this (never the active one); -1 = forever",
        "index_interval_bytes": "one sparse index entry per this many bytes of batches",
        "max_batch_bytes": "the largest batch an append accepts",
        "cleanup_policy": "delete (retention deletes old segments), compact (the cleaner keeps the last record of "
                          "each key) or compact,delete (both)",
        "min_cleanable_dirty_ratio": "a compacted partition is cleaned once this share of its cleanable part was "
                                     "written since its last cleaning",
        "min_compaction_lag_ms": "a segment is cleaned only once its newest record is this old",
        "max_compaction_lag_ms": "a segment is cleaned (whatever the ratio) once its newest record is this old",
        "delete_retention_ms": "tombstones and transaction markers of compacted topics stay this long after their "
                               "segment was last written",
    }, check=_valid_topic_defaults)
    cleaner_check_interval_ms: int = setting(15000, "how often the log cleaner looks for compacted partitions due "
                                                    "for cleaning", more="(Kafka's log.cleaner.backoff.ms)",
                                             minimum=1)
    cleaner_io_bytes_per_second: int = setting(
        8 * MiB, "bytes the log cleaner reads and writes per second at most", more="(Kafka's "
        "log.cleaner.io.max.bytes.per.second; it runs in a worker thread, and this also bounds the CPU it takes "
        "from the event loop; 0 = no limit)", minimum=0)
    cleaner_dedupe_buffer_bytes: int = setting(
        64 * MiB, "memory for the keys one cleaning pass maps (about 140 bytes a key)", more="(Kafka's "
        "log.cleaner.dedupe.buffer.size; a partition with more keys written since its last cleaning is cleaned "
        "in several passes)", minimum=1024 * 1024)


@dataclass(frozen=True, slots=True)
class Limits:
    max_connections: int = setting(1024, "across all listeners; further connections are closed at once", minimum=1)
    max_connections_per_ip: int = setting(256, "from one client address", minimum=1)
    max_frame_bytes: int = setting(10 * MiB, "native protocol frame limit, checked before anything is allocated",
                                   more="(Kafka: `kafka.max_request_bytes`; TANK: 256 MiB)", minimum=1)
    idle_timeout_ms: int = setting(600000, "close a connection that sends nothing for this long", minimum=1)
    request_timeout_ms: int = setting(30000, "a frame that started must be complete within this, however slowly "
                                             "it trickles in, and a client must go on taking its answer: one that "
                                             "takes none of it for this long is closed",
                                      more="(slow-loris clients, and clients that never read, are dropped)", minimum=1)
    auth_timeout_ms: int = setting(10000, "where a listener requires authentication, a connection must have "
                                          "authenticated within this long of its accept", minimum=1)
    auth_max_frame_bytes: int = setting(64 * 1024, "the largest request a connection may send before it has "
                                                   "authenticated", more="(Kafka: ApiVersions and SASL; native: Auth; "
                                                   "checked before the body is read, so nothing larger is decoded "
                                                   "for a client that has not proved who it is)", minimum=1024)
    memory_bytes: int = setting(0, "memory for requests being received or decoded and answers being built or "
                                   "sent, across the gateway; 0 = a quarter of the machine's memory (or of the "
                                   "cgroup's limit)", more="(a connection that would take more waits — back-"
                                   "pressure — while the others go on; see [docs/limits.md](docs/limits.md#memory))",
                                minimum=0)
    max_waiters: int = setting(10000, "long-polls parked at once across the gateway",
                               more="; beyond it a fetch answers at once", minimum=1)
    max_wait_ms: int = setting(30000, "cap on a long-poll fetch's max_wait_ms", minimum=1)
    max_fetch_bytes: int = setting(50 * MiB, "cap on a fetch's max_bytes", minimum=1)
    data_requests_per_pass: int = setting(
        16, "produce/fetch/consume requests started per pass of the event loop; more wait for the next pass, in "
            "arrival order", more=", so that other requests (heartbeats, metadata, pings) and new connections "
            "are served within about one such pass however busy the gateway is; 0 = no limit", minimum=0)
    data_pass_ms: int = setting(5, "while data requests wait for a turn, fewer start per pass when passes run "
                                   "longer than this", more="(heavy requests: large or transcoded reads); 0 = a "
                                   "fixed data_requests_per_pass", minimum=0)
    open_segment_files: int = setting(
        0, "segment files (data, indexes) kept open at once; the ones used least recently are closed, and opened "
           "again when read", more="; 0 = what the descriptor limit leaves after `max_connections` and 256 for the "
           "rest, at most 8192 (see docs/limits.md)", minimum=0)
    max_topics: int = setting(10000, "topics at most; creating more is refused with each protocol's error",
                              minimum=1)
    max_partitions_per_topic: int = setting(MAX_PARTITIONS, "partitions of one topic at most", minimum=1,
                                            maximum=MAX_PARTITIONS)
    max_partitions: int = setting(10000, "partitions in all, across topics; creating more is refused with each "
                                         "protocol's error", minimum=1)


def _valid_assignors(value: str, where: str) -> str:
    names = [a.strip() for a in value.split(",")]
    known = ("uniform", "range")  # (logway.gateway.protocols.kafka.assignors.ASSIGNORS)
    if not all(names) or any(a not in known for a in names) or len(set(names)) != len(names):
        raise ConfigError(f"{where}: {value!r} must name assignors among {', '.join(known)}, each once")
    return value


@dataclass(frozen=True, slots=True)
class KafkaSettings:
    advertised_host: str = setting("", "the host Metadata and FindCoordinator tell Kafka clients to connect to; "
                                       "\"\" = the listener's host", expects="a host name or \"\"")
    advertised_port: int = setting(0, "0 = the port the Kafka listener actually bound", minimum=0)
    auto_create_topics: bool = setting(False, "Metadata requests that allow it create unknown topics",
                                       more="(off by default, unlike Kafka's auto.create.topics.enable: on a shared "
                                            "gateway a typo would make a topic; producers to a topic that does not "
                                            "exist get UNKNOWN_TOPIC_OR_PARTITION)")
    default_partitions: int = setting(1, "partitions of auto-created topics and of CreateTopics with -1", minimum=1)
    max_request_bytes: int = setting(100 * MiB, "Kafka's socket.request.max.bytes: larger requests close the "
                                                "connection", minimum=1024)
    group_initial_rebalance_delay_ms: int = setting(
        0, "wait for more members before the first rebalance of an empty group", minimum=0)
    group_min_session_timeout_ms: int = setting(1000, "the shortest consumer session timeout accepted", minimum=1)
    group_max_session_timeout_ms: int = setting(1800000, "the longest consumer session timeout accepted", minimum=1)
    group_consumer_session_timeout_ms: int = setting(
        45000, "a member of a consumer group (KIP-848, group.protocol=consumer) silent for this long is removed",
        more="(Kafka's group.consumer.session.timeout.ms)", minimum=1)
    group_consumer_heartbeat_interval_ms: int = setting(
        5000, "how often members of consumer groups (KIP-848) are told to heartbeat",
        more="(Kafka's group.consumer.heartbeat.interval.ms; a rebalance reaches each member at its next heartbeat)",
        minimum=1)
    group_consumer_assignors: str = setting(
        "uniform,range", "the server-side assignors of consumer groups (KIP-848), comma-separated; the first is "
        "the default", more="(Kafka's group.consumer.assignors; a member may ask for another with "
        "group.remote.assignor)", check=_valid_assignors)
    group_share_session_timeout_ms: int = setting(
        45000, "a member of a share group (KIP-932) silent for this long is removed", more="(Kafka's "
        "group.share.session.timeout.ms; the records it held are released)", minimum=1)
    group_share_heartbeat_interval_ms: int = setting(
        5000, "how often members of share groups are told to heartbeat",
        more="(Kafka's group.share.heartbeat.interval.ms)", minimum=1)
    group_share_record_lock_duration_ms: int = setting(
        30000, "how long a share group member holds a record it acquired before it is released for another",
        more="(Kafka's group.share.record.lock.duration.ms; a group may set its own share.record.lock.duration.ms)",
        minimum=1000, maximum=3600000)
    group_share_delivery_count_limit: int = setting(
        5, "deliveries of a record to share group members before it is archived (never delivered again)",
        more="(Kafka's group.share.delivery.count.limit)", minimum=2, maximum=10)
    group_share_partition_max_record_locks: int = setting(
        2000, "records of one partition a share group may have acquired at once",
        more="(Kafka's group.share.partition.max.record.locks)", minimum=100, maximum=10000)
    share_auto_offset_reset: str = setting(
        "latest", "where a share group starts reading a partition it never read: latest (Kafka's default) or "
        "earliest", more="(a group may set its own share.auto.offset.reset with IncrementalAlterConfigs)",
        choices=("latest", "earliest"))
    transaction_max_timeout_ms: int = setting(900000, "the longest transaction timeout a transactional producer may "
                                                      "ask for", more="(Kafka's transaction.max.timeout.ms)", minimum=1)
    transaction_abort_check_ms: int = setting(1000, "how often open transactions are checked for their timeout",
                                              more="; an expired one is aborted and its producer fenced", minimum=1)
    transactional_id_expiration_ms: int = setting(
        604800000, "a transactional id with no transaction open whose state has not changed for this long is "
                   "forgotten", more="(Kafka's transactional.id.expiration.ms; its next producer starts afresh)",
        minimum=1)
    producer_id_expiration_ms: int = setting(
        86400000, "a producer's idempotence state of a partition (epoch, last sequence numbers) is dropped once it "
                  "wrote nothing there for this long", more="(Kafka's producer.id.expiration.ms; a retry that "
                  "late is appended again)", minimum=1)


@dataclass(frozen=True, slots=True)
class TlsSettings:
    cert_file: str = setting("", "PEM certificate (chain)", expects="a file path or \"\"")
    key_file: str = setting("", "PEM private key, unencrypted (keep it readable by the gateway only)",
                            expects="a file path or \"\"")
    client_ca_file: str = setting("", "PEM certificates of the authorities whose client certificates listeners "
                                      "with tls_client_auth accept", expects="a file path or \"\"")
    principal_mapping_rules: str = setting("DEFAULT", "how a client certificate's subject (RFC 2253: CN=alice,O=Acme) "
                                                      "becomes a principal's name",
                                           more="(Kafka's ssl.principal.mapping.rules: `DEFAULT` or "
                                                "`RULE:regex/replacement/[L|U]`, comma-separated; the first that "
                                                "matches wins)", check=_valid_mapping_rules)


def _valid_users(users: dict, where: str) -> dict[str, str]:
    for name, password in users.items():
        if not isinstance(name, str) or not name or "\0" in name:
            raise ConfigError(f"{where}: {name!r} is not a valid user name")
        if not isinstance(password, str) or not password:
            raise ConfigError(f"{where}.{name} must be a non-empty password (quote numbers in YAML)")
    return users


@dataclass(frozen=True, slots=True)
class AuthSettings:
    kafka_sasl_plain: bool = setting(False, "Kafka clients must log in with SASL (PLAIN, and SCRAM if "
                                            "kafka_sasl_scram); PLAIN checks a user's password")
    kafka_sasl_scram: bool = setting(False, "Kafka clients must log in with SASL (SCRAM-SHA-256 or SCRAM-SHA-512, "
                                            "and PLAIN if kafka_sasl_plain)",
                                     more="(the password never crosses the connection; users' credentials: "
                                          "auth.users, `logway users`)")
    users: dict[str, str] = setting({}, "user name: password (e.g. LOGWAY_AUTH__USERS__alice=secret); use with TLS",
                                    more="(the name keeps its case; they may log in with any mechanism; users made "
                                         "with `logway users` are stored as salted SCRAM credentials instead)",
                                    expects="a mapping of user name to password", check=_valid_users, secret=True)
    native_login: bool = setting(False, "native clients must first log in as a user: {\"Auth\": {\"user\", "
                                        "\"password\"}} or SCRAM", more="(see [native.md](native.md))")
    native_token: str = setting("", "when set, native clients must first send {\"Auth\": {\"token\": ...}} with "
                                    "this token", more="(a legacy shared secret: whoever has it is a super user; "
                                                       "also the admin listener's bearer token)", secret=True)
    super_users: str = setting("", "principals that may do everything, ACLs or not, separated by ';'",
                               expects="principals Type:name separated by ';'", check=_valid_principals,
                               more="(Kafka's super.users, e.g. `User:admin;User:ops`)")
    allow_everyone_if_no_acl_found: bool = setting(
        True, "a resource no ACL applies to is open to everyone", more="(Kafka's allow.everyone.if.no.acl.found; "
        "ignored — off — whenever a listener requires authentication: then a resource nobody was given is "
        "nobody's)")
    admin_hosts: str = setting("", "host names (comma-separated) the admin listener answers to besides IP "
                                   "addresses and localhost", more="(a request with another Host header is refused: "
                                   "DNS rebinding; /health and /ready answer any)")


LOG_LEVELS = ("DEBUG", "INFO", "WARNING", "ERROR")
#: The most worker processes `workers` may ask for.
MAX_WORKERS = 64


@dataclass(frozen=True, slots=True)
class Config:
    data_dir: str = setting("./data", "where topics and committed offsets live", more="(also `--data-dir DIR`)",
                            expects="a path", nonempty=True)
    listeners: dict[str, ListenerConfig] = keyed(ListenerConfig, "one listener per protocol; only enabled ones are "
                                                                 "started", {
        "native": ("the native JSON protocol", {"port": 9898}),
        "kafka": ("the Kafka wire protocol", {"port": 9092}),
        "tank": ("the TANK 4.0 protocol", {"port": 11011}),
        "admin": ("HTTP: /metrics (Prometheus), /health, /ready, the console at /", {"port": 9644}),
    })
    tls: TlsSettings = section(TlsSettings, "the certificate of every listener with tls: true")
    auth: AuthSettings = section(AuthSettings, "who may connect and what they may do: logins, super users, ACLs "
                                               "(off by default; see docs/security.md)")
    storage: StorageSettings = section(StorageSettings, "the log on disk: durability, segments, retention")
    limits: Limits = section(Limits, "bounds that keep one client from exhausting the gateway")
    kafka: KafkaSettings = section(KafkaSettings, "the Kafka protocol: what clients are told, topics, groups")
    shutdown_timeout_ms: int = setting(5000, "in-flight requests may finish for this long after SIGINT/SIGTERM",
                                       minimum=0)
    log_level: str = setting("INFO", "how much the gateway logs", choices=LOG_LEVELS,
                             normalize=lambda value: str(value).upper())
    log_repeat_limit: int = setting(20, "lines one message may log per 10 s (messages that name a peer count "
                                        "together); the rest are counted, and the next line says how many were "
                                        "left out (`logway_log_lines_suppressed_total`); 0 = no limit",
                                    minimum=0, maximum=1_000_000)
    workers: int = setting(1, "processes serving the data directory, each the only writer of a share of every "
                              "topic's partitions", minimum=1, maximum=MAX_WORKERS,
                           more="(a prototype: with more than 1, Kafka clients see one broker per worker on "
                                "consecutive ports; native and TANK clients use one port that every worker serves, "
                                "each relaying requests for the others' partitions; worker 0 coordinates "
                                "groups and transactions (transactions need the native listener enabled); the "
                                "admin port serves every worker's metrics, readiness and console, each worker's "
                                "own admin listener is on the next ports; needs Linux — see "
                                "[scaling.md](scaling.md))")
    worker_refresh_ms: int = setting(1000, "with workers > 1, how often each worker also looks at every topic for "
                                           "changes the others made (it is told of each change at once; this "
                                           "catches what a lost message missed)", minimum=50, maximum=3_600_000)
    worker_handover: bool = setting(True, "with workers > 1, give a native or TANK connection whose request is "
                                          "wholly for another worker's partitions to that worker (once per "
                                          "connection), instead of relaying its requests for its whole life",
                                    more="(see [scaling.md](scaling.md), \"Handing connections over\")")
    worker_watchdog_ms: int = setting(30000, "with workers > 1, a worker whose event loop has not told the "
                                             "supervisor it is alive for this long (it does every sixth of it once "
                                             "ready) is killed and started again, as a worker that died", more="; 0 "
                                             "= never (a hung worker then holds its partitions until it is killed)",
                                      minimum=0, maximum=3_600_000)
    count_calls: bool = setting(False, "count the event loop's function calls (`logway_python_calls_total`): a "
                                       "benchmark aid that makes the gateway several times slower",
                                more="(`logway bench requests --count-calls`)")
    raw: dict[str, Any] = derived("the merged tree, as `logway serve --print-config` shows it", factory=dict)


def _check_whole(cfg: Config) -> Config:
    """The checks that involve more than one section."""
    uses_tls = [name for name, lc in cfg.listeners.items() if lc.enabled and lc.tls]
    if uses_tls and not (cfg.tls.cert_file and cfg.tls.key_file):
        raise ConfigError(f"listeners {', '.join(uses_tls)} have tls: true but tls.cert_file and tls.key_file "
                          "are not both set")
    auth = cfg.auth
    if (auth.kafka_sasl_plain or auth.kafka_sasl_scram or auth.native_login) and not (
            auth.users or auth.super_users.strip() or auth.native_token):
        raise ConfigError("clients must log in (auth.kafka_sasl_* or auth.native_login) but auth.users is empty and "
                          "there is no auth.super_users or auth.native_token: no one could log in, nor make the "
                          "users who could (`logway users`)")
    for name, lc in cfg.listeners.items():
        if lc.enabled and lc.tls_client_auth != "none":
            if not lc.tls:
                raise ConfigError(f"listeners.{name}.tls_client_auth is {lc.tls_client_auth} but listeners.{name}.tls "
                                  "is false: client certificates come with TLS")
            if not cfg.tls.client_ca_file:
                raise ConfigError(f"listeners.{name}.tls_client_auth is {lc.tls_client_auth} but tls.client_ca_file "
                                  "is not set: no client certificate could be verified")
    if cfg.storage.backend == "postgres":
        if cfg.workers > 1:
            raise ConfigError("storage.backend postgres serves one process per gateway (workers: 1); run several "
                              "gateways over the database instead (storage.postgres.cluster)")
        if cfg.storage.topic_defaults.compact:
            raise ConfigError("storage.cleanup_policy compact is not available with storage.backend postgres (its "
                              "topics are not compacted yet)")
    return cfg


# ---- reading the declarations ------------------------------------------------------------------------------------

def hints(cls: type) -> dict[str, Any]:
    """The field types of a schema dataclass, resolved."""
    return typing.get_type_hints(cls)


def choices_of(hint: Any, meta: Mapping[str, Any]) -> tuple[str, ...] | None:
    if isinstance(hint, type) and issubclass(hint, enum.Enum):
        return tuple(member.value for member in hint)
    return meta.get("choices")


def describe(name: str, hint: Any, meta: Mapping[str, Any], value: Any) -> str:
    """A key's one-line description: its allowed values, its default in readable units, its doc."""
    parts = []
    allowed = choices_of(hint, meta)
    if allowed:
        parts.append(" | ".join(allowed))
    readable = readable_default(name, value)
    if readable:
        parts.append(readable)
    parts.append(meta["doc"])
    return "; ".join(parts)


_UNITS = {"_bytes": ((1024 ** 3, "GiB"), (MiB, "MiB"), (1024, "KiB")),
          "_ms": ((86400000, "days"), (3600000, "h"), (60000, "min"), (1000, "s"))}


def readable_default(name: str, value: Any) -> str:
    """`604800000` for a key ending in _ms reads "7 days", `10485760` for one ending in _bytes "10 MiB"."""
    for suffix, units in _UNITS.items():
        if name.endswith(suffix) and isinstance(value, int) and not isinstance(value, bool) and value > 0:
            for size, unit in units:
                if value % size == 0:
                    count = value // size
                    return f"{count} {unit[:-1] if unit == 'days' and count == 1 else unit}"
    return ""


def settings(cls: type | None = None, prefix: str = "") -> Iterator[tuple[str, Any, Mapping[str, Any]]]:
    """(dotted key, type, metadata) of every setting that holds a value, each key of a keyed section apart."""
    cls = cls or Config
    types = hints(cls)
    for f in fields(cls):
        kind, hint, path = f.metadata["kind"], types[f.name], prefix + f.name
        if kind == "section":
            yield from settings(hint, path + ".")
        elif kind == "keyed":
            for k in f.metadata["keys"]:
                yield from settings(f.metadata["of"], f"{path}.{k}.")
        elif kind == "flat":
            inner = hints(hint)
            yield from ((prefix + n, inner[n], {"doc": doc}) for n, doc in f.metadata["docs"].items())
        elif kind == "value":
            yield path, hint, f.metadata


# ---- the embedded defaults ---------------------------------------------------------------------------------------

YAML_HEADER = """\
# logway — embedded default configuration. Any key can be overridden by a file (--config), the environment
# (LOGWAY_SECTION__KEY=value) or a flag (--set section.key=value).
"""


def yaml_value(value: Any) -> str:
    """A default as YAML text: `true`, `1024`, `./data`, `""`, `{}`."""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, enum.Enum):
        value = value.value
    if isinstance(value, (int, float)):
        return str(value)
    if isinstance(value, str):
        plain = value and "#" not in value and ": " not in value and yaml.safe_load(value) == value
        return value if plain else json.dumps(value)
    if isinstance(value, dict):
        return json.dumps(value) if value else "{}"
    raise TypeError(f"no YAML form for {value!r}")


def _yaml_lines(obj: Any, indent: int) -> list[tuple[str, str]]:
    """(line, comment) pairs for the settings of the dataclass instance `obj`; a comment-only line has no text."""
    out: list[tuple[str, str]] = []
    pad = " " * indent
    types = hints(type(obj))
    after_section = False
    for f in fields(obj):
        kind, meta, value = f.metadata["kind"], f.metadata, getattr(obj, f.name)
        if kind in ("key", "derived"):
            continue
        if indent == 0 and (kind in ("section", "keyed") or after_section):
            out.append(("", ""))
        after_section = kind in ("section", "keyed")
        if kind == "section":
            out.append((f"{pad}{f.name}:", meta["doc"]))
            out += _yaml_lines(value, indent + 2)
        elif kind == "keyed":
            out.append((f"{pad}{f.name}:", meta["doc"]))
            for k, item in value.items():
                out.append((f"{pad}  {k}:", meta["keys"][k]))
                out += _yaml_lines(item, indent + 4)
        elif kind == "flat":
            out.append(("", f"{pad}# {meta['doc']}:"))
            inner = hints(types[f.name])
            for n, doc in meta["docs"].items():
                default = getattr(value, n)
                out.append((f"{pad}{n}: {yaml_value(default)}", describe(n, inner[n], {"doc": doc}, default)))
        else:
            out.append((f"{pad}{f.name}: {yaml_value(value)}", describe(f.name, types[f.name], meta, value)))
    return out


def render_yaml(cfg: Config) -> str:
    """`cfg` as a commented YAML file: every key with its value and its description."""
    lines = _yaml_lines(cfg, 0)
    column = max(len(text) for text, _ in lines) + 2
    body = []
    for text, comment in lines:
        if not text:
            body.append(comment)
        else:
            body.append(f"{text.ljust(column)}# {comment}")
    return YAML_HEADER + "\n".join(body) + "\n"


DEFAULT_YAML = render_yaml(Config())
#: Mappings whose keys are the user's own (not config keys): merged and set without the unknown-key check.
FREE_FORM = frozenset(path for path, hint, _ in settings() if typing.get_origin(hint) is dict)
#: Settings whose values are text: a value from the environment or `--set` stays as written ("0123" is no number).
TEXT_KEYS = frozenset(path for path, hint, _ in settings() if isinstance(hint, type) and issubclass(hint, str))


#: `LOGWAY_*` environment variables that are not settings: scripts/dev's venv, where the tests keep artifacts, what a
#: supervisor tells the worker processes it starts (`logway.gateway.cluster.workers`), and the passwords and token the
#: `logway` commands that talk to a gateway read (`cli/connect.py`).
NOT_SETTINGS = frozenset({"LOGWAY_VENV", "LOGWAY_ARTIFACTS", "LOGWAY_WORKER", "LOGWAY_WORKER_FD",
                          "LOGWAY_WORKER_ENTRIES", "LOGWAY_WORKER_RELAYS",
                          "LOGWAY_PASSWORD", "LOGWAY_TOKEN", "LOGWAY_NEW_PASSWORD"})  # (the CLI's secrets)


def defaults() -> dict[str, Any]:
    return yaml.safe_load(DEFAULT_YAML)


# ---- layering ----------------------------------------------------------------------------------------------------

def load_config(path: str | None = None, *, env: Mapping[str, str] | None = None,
                overrides: list[str] | tuple[str, ...] = (), sources: dict[str, str] | None = None) -> Config:
    """Build the configuration: defaults ← file ← environment ← `key.path=value` overrides. `sources`, when given,
    is filled with where each value that is not a default came from, by dotted key (a user's own key of a free-form
    mapping by its full path): `file PATH`, `environment LOGWAY_…` or `flag --set KEY` (`logway config`)."""
    found: dict[str, str] = {} if sources is None else sources
    tree = defaults()
    if path is not None:
        if not path.strip():
            raise ConfigError("--config must name a YAML file, got an empty path")
        try:
            with open(path, "rb") as f:
                loaded = yaml.safe_load(f) or {}
        except OSError as exc:
            raise ConfigError(f"cannot read config file {path}: {exc.strerror}") from None
        except yaml.YAMLError as exc:
            raise ConfigError(f"config file {path} is not valid YAML: {exc}") from None
        if not isinstance(loaded, dict):
            raise ConfigError(f"config file {path} must hold a mapping at the top level")
        _merge(tree, loaded, "", lambda key: found.__setitem__(key, f"file {path}"))
    env = os.environ if env is None else env
    for name, value in sorted(env.items()):
        if name.startswith("LOGWAY_") and name not in NOT_SETTINGS:
            parts = name[len("LOGWAY_"):].split("__")
            dotted = ".".join(p.lower() for p in parts)
            free = next((f for f in FREE_FORM if dotted.startswith(f + ".")), None)
            if free:  # a user's own key keeps its case (a user name)
                dotted = free + "." + ".".join(parts[free.count(".") + 1:])
            _set_path(tree, dotted, value, f"environment variable {name}")
            found[dotted] = f"environment {name}"
    for item in overrides:
        dotted, sep, value = item.partition("=")
        if not sep:
            raise ConfigError(f"--set expects key.path=value, got {item!r}")
        _set_path(tree, dotted.strip(), value, f"--set {item}")
        found[dotted.strip()] = f"flag --set {dotted.strip()}"
    return _check_whole(_parse(Config, tree, "", raw=copy.deepcopy(tree)))


def _merge(base: dict, update: dict, prefix: str, record: Callable[[str], None]) -> None:
    for name, value in update.items():
        where = f"{prefix}{name}"
        if prefix.rstrip(".") in FREE_FORM:
            base[name] = value
            record(where)
            continue
        if name not in base:
            raise ConfigError(f"unknown config key {where!r}")
        if isinstance(base[name], dict):
            if not isinstance(value, dict):
                raise ConfigError(f"config key {where!r} must be a mapping")
            _merge(base[name], value, where + ".", record)
        else:
            base[name] = value
            record(where)


def _set_path(tree: dict, dotted: str, text: str, source: str) -> None:
    parts = dotted.split(".")
    node = tree
    for i, part in enumerate(parts):
        if isinstance(node, dict) and ".".join(parts[:i]) in FREE_FORM and i == len(parts) - 1:
            node[part] = text  # a user's own key (e.g. a user name); its value stays text (a password)
            return
        if not isinstance(node, dict) or part not in node:
            raise ConfigError(f"{source}: unknown config key {'.'.join(parts[:i + 1])!r}")
        if i == len(parts) - 1:
            if isinstance(node[part], dict):
                raise ConfigError(f"{source}: {dotted!r} is a section, not a value")
            if dotted in TEXT_KEYS:  # a text setting stays text: a token "0123" is not the number 123
                node[part] = text
                return
            try:
                node[part] = yaml.safe_load(text) if text != "" else ""
            except yaml.YAMLError:
                node[part] = text
        else:
            node = node[part]


# ---- checking a merged tree against the schema ---------------------------------------------------------------------

def _parse(cls: type, tree: Mapping[str, Any], where: str, **given: Any) -> Any:
    """An instance of the schema dataclass `cls` from its subtree, every key checked; `where` is the key prefix."""
    types = hints(cls)
    values = dict(given)
    for f in fields(cls):
        kind, meta, hint, path = f.metadata["kind"], f.metadata, types[f.name], where + f.name
        if kind in ("key", "derived"):
            continue
        if kind == "section":
            value = _parse(hint, tree[f.name], path + ".")
        elif kind == "keyed":
            key_field = next(g.name for g in fields(meta["of"]) if g.metadata["kind"] == "key")
            value = {k: _parse(meta["of"], tree[f.name][k], f"{path}.{k}.", **{key_field: k}) for k in meta["keys"]}
        elif kind == "flat":
            inner = hints(hint)
            value = replace(f.default_factory(),
                            **{n: _value(inner[n], {}, tree[n], where + n) for n in meta["docs"]})
            path = where.rstrip(".")
        else:
            value = _value(hint, meta, tree[f.name], path)
        if meta.get("check"):
            value = meta["check"](value, path)
        values[f.name] = value
    return cls(**values)


def _value(hint: Any, meta: Mapping[str, Any], given: Any, path: str) -> Any:
    value = meta["normalize"](given) if meta.get("normalize") else given
    expects = meta.get("expects")
    allowed = choices_of(hint, meta)
    if isinstance(hint, type) and issubclass(hint, enum.Enum):
        pass  # the allowed values below are the check
    elif hint is bool:
        if not isinstance(value, bool):
            raise ConfigError(f"{path} must be {expects or 'true or false'}")
    elif hint is float:
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            raise ConfigError(f"{path} must be a number, got {given!r}")
        value = float(value)
    elif hint is int:
        if isinstance(value, bool) or not isinstance(value, int):
            raise ConfigError(f"{path} must be an integer, got {given!r}")
        if meta.get("minimum") is not None and value < meta["minimum"]:
            raise ConfigError(f"{path} must be >= {meta['minimum']}, got {value}")
        if meta.get("maximum") is not None and value > meta["maximum"]:
            raise ConfigError(f"{path} must be <= {meta['maximum']}, got {value}")
    elif isinstance(hint, type) and issubclass(hint, str):
        if not isinstance(value, str) or (meta.get("nonempty") and not value.strip()):
            empty = " (it is empty)" if isinstance(value, str) else ""
            raise ConfigError(f"{path} must be {expects or 'text (quote it in YAML)'}{empty}")
    elif typing.get_origin(hint) is dict:
        if not isinstance(value, dict):
            raise ConfigError(f"{path} must be {expects or 'a mapping'}")
        value = dict(value)
    else:
        raise TypeError(f"{path}: no check for settings of type {hint!r}")
    if allowed and value not in allowed:
        raise ConfigError(f"{path} must be one of {', '.join(allowed)}, got {given!r}")
    return hint(value) if isinstance(hint, type) and issubclass(hint, enum.Enum) else value

