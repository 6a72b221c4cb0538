"""The Kafka configuration APIs: DescribeConfigs (32), AlterConfigs (33) and IncrementalAlterConfigs (44).

Resources:

- a topic (type 2): its storage settings under their Kafka names (the storage's table, through `topic_admin`),
  from `TopicAdmin.config`; alterations go to `TopicAdmin.alter_config` (validated as a whole, applied live,
  durable when answered). AlterConfigs replaces the topic's overrides (what it leaves out falls back to the
  gateway's `storage.*` value); IncrementalAlterConfigs sets or deletes single keys, and APPENDs to or SUBTRACTs
  from a list config (`cleanup.policy`; on any other: INVALID_CONFIG). `storage.format` is shown read-only and
  cannot change.
- the broker (type 4, name "0" — this node — or "" — the cluster default; the same answer: there are no dynamic
  broker configs): the gateway settings Kafka clients know a name for, read-only (`STATIC_BROKER_CONFIG` when the
  gateway's configuration sets them, `DEFAULT_CONFIG` otherwise). Altering them is INVALID_REQUEST: they come from
  the gateway's configuration file and change with a restart.
- a group (type 32): a share group's `share.auto.offset.reset` (latest, earliest) and
  `share.record.lock.duration.ms` (1000..3600000), durable in the share-state store (`share_coordinator`);
  described with source DYNAMIC_GROUP_CONFIG when the group sets them, DEFAULT_CONFIG (the gateway's
  `kafka.share_auto_offset_reset` / `kafka.group_share_record_lock_duration_ms`) otherwise. Other group configs
  are INVALID_CONFIG.
- anything else (BROKER_LOGGER, unknown types), another broker id: INVALID_REQUEST.

Errors are per resource with a message, as Kafka: a resource named twice in one request, or a key named twice
in one resource, is INVALID_REQUEST; unknown topics UNKNOWN_TOPIC_OR_PARTITION; illegal names
INVALID_TOPIC_EXCEPTION; unknown keys and bad values INVALID_CONFIG. DescribeConfigs leaves unknown keys out of
its answer (as Kafka) and treats an empty key list like a null one (every key).
"""

from __future__ import annotations

from collections import Counter
from typing import TYPE_CHECKING, Any

from logway.codecs.kafka.api import admin as A
from logway.codecs.kafka.api import configs as C
from logway.codecs.kafka.api.configs import AlterConfigOp, ConfigResourceType, ConfigSource, ConfigType
from logway.codecs.kafka.error_codes import ErrorCode as E

from ...config import KafkaSettings, StorageSettings
from ...errors import FAILURES
from ...topic_admin import (BUILT_IN, KAFKA_NAMES, LIST_CONFIGS, SOURCE_BROKER, SOURCE_DEFAULT, SOURCE_TOPIC, describe,
                            validate_topic_name)
from .errors import error_code
from .share_coordinator import GROUP_CONFIGS, MAX_LOCK_MS, MIN_LOCK_MS

if TYPE_CHECKING:  # pragma: no cover
    from .state import BrokerState

__all__ = ["describe_configs", "alter_configs", "incremental_alter_configs", "BROKER_SYNONYMS", "broker_configs",
           "created_topic_configs"]

_TOPIC = ConfigResourceType.TOPIC
_BROKER = ConfigResourceType.BROKER
_GROUP = ConfigResourceType.GROUP

#: Topic config -> the broker config Kafka names as its synonym (the default every topic inherits).
BROKER_SYNONYMS = {
    "retention.ms": "log.retention.ms",
    "retention.bytes": "log.retention.bytes",
    "segment.bytes": "log.segment.bytes",
    "segment.ms": "log.roll.ms",
    "index.interval.bytes": "log.index.interval.bytes",
    "max.message.bytes": "message.max.bytes",
    "cleanup.policy": "log.cleanup.policy",
    "min.cleanable.dirty.ratio": "log.cleaner.min.cleanable.ratio",
    "min.compaction.lag.ms": "log.cleaner.min.compaction.lag.ms",
    "max.compaction.lag.ms": "log.cleaner.max.compaction.lag.ms",
    "delete.retention.ms": "log.cleaner.delete.retention.ms",
}

