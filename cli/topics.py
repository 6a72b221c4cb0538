"""`logway topics create|list|describe|delete|alter|config|add-partitions|delete-records`: topic admin on a running
gateway, over the native protocol. Tables have a header line; `--json` prints JSON lines (`output.py`). Errors are one
line on stderr: exit 1 for what the gateway refused or an unreachable gateway, 2 for arguments that are not what the
command takes (`connect.py`)."""

from __future__ import annotations

import argparse

from logway.clients.errors import NativeError
from logway.clients.native import NativeClient

from . import connect
from .connect import Usage as _Usage
from .output import Output, fail


def topics(args: argparse.Namespace) -> int:
    return connect.run(args, _check, _run)


def _check(args: argparse.Namespace):
    """What the action needs from its arguments, checked before connecting."""
    if args.action == "create" and args.partitions < 1:
        raise _Usage(f"--partitions must be at least 1, got {args.partitions}")
    if args.action == "alter":
        settings = {}
        for item in args.config:
            key, sep, value = item.partition("=")
            if not sep or not key.strip():
                raise _Usage(f"--config expects KEY=VALUE, got {item!r}")
            settings[key.strip()] = value.strip()
        if not settings and not args.delete_config:
            raise _Usage("topics alter needs --config KEY=VALUE or --delete-config KEY")
        return settings
    if args.action == "delete-records":
        if args.partition is not None and args.partition < 0:
            raise _Usage(f"--partition must be 0 or more, got {args.partition}")
        text = args.offset.strip()
        if text == "end":
            return -1
        if not text.isdigit():
            raise _Usage(f"--offset expects an offset (0 or more) or `end`, got {args.offset!r}")
        return int(text)
    if args.action == "add-partitions" and args.count < 1:
        raise _Usage(f"--count must be at least 1, got {args.count}")
    return None


def _run(client: NativeClient, args: argparse.Namespace, request, out: Output) -> int:
    name = getattr(args, "name", None)
    if args.action == "create":
        client.create_topic(name, args.partitions)
        out.result(f"created topic {name} with {args.partitions} partition(s)", topic=name,
                   partitions=args.partitions, created=True)
    elif args.action == "list":
        out.table(("name", "partitions"), ((t.name, t.partitions) for t in client.list_topics()))
    elif args.action == "describe":
        d = client.describe_topic(name, details=True)
        out.table(("partition", "log_start_offset", "log_end_offset", "size_bytes", "segments", "format"),
                  ((p.partition, p.log_start_offset, p.log_end_offset, p.size_bytes, p.segments, d.format)
                   for p in d.partitions))
    elif args.action == "delete":
        client.delete_topic(name)
        out.result(f"deleted topic {name}", topic=name, deleted=True)
    elif args.action == "alter":
        client.alter_topic_config(name, request, args.delete_config, validate_only=args.validate_only)
        if args.validate_only:
            out.result(f"the change to topic {name} is valid (nothing altered)", topic=name, altered=False)
        else:
            overrides = {c.name: c.value for c in client.describe_topic_config(name) if c.source == "topic"}
            out.result(f"altered topic {name}; its overrides: "
                       + (", ".join(f"{k}={v}" for k, v in overrides.items()) or "none"),
                       topic=name, altered=True, overrides=overrides)
    elif args.action == "config":
        out.header(("name", "value", "source", "default"))
        for c in client.describe_topic_config(name):
            if out.json_lines:
                out.row(c.name, c.value, c.source, c.default, read_only=c.read_only)
            else:
                out.row(c.name, c.value, c.source + (" (read-only)" if c.read_only else ""), c.default)
    elif args.action == "add-partitions":
        count = client.create_partitions(name, args.count, validate_only=args.validate_only)
        if args.validate_only:
            out.result(f"topic {name} can grow to {args.count} partition(s) (nothing altered)", topic=name,
                       partitions=args.count, altered=False)
        else:
            out.result(f"topic {name} has {count} partition(s)", topic=name, partitions=count, altered=True)
    elif args.action == "delete-records":
        return _delete_records(client, name, args, request, out)
    return 0


def _delete_records(client: NativeClient, name: str, args: argparse.Namespace, offset: int, out: Output) -> int:
    """One partition, or each in turn (a partition that refuses is reported and the others still go)."""
    if args.all_partitions:
        partitions = [p.partition for p in client.describe_topic(name).partitions]
    else:
        partitions = [args.partition]
    failed = 0
    for partition in partitions:
        try:
            start = client.delete_records(name, partition, offset)
        except NativeError as exc:
            if not args.all_partitions:
                raise
            fail(f"partition {partition}: {exc.message}")
            failed += 1
            continue
        out.result(f"topic {name} partition {partition}: log start offset {start}", topic=name, partition=partition,
                   log_start_offset=start)
    return 1 if failed else 0
