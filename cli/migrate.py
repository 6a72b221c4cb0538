"""`logway migrate`: move a stopped gateway's data directory into a PostgreSQL database (`storage.backend:
postgres`), then verify the copy — the copying itself is `logway.storage.pg.migrate`'s; this module opens both
sides from the configuration, runs it and prints the summary, a row per topic:

    topic   topic_id                partitions  format  records  bytes     status
    orders  x8Jv1…(uuid)            3           kafka   120000   10485760  copied

The source is `data_dir` (`--data-dir`), the target `storage.postgres.*` of the same configuration (`--to DSN` =
`--set storage.postgres.dsn=DSN`, `--schema` = `--set storage.postgres.schema=…`; the keys set win over the DSN,
as for the gateway), so `logway migrate --config new.yaml --data-dir ./data` takes the configuration the gateway
will run with. Exit status 0 once everything is copied and verified; 1 when it is refused or fails — the data
directory in use by a running gateway (stop it first), a database that cannot be opened, a target that holds
topics of its own (without `--into-existing`), a compacted topic, a copy that differs — each one line on stderr,
`logway: …`; 2 for a configuration error or a data directory that holds no logway data; 130 after Ctrl-C (what
was committed stays: run it again to finish; until a run finished, no gateway opens the database).
"""

from __future__ import annotations

import argparse
import logging
import os

from .output import Output, fail

__all__ = ["migrate"]

_COLUMNS = ("topic", "topic_id", "partitions", "format", "records", "bytes", "status")


def migrate(args: argparse.Namespace) -> int:
    from logway.gateway import ConfigError, load_config

    overrides = list(args.set)
    if args.data_dir is not None:
        overrides.append(f"data_dir={args.data_dir}")
    if args.to is not None:
        overrides.append(f"storage.postgres.dsn={args.to}")
    if args.schema is not None:
        overrides.append(f"storage.postgres.schema={args.schema}")
    try:
        config = load_config(args.config, overrides=overrides)
    except ConfigError as exc:
        return fail(f"configuration error: {exc}", 2)
    data_dir = os.path.abspath(config.data_dir)
    if not os.path.isdir(os.path.join(data_dir, "topics")):
        return fail(f"data_dir {config.data_dir} holds no logway data (no topics/ in it): nothing to migrate", 2)
    logging.basicConfig(level=logging.WARNING, format="logway: %(message)s")
    try:
        return _run(args, config, data_dir)
    except KeyboardInterrupt:
        return fail("interrupted: what was copied is committed; run logway migrate again to finish (no gateway "
                    "opens the database until a run has finished)", 130)


def _run(args: argparse.Namespace, config, data_dir: str) -> int:
    from logway.gateway.formats import STORAGE_FORMATS
    from logway.gateway.server import open_database
    from logway.storage import DatabaseError, DataDirLocked, LogEngine, MigrationRefused, StorageError
    from logway.storage.pg import migrate as copying

    try:
        source = LogEngine(data_dir, STORAGE_FORMATS, config.storage.topic_defaults)
    except DataDirLocked as exc:
        return fail(f"{exc}: stop that gateway first (logway migrate copies a stopped gateway's data directory)")
    except (StorageError, OSError) as exc:
        return fail(f"cannot open the data directory {data_dir}: {exc}")
    engine = None
    try:
        engine = open_database(config, migrating=True)
        refused = copying.refusal(source, engine, into_existing=args.into_existing)
        if refused is not None:
            return fail(f"{refused} (database {engine.where})")
        engine.begin_migration(data_dir)
        done = copying.copy(source, engine)
        engine.close()
        engine = open_database(config, migrating=True, cache_bytes=0)  # (what verify reads: from the database)
        copied = copying.verify(source, engine, done)
        engine.end_migration()
    except MigrationRefused as exc:  # (from the copy or its verification: the database stays marked)
        return fail(f"{exc} (database {engine.where}): no gateway opens it until a run of logway migrate finishes")
    except DatabaseError as exc:  # (its message says what to do)
        return fail(str(exc))
    except StorageError as exc:  # e.g. the database was lost for longer than commit_retry_ms
        return fail(f"{exc}: what was copied is committed; run logway migrate again to go on")
    finally:
        if engine is not None:
            engine.close()
        source.close()
    out = Output(args.json)
    out.header(_COLUMNS)
    for topic in copied:
        out.row(topic.name, topic.topic_id, len(topic.partitions), topic.format, topic.records, topic.size,
                topic.status, log_start_offsets=[p.log_start for p in topic.partitions],
                log_end_offsets=[p.log_end for p in topic.partitions])
    out.result(f"copied and verified {len(copied)} topic(s) into database {engine.where}; start the gateway with "
               f"storage.backend: postgres", topics=len(copied), database=engine.where, verified=True)
    return 0
