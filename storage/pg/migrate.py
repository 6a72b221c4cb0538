"""Moving a data directory into a database (`logway migrate`): everything a stopped gateway's `LogEngine` holds,
copied into a `PgEngine` and compared with it afterwards. Only storage interfaces are used: what is copied are the
stored batches, as bytes, never a decoded record.

- `refusal(source, target, into_existing)`: why the copy must not start (None: it may) — a compacted topic (this
  backend does not compact yet), a target schema holding topics of its own (unless `into_existing`), a topic the
  target has under another id (or an id under another name), a committed offset or a state the target holds with
  another value. logway migrate never overwrites anything.
- `copy(source, target)`: each topic made with its id, creation time, config overrides and partition count
  (`PgEngine.create_copy`); each partition's batches copied *verbatim* at their offsets (`PgPartitionLog.
  copy_batches`: a `kafka` topic's RecordBatches with their producer ids, sequences and transaction markers, a
  `tank` topic's bundles), committed every `COMMIT_BYTES`, then its transactions and log start offset
  (`copy_log_start`); then the committed offsets (with their metadata and commit times), the states of the
  transaction coordinator, of share groups and of security (ACLs, SCRAM credentials, quotas: keyed states, copied as
  they are), and the producer-id allocator's position (no id handed out from the directory is handed out again).
- `verify(source, target)`: per partition, the log start and end offsets, the offsets held, the bytes and a
  SHA-256 of the stored bytes, read from both sides (the caller opens the target again without a cache, so its
  bytes come from the database); the topics' ids, partition counts and overrides; the committed offsets and the
  states; the producer ids. Any difference is a `MigrationRefused` naming it.

Interrupted (Ctrl-C, a lost connection, a crash), a run leaves whole committed batches; running it again goes on:
a topic the target already has under the same name and id is taken up where each partition's committed log ends
(a batch boundary of the source), offsets and states already there with the same value are kept, and everything
is verified as after a first run. The caller marks the database (`PgEngine.begin_migration`) until a run verified
it, so no gateway serves a half-copied log meanwhile.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from ..errors import MigrationRefused
from ..topics import Engine

__all__ = ["COMMIT_BYTES", "PartitionDigest", "TopicCopy", "copy", "refusal", "verify"]

#: Bytes read from the source per step (at least one whole batch): what one step holds in memory.
READ_BYTES = 4 * 1024 * 1024
#: Copied batches kept pending before they are committed: a run interrupted loses at most this much work per
#: partition, and holds at most this much in memory.
COMMIT_BYTES = 16 * 1024 * 1024
#: The keyed state stores copied as they are, by their attribute on both engines.
STATE_STORES = ("transactions", "share_state", "security")
#: Topics named in a message at most (the rest are counted).
NAMED = 5


@dataclass(frozen=True, slots=True)
class PartitionDigest:
    """What `verify` compares of a partition: offsets held are counted per batch (last offset delta + 1)."""

    log_start: int
    log_end: int
    records: int
    size: int
    sha256: str


@dataclass(frozen=True, slots=True)
class TopicCopy:
    """A topic as `verify` found it in the target: `status` is what `copy` did (copied / resumed)."""

    name: str
    topic_id: str
    format: str
    status: str
    partitions: tuple[PartitionDigest, ...]

    @property
    def records(self) -> int:
        return sum(p.records for p in self.partitions)

    @property
    def size(self) -> int:
        return sum(p.size for p in self.partitions)


def _names(names: list[str]) -> str:
    shown = ", ".join(names[:NAMED])
    return shown + (f" and {len(names) - NAMED} more" if len(names) > NAMED else "")


def refusal(source: Engine, target: Engine, *, into_existing: bool = False) -> str | None:
    """Why `source` must not be copied into `target` (see the module docstring), or None."""
    compacted = [t.name for t in source.topics() if t.config.compact]
    if compacted:
        return (f"topic(s) {_names(compacted)} are compacted (cleanup.policy compact): the postgres backend does not "
                f"compact yet; nothing was copied (make them cleanup.policy delete first, or leave them on local files)")
    ours = {t.name: t for t in source.topics()}
    foreign = [t.name for t in target.topics() if t.name not in ours or ours[t.name].topic_id != t.topic_id]
    if foreign and not into_existing:
        return (f"the target already holds topics of its own ({_names(foreign)}): logway migrate never overwrites; "
                f"give it an empty schema (--schema), or --into-existing to add this directory's topics beside them")
    for topic in source.topics():
        there = target.topics_by_name.get(topic.name)
        if there is not None and there.topic_id != topic.topic_id:
            return (f"topic {topic.name} exists in the target with another id ({there.topic_id}, here "
                    f"{topic.topic_id}): rename or delete one of them first")
        same_id = target.topic_by_id(topic.topic_id)
        if same_id is not None and same_id.name != topic.name:
            return f"topic id {topic.topic_id} of topic {topic.name} is topic {same_id.name}'s in the target"
        if there is not None:
            if len(there.partitions) != len(topic.partitions):
                return (f"topic {topic.name} has {len(topic.partitions)} partition(s) here and "
                        f"{len(there.partitions)} in the target")
            if there.overrides != topic.overrides:
                return f"topic {topic.name} has other config overrides in the target ({there.overrides})"
            for src, dst in zip(topic.partitions, there.partitions):
                if dst.log_end_offset > src.log_end_offset:
                    return (f"partition {topic.name}-{src.partition} ends at offset {dst.log_end_offset} in the "
                            f"target, past its end here ({src.log_end_offset}): the target was written since")
    for group in source.offsets.groups():
        theirs = target.offsets.fetch_group(group)
        for key, value in source.offsets.fetch_group(group).items():
            if key in theirs and theirs[key] != value:
                return (f"group {group} has committed another offset of {key[0]}-{key[1]} in the target "
                        f"({theirs[key].offset}, here {value.offset})")
    for store in STATE_STORES:
        theirs = dict(getattr(target, store).items())
        for key, state in getattr(source, store).items():
            if key in theirs and theirs[key] != state:
                return f"the target's {getattr(target, store).what} holds another state of {key!r}"
    return None


def copy(source: Engine, target: Engine) -> dict[str, str]:
    """Copy everything of `source` into `target` (see the module docstring; `refusal` said None). Topic name →
    "copied" or "resumed"."""
    done = {}
    for topic in source.topics():
        there = target.topics_by_name.get(topic.name)
        done[topic.name] = "copied" if there is None else "resumed"
        if there is None:
            there = target.create_copy(topic)
        for src, dst in zip(topic.partitions, there.partitions):
            _copy_partition(src, dst)
    for group in source.offsets.groups():
        have = target.offsets.fetch_group(group)
        for (topic, partition), value in source.offsets.fetch_group(group).items():
            if (topic, partition) not in have:
                target.offsets.commit(group, topic, partition, value.offset, value.metadata, value.commit_time_ms)
    target.offsets.sync()
    for store in STATE_STORES:
        have = dict(getattr(target, store).items())
        missing = [(key, state) for key, state in getattr(source, store).items() if key not in have]
        getattr(target, store).put_all(missing)
    target.producer_ids.reserve_below(source.producer_ids_reserved())
    return done


def _copy_partition(src, dst) -> None:
    """Copy one partition's batches from where the target's committed log ends (a batch boundary of the source's
    log, or its log start when nothing was copied yet), then its transactions and log start offset."""
    resuming = dst.segment_count > 0 or dst.log_end_offset > dst.log_start_offset
    offset = dst.log_end_offset if resuming else src.log_start_offset
    pending = 0
    while True:
        rng = src.read(offset, READ_BYTES)
        if rng is None:
            break
        if resuming and rng.first_offset < offset:
            raise MigrationRefused(f"partition {src.topic}-{src.partition} ends at offset {offset} in the target, "
                                   f"inside a batch here: the target does not hold a copy of this log")
        resuming = False
        offset = dst.copy_batches(rng.read(), rng.first_offset)
        pending += rng.length
        if pending >= COMMIT_BYTES:
            dst.sync()
            pending = 0
    dst.sync()
    dst.copy_log_start(src.log_start_offset, src.txns)


def digest(plog) -> PartitionDigest:
    """A partition's `PartitionDigest`, reading every stored batch from its log start on."""
    sha = hashlib.sha256()
    records = size = 0
    offset = plog.log_start_offset
    fmt = plog.fmt
    while True:
        rng = plog.read(offset, READ_BYTES)
        if rng is None:
            break
        data = memoryview(rng.read())
        sha.update(data)
        size += len(data)
        pos = 0
        while pos < len(data):
            step, _, delta = fmt.scan(data, pos)[:3]
            records += delta + 1
            pos += step
        offset = rng.end_offset
    return PartitionDigest(plog.log_start_offset, plog.log_end_offset, records, size, sha.hexdigest())


