"""`logway topics create|list|describe|delete`: topic admin on a running gateway, over the native protocol."""

from __future__ import annotations

import argparse
import sys

from logway.clients.errors import NativeError
from logway.clients.native import NativeClient


def topics(args: argparse.Namespace) -> int:
    host, port = args.gateway
    try:
        with NativeClient(host, port, timeout=30, connect_timeout=30) as client:
            if args.action == "create":
                client.create_topic(args.name, args.partitions)
                print(f"created topic {args.name} with {args.partitions} partition(s)")
            elif args.action == "list":
                for t in client.list_topics():
                    print(f"{t.name}\t{t.partitions}")
            elif args.action == "describe":
                d = client.describe_topic(args.name)
                print("partition\tlog_start_offset\tlog_end_offset")
                for p in d.partitions:
                    print(f"{p.partition}\t{p.log_start_offset}\t{p.log_end_offset}")
            elif args.action == "delete":
                client.delete_topic(args.name)
                print(f"deleted topic {args.name}")
    except NativeError as exc:
        print(f"logway: {exc.message}", file=sys.stderr)
        return 1
    except OSError as exc:
        print(f"logway: cannot reach the gateway at {host}:{port}: {exc}", file=sys.stderr)
        return 1
    return 0
