"""The data source's options, parsed once on the driver into frozen, picklable dataclasses.

Names follow Spark's own Kafka source where one exists (case-insensitive, as Spark passes them):

reading (`ReadOptions`)
  gateway                     host:port of the gateway's Kafka listener (required)
  subscribe | subscribePattern | assign
                              a comma list of topics | a regular expression matched against whole topic names |
                              JSON {"topic": [partitions]}; exactly one of the three
  startingOffsets             earliest | latest | JSON {"topic": {"partition": offset}} (-2 earliest, -1 latest;
                              partitions left out start at the default). Default: earliest (batch), latest (stream)
  endingOffsets               latest | JSON as above (-1 latest). Batch only. Default: latest
  startingTimestamp           ms since the epoch: start every partition at its first record with a timestamp >= it
  startingOffsetsByTimestamp  JSON {"topic": {"partition": ms}}: the same, per partition
  endingTimestamp, endingOffsetsByTimestamp
                              batch only: stop before the first record with a timestamp >= it (or at the end)
                              Precedence, as in Spark: *Timestamp > *OffsetsByTimestamp > *Offsets (partitions
                              that *OffsetsByTimestamp leaves out follow *Offsets). A timestamp no record reaches
                              resolves to the end of the partition (nothing to read).
  maxRecordsPerPartition      split a partition's range into Spark tasks of at most this many offsets
  maxRecordsPerTrigger        streaming: at most this many records per micro-batch (split across partitions in
                              proportion to their backlog); Trigger.AvailableNow honours it too
  fetchMaxBytes               bytes asked per fetch (default 8 MiB; at least one whole batch is always returned)
  failOnDataLoss              true (default): fail when offsets to read were deleted by retention; false: skip
  pushFilters                 use partition/offset/timestamp predicates to fetch less; default: true where Spark
                              keeps pushed-down state per scan (see `source.PUSHDOWN_IS_SAFE`), false before

security (both; the gateway's `listeners.kafka.tls` / `auth.kafka_sasl_plain`, like Spark's `kafka.security.*`)
  security.protocol           PLAINTEXT (default) | SSL | SASL_PLAINTEXT | SASL_SSL
  ssl.cafile                  PEM file of the certificate(s) to trust (default: the system's store)
  ssl.checkHostname           true (default): the certificate must name the gateway's host
  sasl.username, sasl.password
                              SASL credentials (required with SASL_*); the password is never shown in
                              plans or error messages
  sasl.mechanism              PLAIN (default) | SCRAM-SHA-256 | SCRAM-SHA-512 (the password never crosses the
                              connection)

writing (`WriteOptions`)
  gateway                     as above (required)
  topic                       the topic of every row (overrides a `topic` column)
  compression                 none (default) | gzip | snappy | lz4 | zstd
  batchBytes                  encoded records per produce request and partition (default 1 MiB)
  transactionTimeoutMs        how long one task's transaction may stay open (default 60000, at most the gateway's
                              kafka.transaction_max_timeout_ms): the gateway aborts it after that, and committed
                              readers wait at most that long behind a task attempt that died mid-write
  exactlyOnce                 streaming only: true makes a micro-batch that Spark re-runs after the query
                              restarts (it was written, but its commit was not yet in the checkpoint) append
                              nothing twice; transactions are named after the query and each task records the last
                              micro-batch it committed. Default false: such a re-run writes its rows again

Spark's own bookkeeping options (`path`, `checkpointLocation`, `queryName`) are ignored; any other unknown name is
an `OptionError`, so a misspelt option fails the query instead of being silently ignored.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from typing import Mapping

from logway.clients.errors import AddressError
from logway.clients.kafka import EARLIEST, LATEST, SASL_MECHANISMS, SECURITY_PROTOCOLS, KafkaConfig
from logway.codecs.compression import CODEC_NAMES

from .errors import OptionError

__all__ = ["ReadOptions", "WriteOptions", "OffsetSpec", "read_options", "write_options"]

#: The client id of the data source's Kafka requests (what the gateway's logs show).
CLIENT_ID = "logway-spark"
DEFAULT_FETCH_MAX_BYTES = 8 * 1024 * 1024
DEFAULT_BATCH_BYTES = 1024 * 1024
#: Kafka's producer default (transaction.timeout.ms).
DEFAULT_TRANSACTION_TIMEOUT_MS = 60_000
#: Spark adds these itself (DataFrameWriter.save(path), writeStream's checkpoint, named queries).
_SPARK_OWN = {"path", "checkpointlocation", "queryname"}
_READ = {"gateway", "subscribe", "subscribepattern", "assign", "startingoffsets", "endingoffsets",
         "startingtimestamp", "startingoffsetsbytimestamp", "endingtimestamp", "endingoffsetsbytimestamp",
         "maxrecordsperpartition", "maxrecordspertrigger", "fetchmaxbytes", "failondataloss", "pushfilters"}
_WRITE = {"gateway", "topic", "compression", "batchbytes", "transactiontimeoutms", "exactlyonce"}
_SECURITY = {"security.protocol", "ssl.cafile", "ssl.checkhostname", "sasl.username", "sasl.password",
             "sasl.mechanism"}
_READ |= _SECURITY
_WRITE |= _SECURITY
_STREAM_ONLY = {"maxrecordspertrigger"}
_BATCH_ONLY = {"endingoffsets", "endingtimestamp", "endingoffsetsbytimestamp"}


@dataclass(frozen=True, slots=True)
class OffsetSpec:
    """Where ranges start or end: a default for every partition, plus per-partition overrides.

    Each position is (kind, value): kind "offset" (an offset, or -2 earliest / -1 latest) or "timestamp" (ms:
    the first offset whose record timestamp is >= it).
    """

    default: tuple[str, int]
    per_partition: tuple[tuple[str, int, str, int], ...] = ()

    def value_for(self, topic: str, partition: int) -> tuple[str, int]:
        for t, p, kind, value in self.per_partition:
            if t == topic and p == partition:
                return kind, value
        return self.default


@dataclass(frozen=True, slots=True)
class ReadOptions:
    client: KafkaConfig
    subscribe: tuple[str, ...] | None
    pattern: str | None
    assign: tuple[tuple[str, tuple[int, ...]], ...] | None
    starting: OffsetSpec
    ending: OffsetSpec
    max_records_per_partition: int | None
    max_records_per_trigger: int | None
    fetch_max_bytes: int
    fail_on_data_loss: bool
    push_filters: bool | None  # None: the data source decides (see source.PUSHDOWN_IS_SAFE)

    def matches(self, topic: str) -> bool:
        """Whether `topic` is one this query reads."""
        if self.subscribe is not None:
            return topic in self.subscribe
        if self.assign is not None:
            return any(t == topic for t, _ in self.assign)
        return re.fullmatch(self.pattern, topic) is not None


@dataclass(frozen=True, slots=True)
class WriteOptions:
    client: KafkaConfig
    topic: str | None
    compression: int
    batch_bytes: int
    transaction_timeout_ms: int = DEFAULT_TRANSACTION_TIMEOUT_MS
    exactly_once: bool = False  # streaming writes only (see the module doc)


# ---------------------------------------------------------------------------------------------- parsing

def _lower(options: Mapping[str, str], allowed: set[str], what: str) -> dict[str, str]:
    opts = {str(k).lower(): v for k, v in options.items()}
    unknown = sorted(set(opts) - allowed - _SPARK_OWN)
    if unknown:
        names = ", ".join(sorted(_display(n) for n in allowed))
        raise OptionError(f"unknown {what} option(s) {', '.join(unknown)} for format 'logway' (known: {names})")
    return opts


_DISPLAY = {n.lower(): n for n in (
    "gateway subscribe subscribePattern assign startingOffsets endingOffsets startingTimestamp "
    "startingOffsetsByTimestamp endingTimestamp endingOffsetsByTimestamp maxRecordsPerPartition "
    "maxRecordsPerTrigger fetchMaxBytes failOnDataLoss pushFilters topic compression batchBytes "
    "transactionTimeoutMs exactlyOnce "
    "security.protocol ssl.cafile ssl.checkHostname sasl.username sasl.password sasl.mechanism").split()}


def _display(name: str) -> str:
    return _DISPLAY.get(name, name)


def _positive_int(opts: dict, name: str, default: int | None = None) -> int | None:
    raw = opts.get(name)
    if raw is None:
        return default
    try:
        value = int(str(raw).strip())
    except ValueError:
        raise OptionError(f"option {_display(name)}={raw!r} is not an integer") from None
    if value <= 0:
        raise OptionError(f"option {_display(name)}={raw!r} must be positive")
    return value


def _bool(opts: dict, name: str, default: bool) -> bool:
    raw = opts.get(name)
    if raw is None:
        return default
    text = str(raw).strip().lower()
    if text not in ("true", "false"):
        raise OptionError(f"option {_display(name)}={raw!r} must be true or false")
    return text == "true"


def _json(opts: dict, name: str):
    raw = opts[name]
    try:
        return json.loads(raw)
    except ValueError as exc:
        raise OptionError(f"option {_display(name)} is not valid JSON ({exc}): {raw!r}") from None


def _per_partition(opts: dict, name: str, kind: str, *, allowed_specials: tuple[int, ...]) -> tuple:
    data = _json(opts, name)
    if not isinstance(data, dict):
        raise OptionError(f"option {_display(name)} must be a JSON object {{topic: {{partition: value}}}}")
    out = []
    for topic, parts in data.items():
        if not isinstance(parts, dict):
            raise OptionError(f"option {_display(name)}: the value for topic {topic!r} must be an object")
        for p, v in parts.items():
            try:
                partition = int(p)
            except ValueError:
                raise OptionError(f"option {_display(name)}: partition {p!r} of {topic!r} is not a number") from None
            if type(v) is not int or (v < 0 and v not in allowed_specials):
                raise OptionError(f"option {_display(name)}: {topic}-{p} has the invalid value {v!r}")
            out.append((topic, partition, kind, v))
    return tuple(sorted(out))


def _timestamp(opts: dict, name: str) -> int:
    raw = opts[name]
    try:
        value = int(str(raw).strip())
    except ValueError:
        raise OptionError(f"option {_display(name)}={raw!r} is not a timestamp in ms since the epoch") from None
    if value < 0:
        raise OptionError(f"option {_display(name)}={raw!r} must not be negative")
    return value


def _offset_spec(opts: dict, which: str, default: int, specials: tuple[int, ...]) -> OffsetSpec:
    """startingX / endingX by precedence: ...Timestamp > ...OffsetsByTimestamp > ...Offsets (partitions that
    ...OffsetsByTimestamp leaves out follow ...Offsets)."""
    if f"{which}timestamp" in opts:
        return OffsetSpec(("timestamp", _timestamp(opts, f"{which}timestamp")))
    name = f"{which}offsets"
    raw = opts.get(name)
    text = "" if raw is None else str(raw).strip()
    if raw is None:
        spec = OffsetSpec(("offset", default))
    elif text.lower() == "earliest" and EARLIEST in specials:
        spec = OffsetSpec(("offset", EARLIEST))
    elif text.lower() == "latest":
        spec = OffsetSpec(("offset", LATEST))
    elif text.startswith("{"):
        spec = OffsetSpec(("offset", default), _per_partition(opts, name, "offset", allowed_specials=specials))
    else:
        words = " or ".join(w for w, v in (("earliest", EARLIEST), ("latest", LATEST)) if v in specials)
        raise OptionError(f"option {_display(name)}={raw!r}: expected {words} or JSON {{topic: {{partition: offset}}}}")
    by_time = f"{which}offsetsbytimestamp"
    if by_time in opts:
        stamps = _per_partition(opts, by_time, "timestamp", allowed_specials=())
        chosen = {(t, p) for t, p, _, _ in stamps}
        kept = tuple(e for e in spec.per_partition if (e[0], e[1]) not in chosen)
        spec = OffsetSpec(spec.default, tuple(sorted(kept + stamps)))
    return spec


def _client(opts: dict) -> KafkaConfig:
    """The gateway address and the security options, checked together."""
    protocol = str(opts.get("security.protocol", "PLAINTEXT")).strip().upper()
    if protocol not in SECURITY_PROTOCOLS:
        raise OptionError(f"option security.protocol={opts['security.protocol']!r}: expected one of "
                          f"{', '.join(SECURITY_PROTOCOLS)}")
    tls, sasl = protocol in ("SSL", "SASL_SSL"), protocol.startswith("SASL_")
    for name in ("ssl.cafile", "ssl.checkhostname"):
        if name in opts and not tls:
            raise OptionError(f"option {_display(name)} needs security.protocol SSL or SASL_SSL")
    for name in ("sasl.username", "sasl.password", "sasl.mechanism"):
        if name in opts and not sasl:
            raise OptionError(f"option {name} needs security.protocol SASL_PLAINTEXT or SASL_SSL")
        if sasl and name != "sasl.mechanism" and not str(opts.get(name) or ""):
            raise OptionError(f"security.protocol {protocol} needs the option {name}")
    mechanism = str(opts.get("sasl.mechanism", "PLAIN")).strip().upper()
    if mechanism not in SASL_MECHANISMS:
        raise OptionError(f"option sasl.mechanism={opts['sasl.mechanism']!r}: expected one of "
                          f"{', '.join(SASL_MECHANISMS)}")
    cafile = opts.get("ssl.cafile")
    gateway = opts.get("gateway")
    if not gateway or not isinstance(gateway, str):
        raise OptionError("option 'gateway' is required: host:port of the logway gateway's Kafka listener")
    try:
        return KafkaConfig.parse(gateway, client_id=CLIENT_ID, security_protocol=protocol,
                                 ssl_cafile=None if cafile is None else str(cafile),
                                 ssl_check_hostname=_bool(opts, "ssl.checkhostname", True),
                                 sasl_username=opts.get("sasl.username"), sasl_password=opts.get("sasl.password"),
                                 sasl_mechanism=mechanism)
    except AddressError as exc:
        raise OptionError(f"option gateway: {exc}") from None


def read_options(options: Mapping[str, str], *, streaming: bool) -> ReadOptions:
    """Parse and check the options of a batch (`streaming=False`) or streaming read."""
    opts = _lower(options, _READ, "read")
    wrong = sorted((_BATCH_ONLY if streaming else _STREAM_ONLY) & set(opts))
    if wrong:
        kind = "streaming" if streaming else "batch"
        raise OptionError(f"option(s) {', '.join(_display(w) for w in wrong)} cannot be used in a {kind} read")
    client = _client(opts)
    chosen = [n for n in ("subscribe", "subscribepattern", "assign") if n in opts]
    if len(chosen) != 1:
        raise OptionError("give exactly one of the options subscribe (comma list of topics), subscribePattern "
                          "(regular expression) or assign (JSON {topic: [partitions]})")
    subscribe = pattern = assign = None
    if chosen[0] == "subscribe":
        subscribe = tuple(sorted({t.strip() for t in str(opts["subscribe"]).split(",") if t.strip()}))
        if not subscribe:
            raise OptionError("option subscribe names no topic")
    elif chosen[0] == "subscribepattern":
        pattern = str(opts["subscribepattern"])
        try:
            re.compile(pattern)
        except re.error as exc:
            raise OptionError(f"option subscribePattern={pattern!r} is not a regular expression: {exc}") from None
    else:
        data = _json(opts, "assign")
        if not isinstance(data, dict) or not all(
                isinstance(ps, list) and all(type(p) is int and p >= 0 for p in ps) for ps in data.values()):
            raise OptionError('option assign must be JSON like {"topic": [0, 1]}')
        assign = tuple(sorted((t, tuple(sorted(set(ps)))) for t, ps in data.items()))
    starting = _offset_spec(opts, "starting", LATEST if streaming else EARLIEST, (EARLIEST, LATEST))
    ending = OffsetSpec(("offset", LATEST)) if streaming else _offset_spec(opts, "ending", LATEST, (LATEST,))
    return ReadOptions(
        client=client, subscribe=subscribe, pattern=pattern, assign=assign, starting=starting, ending=ending,
        max_records_per_partition=_positive_int(opts, "maxrecordsperpartition"),
        max_records_per_trigger=_positive_int(opts, "maxrecordspertrigger"),
        fetch_max_bytes=_positive_int(opts, "fetchmaxbytes", DEFAULT_FETCH_MAX_BYTES),
        fail_on_data_loss=_bool(opts, "failondataloss", True),
        push_filters=None if "pushfilters" not in opts else _bool(opts, "pushfilters", True),
    )


def write_options(options: Mapping[str, str], *, streaming: bool = False) -> WriteOptions:
    """Parse and check the options of a batch or (`streaming=True`) streaming write."""
    opts = _lower(options, _WRITE, "write")
    if "exactlyonce" in opts and not streaming:
        raise OptionError("option exactlyOnce is for streaming writes: a batch write is always written once "
                          "(one transaction per task)")
    client = _client(opts)
    names = {name: codec for codec, name in CODEC_NAMES.items()}
    names["none"] = 0
    compression = str(opts.get("compression", "none")).strip().lower()
    if compression not in names:
        raise OptionError(f"option compression={compression!r}: expected one of {', '.join(sorted(names))}")
    topic = opts.get("topic")
    if topic is not None and not str(topic).strip():
        raise OptionError("option topic is empty")
    return WriteOptions(client=client, topic=None if topic is None else str(topic).strip(),
                        compression=names[compression],
                        batch_bytes=_positive_int(opts, "batchbytes", DEFAULT_BATCH_BYTES),
                        transaction_timeout_ms=_positive_int(opts, "transactiontimeoutms",
                                                             DEFAULT_TRANSACTION_TIMEOUT_MS),
                        exactly_once=_bool(opts, "exactlyonce", False))