#: Kafka name -> (type, documentation) of every config we describe.
_DOCS: dict[str, tuple[int, str]] = {
    "retention.ms": (ConfigType.LONG, "delete whole segments older than this (never the active one); -1 = forever"),
    "retention.bytes": (ConfigType.LONG, ("per partition: delete whole old segments beyond this size; "
                                         "-1 = unlimited")),
    "segment.bytes": (ConfigType.INT, "roll the active segment at this size"),
    "segment.ms": (ConfigType.LONG, "roll the active segment once it is this old"),
    "index.interval.bytes": (ConfigType.INT, "one sparse index entry per this many bytes of batches"),
    "max.message.bytes": (ConfigType.INT, "the largest record batch an append accepts"),
    "storage.format": (ConfigType.STRING, "logway's segment format of the topic (kafka or tank); fixed at creation"),
    "cleanup.policy": (ConfigType.LIST, ("delete: retention deletes old segments; compact: the log cleaner keeps the "
                                        "last record of each key; compact,delete: both")),
    "min.cleanable.dirty.ratio": (ConfigType.DOUBLE, ("clean a compacted partition once this share of its cleanable "
                                                     "part was written since its last cleaning")),
    "min.compaction.lag.ms": (ConfigType.LONG, "a segment is cleaned only once its newest record is this old"),
    "max.compaction.lag.ms": (ConfigType.LONG, ("a segment is cleaned, whatever the ratio, once its newest record "
                                               "is this old (and the active segment rolls at this age)")),
    "delete.retention.ms": (ConfigType.LONG, ("tombstones and transaction markers stay this long after their "
                                             "segment was last written")),
    "log.cleanup.policy": (ConfigType.LIST, "the default cleanup.policy of topics (storage.cleanup_policy)"),
    "log.cleaner.min.cleanable.ratio": (ConfigType.DOUBLE, ("the default min.cleanable.dirty.ratio of topics "
                                                           "(storage.min_cleanable_dirty_ratio)")),
    "log.cleaner.min.compaction.lag.ms": (ConfigType.LONG, ("the default min.compaction.lag.ms of topics "
                                                           "(storage.min_compaction_lag_ms)")),
    "log.cleaner.max.compaction.lag.ms": (ConfigType.LONG, ("the default max.compaction.lag.ms of topics "
                                                           "(storage.max_compaction_lag_ms)")),
    "log.cleaner.delete.retention.ms": (ConfigType.LONG, ("the default delete.retention.ms of topics "
                                                         "(storage.delete_retention_ms)")),
    "log.cleaner.backoff.ms": (ConfigType.LONG, ("how often the log cleaner looks for partitions to clean "
                                                "(storage.cleaner_check_interval_ms)")),
    "log.cleaner.io.max.bytes.per.second": (ConfigType.DOUBLE, ("bytes the log cleaner reads and writes per second "
                                                               "(storage.cleaner_io_bytes_per_second; 0: no limit)")),
    "log.cleaner.dedupe.buffer.size": (ConfigType.LONG, ("memory for the keys one cleaning pass maps "
                                                        "(storage.cleaner_dedupe_buffer_bytes)")),
    "broker.id": (ConfigType.INT, "this broker's node id (logway is a single broker)"),
    "log.dirs": (ConfigType.LIST, "the gateway's data directory"),
    "log.retention.ms": (ConfigType.LONG, "the default retention.ms of topics (storage.retention_ms)"),
    "log.retention.bytes": (ConfigType.LONG, "the default retention.bytes of topics (storage.retention_bytes)"),
    "log.segment.bytes": (ConfigType.INT, "the default segment.bytes of topics (storage.segment_bytes)"),
    "log.roll.ms": (ConfigType.LONG, "the default segment.ms of topics (storage.segment_ms)"),
    "log.index.interval.bytes": (ConfigType.INT, ("the default index.interval.bytes of topics "
                                                 "(storage.index_interval_bytes)")),
    "message.max.bytes": (ConfigType.INT, "the default max.message.bytes of topics (storage.max_batch_bytes)"),
    "log.retention.check.interval.ms": (ConfigType.LONG, ("how often retention runs "
                                                         "(storage.retention_check_interval_ms)")),
    "auto.create.topics.enable": (ConfigType.BOOLEAN, ("Metadata requests that allow it create unknown topics "
                                                      "(kafka.auto_create_topics)")),
    "num.partitions": (ConfigType.INT, ("partitions of auto-created topics and of CreateTopics with -1 "
                                       "(kafka.default_partitions)")),
    "socket.request.max.bytes": (ConfigType.INT, "larger requests close the connection (kafka.max_request_bytes)"),
    "group.initial.rebalance.delay.ms": (ConfigType.INT, ("wait for more members before the first rebalance of an "
                                                         "empty group (kafka.group_initial_rebalance_delay_ms)")),
    "group.min.session.timeout.ms": (ConfigType.INT, ("the shortest consumer session timeout accepted "
                                                     "(kafka.group_min_session_timeout_ms)")),
    "group.max.session.timeout.ms": (ConfigType.INT, ("the longest consumer session timeout accepted "
                                                     "(kafka.group_max_session_timeout_ms)")),
    "transaction.max.timeout.ms": (ConfigType.INT, ("the longest transaction timeout a producer may ask for "
                                                   "(kafka.transaction_max_timeout_ms)")),
}

