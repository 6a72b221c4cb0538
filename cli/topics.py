"""`logway topics create|list|describe|delete|alter|config|add-partitions|delete-records`: topic admin on a running
gateway, over the native protocol. Errors are one line on stderr: exit 1 for what the gateway refused or an
unreachable gateway, 2 for arguments that are not what the command takes (`connect.py`)."""

from __future__ import annotations

import argparse
import sys

from logway.clients.errors import NativeError
from logway.clients.native import NativeClient

from . import connect
from .connect import Usage as _Usage


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


def _run(client: NativeClient, args: argparse.Namespace, request) -> int:
    name = getattr(args, "name", None)
    if args.action == "create":
        client.create_topic(name, args.partitions)
        print(f"created topic {name} with {args.partitions} partition(s)")
    elif args.action == "list":
        for t in client.list_topics():
            print(f"{t.name}\t{t.partitions}")
    elif args.action == "describe":
        d = client.describe_topic(name, details=True)
        print("partition\tlog_start_offset\tlog_end_offset\tsize_bytes\tsegments\tformat")
        for p in d.partitions:
            print(f"{p.partition}\t{p.log_start_offset}\t{p.log_end_offset}\t{_dash(p.size_bytes)}\t"
                  f"{_dash(p.segments)}\t{_dash(d.format)}")
    elif args.action == "delete":
        client.delete_topic(name)
        print(f"deleted topic {name}")
    elif args.action == "alter":
        client.alter_topic_config(name, request, args.delete_config, validate_only=args.validate_only)
        if args.validate_only:
            print(f"the change to topic {name} is valid (nothing altered)")
        else:
            overrides = [c for c in client.describe_topic_config(name) if c.source == "topic"]
            print(f"altered topic {name}; its overrides: "
                  + (", ".join(f"{c.name}={c.value}" for c in overrides) or "none"))
    elif args.action == "config":
        print("name\tvalue\tsource\tdefault")
        for c in client.describe_topic_config(name):
            print(f"{c.name}\t{c.value}\t{c.source}{' (read-only)' if c.read_only else ''}\t{c.default}")
    elif args.action == "add-partitions":
        count = client.create_partitions(name, args.count, validate_only=args.validate_only)
        if args.validate_only:
            print(f"topic {name} can grow to {args.count} partition(s) (nothing altered)")
        else:
            print(f"topic {name} has {count} partition(s)")
    elif args.action == "delete-records":
        return _delete_records(client, name, args, request)
    return 0


def _dash(value) -> str:
    return "-" if value is None else str(value)


def _delete_records(client: NativeClient, name: str, args: argparse.Namespace, offset: int) -> int:
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
            print(f"logway: partition {partition}: {exc.message}", file=sys.stderr)
            failed += 1
            continue
        print(f"topic {name} partition {partition}: log start offset {start}")
    return 1 if failed else 0