def verify(source: Engine, target: Engine, done: dict[str, str]) -> list[TopicCopy]:
    """Compare `target` with `source` (see the module docstring): a `TopicCopy` per topic of `source`, or
    MigrationRefused naming the first difference. `done`: what `copy` answered."""
    out = []
    for topic in source.topics():
        there = target.topics_by_name.get(topic.name)
        if there is None or there.topic_id != topic.topic_id:
            raise MigrationRefused(f"topic {topic.name} (id {topic.topic_id}) is not in the target")
        if len(there.partitions) != len(topic.partitions) or there.overrides != topic.overrides:
            raise MigrationRefused(f"topic {topic.name} differs in the target: {len(there.partitions)} partition(s), "
                                   f"overrides {there.overrides}")
        digests = []
        for src, dst in zip(topic.partitions, there.partitions):
            mine, theirs = digest(src), digest(dst)
            if mine != theirs:
                raise MigrationRefused(f"partition {topic.name}-{src.partition} differs in the target: "
                                       f"{_diff(mine, theirs)}")
            digests.append(mine)
        out.append(TopicCopy(topic.name, str(topic.topic_id), topic.format, done.get(topic.name, "copied"),
                             tuple(digests)))
    for group in source.offsets.groups():
        theirs = target.offsets.fetch_group(group)
        for key, value in source.offsets.fetch_group(group).items():
            if theirs.get(key) != value:
                raise MigrationRefused(f"group {group}'s committed offset of {key[0]}-{key[1]} differs in the "
                                       f"target: {theirs.get(key)}, here {value}")
    for store in STATE_STORES:
        theirs = dict(getattr(target, store).items())
        for key, state in getattr(source, store).items():
            if theirs.get(key) != state:
                raise MigrationRefused(f"the target's {getattr(target, store).what} lacks the state of {key!r}")
    if target.producer_ids.position() < source.producer_ids_reserved():
        raise MigrationRefused("the target would hand out producer ids the data directory handed out")
    return out


def _diff(mine: PartitionDigest, theirs: PartitionDigest) -> str:
    parts = [f"{name} {getattr(theirs, name)} (here {getattr(mine, name)})" for name in PartitionDigest.__slots__
             if getattr(mine, name) != getattr(theirs, name)]
    return ", ".join(parts)
