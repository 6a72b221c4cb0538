"""Gateway configuration: embedded YAML defaults, overridden by a YAML file, then `LOGWAY_*` environment
variables, then `--set key=value` command-line flags (each layer wins over the one before).

Environment variables name a key path with `__` between levels: `LOGWAY_STORAGE__FLUSH=always`,
`LOGWAY_LISTENERS__NATIVE__PORT=9999`. Values are parsed as YAML scalars (`true`, `123`, `1.5`, text).
Unknown keys are refused with the key's path, so a typo never silently does nothing.
"""

from __future__ import annotations

import copy
import os
from dataclasses import dataclass
from typing import Any, Mapping

import yaml

from logway.storage import InvalidConfig, TopicConfig

DEFAULT_YAML = """\
# logway — embedded default configuration. Any key can be overridden by a file (--config), the environment
# (LOGWAY_SECTION__KEY=value) or a flag (--set section.key=value).
data_dir: ./data

listeners:                 # one listener per protocol; only enabled ones are started
  native:
    enabled: true
    host: 127.0.0.1
    port: 9898
    tls: false             # serve TLS (the certificate in tls:) instead of plain TCP
  kafka:                   # the Kafka wire protocol
    enabled: true
    host: 127.0.0.1
    port: 9092
    tls: false             # serve TLS (the certificate in tls:) instead of plain TCP
  tank:                    # the TANK 4.0 protocol
    enabled: true
    host: 127.0.0.1
    port: 11011
    tls: false             # serve TLS (the certificate in tls:) instead of plain TCP

tls:                       # the certificate of every listener with tls: true
  cert_file: ""            # PEM certificate (chain)
  key_file: ""             # PEM private key, unencrypted (keep it readable by the gateway only)

auth:                      # off by default; TANK has no authentication in its protocol (see README threat model)
  kafka_sasl_plain: false  # Kafka clients must authenticate with SASL/PLAIN as one of auth.users
  users: {}                # user name: password (e.g. LOGWAY_AUTH__USERS__ALICE=secret); use with TLS
  native_token: ""         # when set, native clients must first send {"Auth": {"token": ...}} with this token

storage:
  flush: interval          # none | interval | always (acknowledge only after fdatasync, with group commit)
  flush_interval_ms: 1000  # with flush: interval
  segment_bytes: 1073741824
  segment_ms: 604800000    # 7 days
  retention_bytes: -1      # per partition; -1 = unlimited
  retention_ms: 604800000  # 7 days; -1 = forever
  retention_check_interval_ms: 60000
  index_interval_bytes: 4096
  max_batch_bytes: 10485760

limits:
  max_connections: 1024         # across all listeners; further connections are closed at once
  max_connections_per_ip: 256   # from one client address
  max_frame_bytes: 10485760     # native protocol frame limit (the seed's 10 MiB)
  idle_timeout_ms: 600000       # close a connection that sends nothing for this long
  request_timeout_ms: 30000     # a frame that started must be complete within this (slow clients are dropped)
  max_waiters: 10000            # long-polls parked at once across the gateway
  max_wait_ms: 30000            # cap on a long-poll fetch's max_wait_ms
  max_fetch_bytes: 52428800     # cap on a fetch's max_bytes

kafka:
  advertised_host: ""              # host Kafka clients are told to connect to; "" = the listener's host
  advertised_port: 0               # 0 = the port the Kafka listener actually bound
  auto_create_topics: true         # Metadata requests that allow it create unknown topics
  default_partitions: 1            # partitions of auto-created topics and of CreateTopics with -1
  max_request_bytes: 104857600     # Kafka's socket.request.max.bytes: larger requests close the connection
  group_initial_rebalance_delay_ms: 0   # wait for more members before the first rebalance of an empty group
  group_min_session_timeout_ms: 1000
  group_max_session_timeout_ms: 1800000

shutdown_timeout_ms: 5000       # in-flight requests may finish for this long after SIGINT/SIGTERM
log_level: INFO
"""

FLUSH_POLICIES = ("none", "interval", "always")
#: Mappings whose keys are the user's own (not config keys): merged and set without the unknown-key check.
FREE_FORM = {"auth.users"}


class ConfigError(Exception):
    """The configuration is invalid; the message names the key."""


@dataclass(frozen=True, slots=True)
class ListenerConfig:
    protocol: str
    enabled: bool
    host: str
    port: int
    tls: bool = False


@dataclass(frozen=True, slots=True)
class StorageSettings:
    flush: str
    flush_interval_ms: int
    retention_check_interval_ms: int
    topic_defaults: TopicConfig


