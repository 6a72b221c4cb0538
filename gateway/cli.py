"""The `logway` command: `serve`, `topics create|list|describe|delete`, and the `bench` family."""

from __future__ import annotations

import argparse
import gc
import json
import logging
import os
import sys

from .config import ConfigError, load_config


def _host_port(text: str) -> tuple[str, int]:
    host, sep, port = text.rpartition(":")
    if not sep or not port.isdigit():
        raise argparse.ArgumentTypeError(f"expected HOST:PORT, got {text!r}")
    return host or "127.0.0.1", int(port)


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="logway", description="multi-protocol log gateway")
    sub = parser.add_subparsers(dest="command", required=True)

    serve = sub.add_parser("serve", help="run the gateway (embedded defaults unless --config is given)")
    serve.add_argument("--config", help="YAML file overriding the embedded defaults")
    serve.add_argument("--data-dir", help="shorthand for --set data_dir=DIR")
    serve.add_argument("--set", action="append", default=[], metavar="KEY=VALUE",
                       help="override one config key, e.g. --set storage.flush=always (repeatable)")
    serve.add_argument("--ready-file", help="write the bound addresses as JSON to this file once listening")
    serve.add_argument("--print-config", action="store_true", help="print the effective config and exit")

    topics = sub.add_parser("topics", help="manage topics on a running gateway (native protocol)")
    topics.add_argument("--gateway", type=_host_port, default=("127.0.0.1", 9898), metavar="HOST:PORT",
                        help="native listener of the gateway (default 127.0.0.1:9898)")
    tsub = topics.add_subparsers(dest="action", required=True)
    create = tsub.add_parser("create", help="create a topic")
    create.add_argument("name")
    create.add_argument("--partitions", type=int, default=1)
    tsub.add_parser("list", help="list topics")
    describe = tsub.add_parser("describe", help="show a topic's partitions and offsets")
    describe.add_argument("name")
    delete = tsub.add_parser("delete", help="delete a topic and its committed offsets")
    delete.add_argument("name")

    bench = sub.add_parser("bench", help="benchmarks that print their figures")
    from .bench import add_bench_arguments

    add_bench_arguments(bench)
    return parser


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    if args.command == "serve":
        return _serve(args)
    if args.command == "topics":
        return _topics(args)
    from .bench import run_bench

    return run_bench(args)


def _serve(args) -> int:
    overrides = list(args.set)
    if args.data_dir:
        overrides.append(f"data_dir={args.data_dir}")
    try:
        config = load_config(args.config, overrides=overrides)
    except ConfigError as exc:
        print(f"logway: configuration error: {exc}", file=sys.stderr)
        return 2
    if args.print_config:
        import yaml

        print(yaml.safe_dump(config.raw, sort_keys=False), end="")
        return 0
    logging.basicConfig(level=config.log_level, format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    import trio

    from logway.storage import StorageError

    from .server import Gateway

    try:
        gateway = Gateway(config)
    except ConfigError as exc:  # e.g. a TLS certificate that cannot be loaded
        print(f"logway: configuration error: {exc}", file=sys.stderr)
        return 2

    async def run() -> None:
        async with trio.open_nursery() as nursery:
            addresses = await nursery.start(lambda task_status: gateway.run(handle_signals=True,
                                                                             task_status=task_status))
            # Storage, config and imports live as long as the process: keep them out of the cyclic collector's
            # scans, and collect young objects less often. Under full load the default thresholds cost ~17 % of
            # the CPU and 50-110 ms pauses (probe p99 28 ms instead of 53 ms at 1,000 connections, BENCHMARKS.md).
            gc.freeze()
            gc.set_threshold(10_000, 10, 10)
            if args.ready_file:
                tmp = args.ready_file + ".tmp"
                with open(tmp, "w") as f:
                    json.dump({name: list(addr) for name, addr in addresses.items()} | {"pid": os.getpid()}, f)
                os.replace(tmp, args.ready_file)

    try:
        trio.run(run)
    except KeyboardInterrupt:
        return 130
    except (StorageError, BaseExceptionGroup) as exc:  # from inside the nurseries it comes in a group
        cause = _storage_error(exc)
        if cause is None:
            raise
        logging.getLogger("logway").error("%s", cause)
        return 1
    return 0


def _storage_error(exc: BaseException):
    """The StorageError `exc` is or (as the only kind of error) holds, or None."""
    from logway.storage import StorageError

    if isinstance(exc, StorageError):
        return exc
    if isinstance(exc, BaseExceptionGroup):
        found = [_storage_error(e) for e in exc.exceptions]
        if found and all(found):
            return found[0]
    return None


def _topics(args) -> int:
    from .client import NativeClient, NativeError

    host, port = args.gateway
    try:
        with NativeClient(host, port, timeout=30) as client:
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


if __name__ == "__main__":
    sys.exit(main())
