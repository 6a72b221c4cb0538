"""The postgres backend's tables, created and migrated by logway itself in one schema of the database.

Versioned: `meta.schema_version` says which of `MIGRATIONS` the schema has had; opening applies the missing ones
in order, each in the same transaction as its new version number, under an advisory lock (two gateways starting at
once do not migrate twice), and refuses a schema newer than this logway (`SchemaTooNew`): an older logway never
writes tables it does not know.

    meta        key → value: schema_version, next_producer_id (the next block of producer ids), cluster_id
    topics      one row per topic: its id (Kafka's topic id), name, partition count, config overrides (JSON, by
                their Kafka-style names), creation time
    partitions  one row per partition: its id (what the rows below refer to), topic, number, log start offset
                (moved by retention and DeleteRecords: records below it are gone); deleted with its topic
    dropped_partitions  the ids of deleted topics' partitions whose rows of `batches` and `txns` are still to be
                deleted: a topic's deletion is a few rows (its log may be large), the engine's retention runs
                delete the rest
    batches     the log: one row per committed run of whole batches of one partition, as the producing client sent
                them (`data`, verbatim: a Kafka fetch of a `kafka` topic returns these bytes), keyed by the offset
                after its last batch; `base_offset` its first offset, `pos` where its bytes start in the partition's
                byte stream (every byte the partition ever stored counted once), `size` its bytes, `max_ts` its
                largest record timestamp (-1: none), `time_ms` what retention ages it by (max_ts, or when it was
                written when it has none). Stored uncompressed (STORAGE EXTERNAL): batches carry their own
                compression, pglz would spend CPU for nothing
    txns        the transactions of each partition that readers must know of: open ones (end_offset NULL) and
                aborted ones (end_offset: their end), with the offset ranges they wrote (first, last, first, last…);
                a committed transaction's row is deleted by the commit that ends it
    offsets     committed consumer offsets: (group, topic, partition) → offset, metadata, commit time
    states      the transaction coordinator's, share groups' and security's (ACLs, SCRAM credentials, quotas) durable
                state: (store, key) → state, both opaque bytes (keys hold NUL; states are JSON their owners write)
    writers     one row per gateway start: who (host, pid), when it started and stopped (NULL: running, or killed),
                and its last commit id — written in the same transaction as each group commit, and read back after
                a lost connection to learn whether that commit happened
    members     (version 2) the gateways of a cluster over the database (`storage.postgres.cluster`): member id
                (Kafka's node id), writer id, what it listens on, its lease (see logway.storage.pg.leases)
    slots       (version 2) `SLOTS` rows: each slot's holder (a writer id, or NULL) and epoch — the holder writes the
                slot's partitions; every commit checks it still holds them at its epoch

A gateway writes the database only while it holds the session-level advisory lock (`OWNER_LOCK`, the schema's):
exclusively when it is the only one, shared by every gateway of a cluster (each then writes only the partitions
of the slots it holds: logway.storage.pg.leases) — one writer per partition either way, so offsets are assigned in
memory and never contended.
"""

from __future__ import annotations

import zlib

import psycopg

from ..errors import SchemaTooNew
from .leases import SLOTS

__all__ = ["SCHEMA_VERSION", "MIGRATIONS", "prepare", "lock_keys", "writer_lock"]

#: The schema this logway writes; `MIGRATIONS[v]` takes a schema from version v - 1 to v.
SCHEMA_VERSION = 2