@dataclass(frozen=True, slots=True)
class Limits:
    max_connections: int
    max_connections_per_ip: int
    max_frame_bytes: int
    idle_timeout_ms: int
    request_timeout_ms: int
    max_waiters: int
    max_wait_ms: int
    max_fetch_bytes: int


@dataclass(frozen=True, slots=True)
class KafkaSettings:
    advertised_host: str
    advertised_port: int
    auto_create_topics: bool
    default_partitions: int
    max_request_bytes: int
    group_initial_rebalance_delay_ms: int
    group_min_session_timeout_ms: int
    group_max_session_timeout_ms: int


@dataclass(frozen=True, slots=True)
class TlsSettings:
    cert_file: str
    key_file: str


@dataclass(frozen=True, slots=True)
class AuthSettings:
    kafka_sasl_plain: bool
    users: dict[str, str]
    native_token: str


@dataclass(frozen=True, slots=True)
class Config:
    data_dir: str
    listeners: dict[str, ListenerConfig]
    storage: StorageSettings
    limits: Limits
    kafka: KafkaSettings
    shutdown_timeout_ms: int
    log_level: str
    raw: dict[str, Any]
    tls: TlsSettings = TlsSettings("", "")
    auth: AuthSettings = AuthSettings(False, {}, "")


def defaults() -> dict[str, Any]:
    return yaml.safe_load(DEFAULT_YAML)


def load_config(path: str | None = None, *, env: Mapping[str, str] | None = None,
                overrides: list[str] | tuple[str, ...] = ()) -> Config:
    """Build the configuration: defaults ← file ← environment ← `key.path=value` overrides."""
    tree = defaults()
    if path:
        try:
            with open(path, "rb") as f:
                loaded = yaml.safe_load(f) or {}
        except OSError as exc:
            raise ConfigError(f"cannot read config file {path}: {exc.strerror}") from None
        except yaml.YAMLError as exc:
            raise ConfigError(f"config file {path} is not valid YAML: {exc}") from None
        if not isinstance(loaded, dict):
            raise ConfigError(f"config file {path} must hold a mapping at the top level")
        _merge(tree, loaded, "")
    env = os.environ if env is None else env
    for key, value in sorted(env.items()):
        if key.startswith("LOGWAY_") and key not in ("LOGWAY_VENV",):
            parts = key[len("LOGWAY_"):].split("__")
            dotted = ".".join(p.lower() for p in parts)
            free = next((f for f in FREE_FORM if dotted.startswith(f + ".")), None)
            if free:  # a user's own key keeps its case (a user name)
                dotted = free + "." + ".".join(parts[free.count(".") + 1:])
            _set_path(tree, dotted, value, f"environment variable {key}")
    for item in overrides:
        dotted, sep, value = item.partition("=")
        if not sep:
            raise ConfigError(f"--set expects key.path=value, got {item!r}")
        _set_path(tree, dotted.strip(), value, f"--set {item}")
    return _build(tree)


def _merge(base: dict, update: dict, prefix: str) -> None:
    for key, value in update.items():
        where = f"{prefix}{key}"
        if prefix.rstrip(".") in FREE_FORM:
            base[key] = value
            continue
        if key not in base:
            raise ConfigError(f"unknown config key {where!r}")
        if isinstance(base[key], dict):
            if not isinstance(value, dict):
                raise ConfigError(f"config key {where!r} must be a mapping")
            _merge(base[key], value, where + ".")
        else:
            base[key] = value


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
            if isinstance(node[part], str):  # a text setting stays text: a token "0123" is not the number 123
                node[part] = text
                return
            try:
                node[part] = yaml.safe_load(text) if text != "" else ""
            except yaml.YAMLError:
                node[part] = text
        else:
            node = node[part]


def _int(tree: dict, key: str, where: str, *, minimum: int | None = None) -> int:
    value = tree[key]
    if isinstance(value, bool) or not isinstance(value, int):
        raise ConfigError(f"{where}{key} must be an integer, got {value!r}")
    if minimum is not None and value < minimum:
        raise ConfigError(f"{where}{key} must be >= {minimum}, got {value}")
    return value