_SOURCES = {SOURCE_TOPIC: ConfigSource.DYNAMIC_TOPIC_CONFIG, SOURCE_BROKER: ConfigSource.STATIC_BROKER_CONFIG,
            SOURCE_DEFAULT: ConfigSource.DEFAULT_CONFIG}
_BROKER_READ_ONLY = ("broker configs are read-only: they come from the gateway's configuration (kafka.*, "
                     "storage.*) and change with a restart")


class _Refused(Exception):
    """A resource answered with an error code and message."""

    def __init__(self, code: int, message: str) -> None:
        super().__init__(message)
        self.code = code


def _text(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    return str(value)


# -- what a resource is -----------------------------------------------------------------------------------------

def _invalid_config(message: str) -> _Refused:
    return _Refused(E.INVALID_CONFIG, message)


def _check_broker(broker: "BrokerState", name: str) -> None:
    """Kafka: "" is the cluster-wide default, otherwise the name must be this broker's id."""
    if name == "":
        return
    try:
        node = int(name)
    except ValueError:
        raise _Refused(E.INVALID_REQUEST, f"broker resource name {name!r} is not a broker id") from None
    if node != broker.node_id:
        raise _Refused(E.INVALID_REQUEST, f"unexpected broker id, expected {broker.node_id}, but received {name}")


def _check_topic(name: str) -> None:
    try:
        validate_topic_name(name)
    except FAILURES as exc:
        raise _Refused(error_code(exc), str(exc)) from None


def _refuse_other(resource_type: int) -> _Refused:
    try:
        kind = ConfigResourceType(resource_type).name
    except ValueError:
        kind = str(resource_type)
    return _Refused(E.INVALID_REQUEST, f"unsupported resource type {kind} (only TOPIC, BROKER and GROUP)")


def _duplicates(resources) -> set[tuple[int, str]]:
    counts = Counter((r.resource_type, r.resource_name) for r in resources)
    return {key for key, n in counts.items() if n > 1}


# -- group configs (share groups) ---------------------------------------------------------------------------------

def _check_group(name: str) -> None:
    if not name:
        raise _Refused(E.INVALID_REQUEST, "a group resource needs a group id")


def _group_value(name: str, value: Any) -> Any:
    """A share group config's value, checked (INVALID_CONFIG, as Kafka)."""
    if name not in GROUP_CONFIGS:
        raise _invalid_config(f"unknown group config {name!r} (known: {', '.join(sorted(GROUP_CONFIGS))})")
    choices = GROUP_CONFIGS[name]
    if choices is not None:
        if value not in choices:
            raise _invalid_config(f"invalid value {value!r} for {name}: one of {', '.join(choices)}")
        return value
    try:
        number = int(value)
    except (TypeError, ValueError):
        raise _invalid_config(f"invalid value {value!r} for {name}: an integer") from None
    if not MIN_LOCK_MS <= number <= MAX_LOCK_MS:
        raise _invalid_config(f"invalid value {value!r} for {name}: between {MIN_LOCK_MS} and {MAX_LOCK_MS}")
    return number


async def _alter_group(broker: "BrokerState", name: str, plan: dict, validate_only: bool) -> None:
    shares = broker.share_groups
    own = {} if plan.get("replace") else dict(shares.configs.get(name, {}))
    for key in plan.get("delete", ()):
        if key not in GROUP_CONFIGS:
            raise _invalid_config(f"unknown group config {key!r} (known: {', '.join(sorted(GROUP_CONFIGS))})")
        own.pop(key, None)
    for key, value in plan.get("set", {}).items():
        own[key] = _group_value(key, value)
    if not validate_only:
        await shares.set_config(name, own)


def _describe_group(broker: "BrokerState", name: str, keys, body) -> list[C.DescribeConfigsResourceResult]:
    shares = broker.share_groups
    own = shares.configs.get(name, {})
    return [_entry(key, value, ConfigSource.DYNAMIC_GROUP_CONFIG if key in own else ConfigSource.DEFAULT_CONFIG,
                   False, [], body)
            for key, value in sorted(shares.config(name).items()) if keys is None or key in keys]


# -- broker configs -----------------------------------------------------------------------------------------------

def broker_configs(broker: "BrokerState") -> list[tuple[str, Any, bool]]:
    """(Kafka name, value, is the built-in default) of every broker setting we honour and describe."""
    cfg = broker.config
    topics = broker.steps.topics
    kafka, defaults = cfg.kafka, topics.defaults
    kafka_built_in, storage_built_in = KafkaSettings(), StorageSettings()
    entries: list[tuple[str, Any, bool]] = [("broker.id", broker.node_id, True),
                                            ("log.dirs", topics.data_dir, False)]
    for topic_name, name in BROKER_SYNONYMS.items():
        field = KAFKA_NAMES[topic_name]
        value = getattr(defaults, field)
        entries.append((name, value, value == getattr(BUILT_IN, field)))
    for name, field in (("log.retention.check.interval.ms", "retention_check_interval_ms"),
                        ("log.cleaner.backoff.ms", "cleaner_check_interval_ms"),
                        ("log.cleaner.io.max.bytes.per.second", "cleaner_io_bytes_per_second"),
                        ("log.cleaner.dedupe.buffer.size", "cleaner_dedupe_buffer_bytes")):
        value = getattr(cfg.storage, field)
        entries.append((name, value, value == getattr(storage_built_in, field)))
    for name, field in (("auto.create.topics.enable", "auto_create_topics"), ("num.partitions", "default_partitions"),
                        ("socket.request.max.bytes", "max_request_bytes"),
                        ("group.initial.rebalance.delay.ms", "group_initial_rebalance_delay_ms"),
                        ("group.min.session.timeout.ms", "group_min_session_timeout_ms"),
                        ("group.max.session.timeout.ms", "group_max_session_timeout_ms"),
                        ("transaction.max.timeout.ms", "transaction_max_timeout_ms")):
        value = getattr(kafka, field)
        entries.append((name, value, value == getattr(kafka_built_in, field)))
    return sorted(entries)


def _entry(name: str, value: Any, source: int, read_only: bool, synonyms: list,
           body) -> C.DescribeConfigsResourceResult:
    config_type, doc = _DOCS.get(name, (ConfigType.UNKNOWN, None))
    return C.DescribeConfigsResourceResult(
        name=name, value=_text(value), read_only=read_only, config_source=source,
        is_default=source == ConfigSource.DEFAULT_CONFIG, is_sensitive=False,
        synonyms=synonyms if body.include_synonyms else [], config_type=config_type,
        documentation=doc if body.include_documentation else None)


def _describe_broker(broker: "BrokerState", keys, body) -> list[C.DescribeConfigsResourceResult]:
    out = []
    for name, value, built_in in broker_configs(broker):
        if keys is not None and name not in keys:
            continue
        source = ConfigSource.DEFAULT_CONFIG if built_in else ConfigSource.STATIC_BROKER_CONFIG
        out.append(_entry(name, value, source, True, [C.DescribeConfigsSynonym(name, _text(value), source)], body))
    return out


# -- topic configs ------------------------------------------------------------------------------------------------

def _describe_topic(broker: "BrokerState", name: str, keys, body) -> list[C.DescribeConfigsResourceResult]:
    out = []
    for e in broker.steps.topics.config(name):  # UnknownTopic
        if keys is not None and e.name not in keys:
            continue
        # Kafka's synonyms, most specific first: the topic's override, the broker setting it inherits, the
        # built-in default (named after the broker setting, as Kafka does).
        synonym = BROKER_SYNONYMS.get(e.name)
        synonyms = []
        if e.source == SOURCE_TOPIC:
            synonyms.append(C.DescribeConfigsSynonym(e.name, _text(e.value), ConfigSource.DYNAMIC_TOPIC_CONFIG))
        built_in = getattr(BUILT_IN, KAFKA_NAMES[e.name])
        if synonym is not None and e.default != built_in:
            synonyms.append(C.DescribeConfigsSynonym(synonym, _text(e.default), ConfigSource.STATIC_BROKER_CONFIG))
        synonyms.append(C.DescribeConfigsSynonym(synonym or e.name, _text(built_in), ConfigSource.DEFAULT_CONFIG))
        out.append(_entry(e.name, e.value, _SOURCES[e.source], e.read_only, synonyms, body))
    return out


def created_topic_configs(topics, overrides) -> list:
    """A topic's settings as CreateTopics v5+ answers them (name, value, read-only, source), for a topic made
    with these overrides."""
    return [A.CreatableTopicConfigs(name=e.name, value=_text(e.value), read_only=e.read_only,
                                    config_source=_SOURCES[e.source], is_sensitive=False)
            for e in describe(topics.defaults.with_overrides(overrides), overrides, topics.defaults)]


# -- DescribeConfigs ------------------------------------------------------------------------------------------------

async def describe_configs(broker: "BrokerState", body, version, conn):
    results = []
    duplicated = _duplicates(body.resources)
    for r in body.resources:
        keys = set(r.configuration_keys) if r.configuration_keys else None  # null or empty: every key
        result = C.DescribeConfigsResult(error_code=E.NONE, error_message=None, resource_type=r.resource_type,
                                         resource_name=r.resource_name, configs=[])
        try:
            if (r.resource_type, r.resource_name) in duplicated:
                raise _Refused(E.INVALID_REQUEST, "each resource must appear at most once")
            if r.resource_type == _TOPIC:
                _check_topic(r.resource_name)
                result.configs = _describe_topic(broker, r.resource_name, keys, body)
            elif r.resource_type == _BROKER:
                _check_broker(broker, r.resource_name)
                result.configs = _describe_broker(broker, keys, body)
            elif r.resource_type == _GROUP:
                _check_group(r.resource_name)
                result.configs = _describe_group(broker, r.resource_name, keys, body)
            else:
                raise _refuse_other(r.resource_type)
        except _Refused as exc:
            result.error_code, result.error_message = exc.code, str(exc)
        except FAILURES as exc:
            result.error_code, result.error_message = error_code(exc), str(exc)
        results.append(result)
    return C.DescribeConfigsResponse(throttle_time_ms=0, results=results)


# -- AlterConfigs, IncrementalAlterConfigs --------------------------------------------------------------------------

async def _alter(broker: "BrokerState", body, plan) -> list[C.AlterConfigsResourceResponse]:
    """Each resource's answer; `plan(resource)` -> keyword arguments of `TopicAdmin.alter_config` (or raises)."""
    out = []
    duplicated = _duplicates(body.resources)
    for r in body.resources:
        code, message = E.NONE, None
        try:
            if (r.resource_type, r.resource_name) in duplicated:
                raise _Refused(E.INVALID_REQUEST, "each resource must appear at most once")
            names = Counter(c.name for c in r.configs)
            twice = sorted(n for n, k in names.items() if k > 1)
            if twice:
                raise _Refused(E.INVALID_REQUEST, f"duplicate config keys: {', '.join(twice)}")
            if r.resource_type == _TOPIC:
                _check_topic(r.resource_name)
                broker.steps.topics.topic(r.resource_name)  # UnknownTopic before any complaint about its keys
                kwargs = plan(r)
                await broker.steps.topics.alter_config(r.resource_name, validate_only=body.validate_only, **kwargs)
            elif r.resource_type == _BROKER:
                _check_broker(broker, r.resource_name)
                if r.configs:
                    raise _Refused(E.INVALID_REQUEST, _BROKER_READ_ONLY)
            elif r.resource_type == _GROUP:
                _check_group(r.resource_name)
                await _alter_group(broker, r.resource_name, plan(r, group=True), body.validate_only)
            else:
                raise _refuse_other(r.resource_type)
        except _Refused as exc:
            code, message = exc.code, str(exc)
        except FAILURES as exc:
            code, message = error_code(exc), str(exc)
        out.append(C.AlterConfigsResourceResponse(error_code=code, error_message=message,
                                                  resource_type=r.resource_type, resource_name=r.resource_name))
    return out


def _replace_plan(resource, group: bool = False) -> dict:
    # Non-incremental: the given keys become the topic's whole set of overrides; a null value leaves its key out
    # (back to the default), as Kafka drops null entries.
    return {"set": {c.name: c.value for c in resource.configs if c.value is not None}, "replace": True}


def _incremental_plan(resource, group: bool = False) -> dict:
    set_: dict[str, str] = {}
    delete: list[str] = []
    lists: dict[int, dict[str, list[str]]] = {AlterConfigOp.APPEND: {}, AlterConfigOp.SUBTRACT: {}}
    for c in resource.configs:
        op = c.config_operation
        if op == AlterConfigOp.SET:
            if c.value is None:
                raise _Refused(E.INVALID_REQUEST, f"null value not supported for {c.name!r}")
            set_[c.name] = c.value
        elif op == AlterConfigOp.DELETE:
            delete.append(c.name)
        elif op in (AlterConfigOp.APPEND, AlterConfigOp.SUBTRACT):
            verb = AlterConfigOp(op).name.lower()
            if c.name not in (GROUP_CONFIGS if group else KAFKA_NAMES):
                raise _invalid_config(f"unknown {'group' if group else 'topic'} config {c.name!r}")
            if group or c.name not in LIST_CONFIGS:
                raise _invalid_config(f"config value {verb} is not allowed for config key {c.name!r} (not a list)")
            lists[op][c.name] = (c.value or "").split(",")
        else:
            raise _Refused(E.INVALID_REQUEST, f"unknown alter config operation {op} for {c.name!r}")
    return {"set": set_, "delete": delete, "append": lists[AlterConfigOp.APPEND],
            "subtract": lists[AlterConfigOp.SUBTRACT]}


async def alter_configs(broker: "BrokerState", body, version, conn):
    return C.AlterConfigsResponse(throttle_time_ms=0, responses=await _alter(broker, body, _replace_plan))


async def incremental_alter_configs(broker: "BrokerState", body, version, conn):
    return C.IncrementalAlterConfigsResponse(throttle_time_ms=0,
                                             responses=await _alter(broker, body, _incremental_plan))