_V1 = """
CREATE TABLE meta (key text PRIMARY KEY, value text NOT NULL);
CREATE TABLE topics (
    topic_id uuid PRIMARY KEY,
    name text NOT NULL UNIQUE,
    partitions integer NOT NULL,
    config jsonb NOT NULL,
    created_ms bigint NOT NULL
);
CREATE TABLE partitions (
    partition_id bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    topic_id uuid NOT NULL REFERENCES topics ON DELETE CASCADE,
    partition integer NOT NULL,
    log_start bigint NOT NULL DEFAULT 0,
    UNIQUE (topic_id, partition)
);
CREATE TABLE dropped_partitions (partition_id bigint PRIMARY KEY);
CREATE TABLE batches (
    partition_id bigint NOT NULL,
    end_offset bigint NOT NULL,
    base_offset bigint NOT NULL,
    pos bigint NOT NULL,
    size integer NOT NULL,
    max_ts bigint NOT NULL,
    time_ms bigint NOT NULL,
    data bytea NOT NULL,
    PRIMARY KEY (partition_id, end_offset)
);
ALTER TABLE batches ALTER COLUMN data SET STORAGE EXTERNAL;
CREATE TABLE txns (
    partition_id bigint NOT NULL,
    producer_id bigint NOT NULL,
    first_offset bigint NOT NULL,
    epoch integer NOT NULL,
    end_offset bigint,
    ranges bigint[] NOT NULL,
    PRIMARY KEY (partition_id, producer_id, first_offset)
);
CREATE TABLE offsets (
    group_id text NOT NULL,
    topic text NOT NULL,
    partition integer NOT NULL,
    committed_offset bigint NOT NULL,
    metadata text NOT NULL,
    commit_time_ms bigint NOT NULL,
    PRIMARY KEY (group_id, topic, partition)
);
CREATE TABLE states (store text NOT NULL, key bytea NOT NULL, state bytea NOT NULL, PRIMARY KEY (store, key));
CREATE TABLE writers (
    writer_id uuid PRIMARY KEY,
    host text NOT NULL,
    pid integer NOT NULL,
    started_ms bigint NOT NULL,
    stopped_ms bigint,
    last_commit bigint NOT NULL DEFAULT 0
);
INSERT INTO meta (key, value) VALUES ('next_producer_id', '0'), ('cluster_id', gen_random_uuid()::text);
"""

_V2 = """
CREATE TABLE members (
    member_id integer PRIMARY KEY,
    writer_id uuid NOT NULL UNIQUE,
    host text NOT NULL,
    pid integer NOT NULL,
    addresses jsonb NOT NULL,
    started_ms bigint NOT NULL,
    lease_until timestamptz NOT NULL
);
CREATE TABLE slots (slot integer PRIMARY KEY, holder uuid, epoch bigint NOT NULL DEFAULT 0);
INSERT INTO slots (slot) SELECT generate_series(0, %d);
""" % (SLOTS - 1)

MIGRATIONS: dict[int, str] = {1: _V1, 2: _V2}

#: The advisory locks' first key ("log"): the second is the schema's (`lock_keys`).
_LOCK_CLASS = 0x6C6F67


def lock_keys(schema: str) -> tuple[tuple[int, int], tuple[int, int]]:
    """The advisory locks of a schema, as (class, key) pairs: the one taken around migrations, and `OWNER_LOCK`,
    held by the gateway that writes (see the module docstring)."""
    key = zlib.crc32(schema.encode()) - (1 << 31)  # an int4
    return (_LOCK_CLASS, key), (_LOCK_CLASS + 1, key)


def writer_lock(schema: str, writer_id) -> tuple[int, int]:
    """The advisory lock a cluster member's writer session holds (what `OWNER_LOCK` is to a gateway alone): ended
    sessions are waited for through it."""
    return _LOCK_CLASS + 2, zlib.crc32(f"{schema}/{writer_id}".encode()) - (1 << 31)


def prepare(conn: psycopg.Connection, schema: str) -> tuple[int, int]:
    """Create the schema or bring it to `SCHEMA_VERSION`; (version found, version now). SchemaTooNew for a schema
    a newer logway wrote. `schema` is a plain lower-case name (the configuration checks it)."""
    migrate_lock, _ = lock_keys(schema)
    with conn.transaction():
        conn.execute("SELECT pg_advisory_xact_lock(%s, %s)", migrate_lock)
        conn.execute(f"CREATE SCHEMA IF NOT EXISTS {schema}")
        found = conn.execute("SELECT to_regclass(%s)", (f"{schema}.meta",)).fetchone()[0]
        version = 0
        if found is not None:
            row = conn.execute(f"SELECT value FROM {schema}.meta WHERE key = 'schema_version'").fetchone()
            version = int(row[0]) if row is not None else 0
        if version > SCHEMA_VERSION:
            raise SchemaTooNew(f"schema {schema} of the database holds logway's tables of version {version}, newer "
                               f"than this logway's ({SCHEMA_VERSION}): run the newer logway, or give this one "
                               f"another schema (storage.postgres.schema)")
        for step in range(version + 1, SCHEMA_VERSION + 1):
            conn.execute(f"SET LOCAL search_path TO {schema}")
            conn.execute(MIGRATIONS[step])
            conn.execute("INSERT INTO meta (key, value) VALUES ('schema_version', %s) ON CONFLICT (key) DO UPDATE "
                         "SET value = excluded.value", (str(step),))
    return version, SCHEMA_VERSION
