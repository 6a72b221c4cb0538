"""The `logway` command's parser and dispatch: `serve`, `topics create|list|describe|delete`, and `bench <name>`."""

from __future__ import annotations

import argparse


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
    from logway.bench import registry

    registry.add_subcommands(bench)
    return parser


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    if args.command == "serve":
        from .serve import serve

        return serve(args)
    if args.command == "topics":
        from .topics import topics

        return topics(args)
    from logway.bench import registry

    return registry.run(args)