def _build(tree: dict) -> Config:
    raw = copy.deepcopy(tree)
    listeners = {}
    for proto, section in tree["listeners"].items():
        where = f"listeners.{proto}."
        if not isinstance(section["enabled"], bool):
            raise ConfigError(f"{where}enabled must be true or false")
        if not isinstance(section["host"], str) or not section["host"]:
            raise ConfigError(f"{where}host must be a host name or address")
        port = _int(section, "port", where, minimum=0)
        if port > 65535:
            raise ConfigError(f"{where}port must be <= 65535")
        if not isinstance(section["tls"], bool):
            raise ConfigError(f"{where}tls must be true or false")
        listeners[proto] = ListenerConfig(proto, section["enabled"], section["host"], port, section["tls"])
    st = tree["storage"]
    if st["flush"] not in FLUSH_POLICIES:
        raise ConfigError(f"storage.flush must be one of {', '.join(FLUSH_POLICIES)}, got {st['flush']!r}")
    try:
        topic_defaults = TopicConfig(
            segment_bytes=_int(st, "segment_bytes", "storage."),
            segment_ms=_int(st, "segment_ms", "storage."),
            retention_bytes=_int(st, "retention_bytes", "storage."),
            retention_ms=_int(st, "retention_ms", "storage."),
            index_interval_bytes=_int(st, "index_interval_bytes", "storage."),
            max_batch_bytes=_int(st, "max_batch_bytes", "storage."),
        ).validate()
    except InvalidConfig as exc:
        raise ConfigError(f"storage: {exc}") from None
    storage = StorageSettings(st["flush"], _int(st, "flush_interval_ms", "storage.", minimum=1),
                              _int(st, "retention_check_interval_ms", "storage.", minimum=1), topic_defaults)
    lim = tree["limits"]
    limits = Limits(*(_int(lim, k, "limits.", minimum=1) for k in
                      ("max_connections", "max_connections_per_ip", "max_frame_bytes", "idle_timeout_ms",
                       "request_timeout_ms", "max_waiters", "max_wait_ms", "max_fetch_bytes")))
    kt = tree["kafka"]
    if not isinstance(kt["advertised_host"], str):
        raise ConfigError("kafka.advertised_host must be a host name or \"\"")
    if not isinstance(kt["auto_create_topics"], bool):
        raise ConfigError("kafka.auto_create_topics must be true or false")
    kafka = KafkaSettings(kt["advertised_host"], _int(kt, "advertised_port", "kafka.", minimum=0),
                          kt["auto_create_topics"], _int(kt, "default_partitions", "kafka.", minimum=1),
                          _int(kt, "max_request_bytes", "kafka.", minimum=1024),
                          _int(kt, "group_initial_rebalance_delay_ms", "kafka.", minimum=0),
                          _int(kt, "group_min_session_timeout_ms", "kafka.", minimum=1),
                          _int(kt, "group_max_session_timeout_ms", "kafka.", minimum=1))
    if not isinstance(tree["data_dir"], str) or not tree["data_dir"]:
        raise ConfigError("data_dir must be a path")
    level = str(tree["log_level"]).upper()
    if level not in ("DEBUG", "INFO", "WARNING", "ERROR"):
        raise ConfigError(f"log_level must be DEBUG, INFO, WARNING or ERROR, got {tree['log_level']!r}")
    return Config(tree["data_dir"], listeners, storage, limits, kafka,
                  _int(tree, "shutdown_timeout_ms", "", minimum=0), level, raw, _tls(tree["tls"], listeners),
                  _auth(tree["auth"]))


def _tls(section: dict, listeners: dict[str, ListenerConfig]) -> TlsSettings:
    for key in ("cert_file", "key_file"):
        if not isinstance(section[key], str):
            raise ConfigError(f"tls.{key} must be a file path or \"\"")
    users = [name for name, lc in listeners.items() if lc.enabled and lc.tls]
    if users and not (section["cert_file"] and section["key_file"]):
        raise ConfigError(f"listeners {', '.join(users)} have tls: true but tls.cert_file and tls.key_file "
                          "are not both set")
    return TlsSettings(section["cert_file"], section["key_file"])


def _auth(section: dict) -> AuthSettings:
    if not isinstance(section["kafka_sasl_plain"], bool):
        raise ConfigError("auth.kafka_sasl_plain must be true or false")
    users = section["users"]
    if not isinstance(users, dict):
        raise ConfigError("auth.users must be a mapping of user name to password")
    for name, password in users.items():
        if not isinstance(name, str) or not name or "\0" in name:
            raise ConfigError(f"auth.users: {name!r} is not a valid user name")
        if not isinstance(password, str) or not password:
            raise ConfigError(f"auth.users.{name} must be a non-empty password (quote numbers in YAML)")
    if section["kafka_sasl_plain"] and not users:
        raise ConfigError("auth.kafka_sasl_plain is true but auth.users is empty: no client could log in")
    token = section["native_token"]
    if not isinstance(token, str):
        raise ConfigError("auth.native_token must be text (quote it in YAML)")
    return AuthSettings(section["kafka_sasl_plain"], dict(users), token)
