"""The `logway` command's parser and dispatch: `serve`, `topics create|list|describe|delete|alter|config|add-partitions|
delete-records`, `groups list|describe|reset-offsets`, and `bench <name>`.

Bad arguments are one line on stderr (exit 2), never a usage block or a traceback. `--gateway` is taken before the
action or after it (`logway topics --gateway H:P list`, `logway topics list --gateway H:P`)."""

from __future__ import annotations

import argparse
import sys

DEFAULT_GATEWAY = ("127.0.0.1", 9898)


class _Parser(argparse.ArgumentParser):
    """argparse, with its errors on one line: `logway topics create: <message> (see logway topics create --help)`."""

    def error(self, message: str):
        self.exit(2, f"{self.prog}: {message} (see {self.prog} --help)\n")


def _host_port(text: str) -> tuple[str, int]:
    host, sep, port = text.rpartition(":")
    if not sep or not port.isdigit() or not 0 < int(port) < 65536:
        raise argparse.ArgumentTypeError(f"expected HOST:PORT (a port 1..65535), got {text!r}")
    return host.strip("[]") or "127.0.0.1", int(port)


def _gateway_option(parser: argparse.ArgumentParser, default) -> None:
    """`--gateway`; on an action's parser with no default, so one given before the action is kept."""
    parser.add_argument("--gateway", type=_host_port, default=default, metavar="HOST:PORT",
                        help="native listener of the gateway (default 127.0.0.1:9898)")


def _action_parser(subparsers, name: str, **kwargs) -> argparse.ArgumentParser:
    action = subparsers.add_parser(name, **kwargs)
    _gateway_option(action, argparse.SUPPRESS)
    return action


def build_parser(*, bench: bool = True) -> argparse.ArgumentParser:
    """The whole parser; with `bench` false the benchmarks' subcommands are left out (importing every benchmark
    module costs ~1 s, which `logway topics …` and `logway groups …` need not pay)."""
    parser = _Parser(prog="logway", description="multi-protocol log gateway")
    sub = parser.add_subparsers(dest="command", required=True)

    serve = sub.add_parser("serve", help="run the gateway (embedded defaults unless --config is given)")
    serve.add_argument("--config", help="YAML file overriding the embedded defaults")
    serve.add_argument("--data-dir", help="shorthand for --set data_dir=DIR")
    serve.add_argument("--set", action="append", default=[], metavar="KEY=VALUE",
                       help="override one config key, e.g. --set storage.flush=always (repeatable)")
    serve.add_argument("--ready-file", help="write the bound addresses as JSON to this file once listening")
    serve.add_argument("--print-config", action="store_true", help="print the effective config and exit")

    topics = sub.add_parser("topics", help="manage topics on a running gateway (native protocol)")
    _gateway_option(topics, DEFAULT_GATEWAY)
    tsub = topics.add_subparsers(dest="action", required=True)
    create = _action_parser(tsub, "create", help="create a topic")
    create.add_argument("name")
    create.add_argument("--partitions", type=int, default=1, help="partition count (default 1)")
    _action_parser(tsub, "list", help="list topics: name and partition count")
    describe = _action_parser(tsub, "describe",
                              help="show a topic's partitions: offsets, size on disk, segments, storage format")
    describe.add_argument("name")
    delete = _action_parser(tsub, "delete", help="delete a topic and its committed offsets")
    delete.add_argument("name")
    alter = _action_parser(tsub, "alter", help="set or remove a topic's config overrides (Kafka names), applied live")
    alter.add_argument("name")
    alter.add_argument("--config", action="append", default=[], metavar="KEY=VALUE",
                       help="set an override, e.g. --config retention.ms=3600000 (repeatable)")
    alter.add_argument("--delete-config", action="append", default=[], metavar="KEY",
                       help="remove an override: the gateway's default applies again (repeatable)")
    alter.add_argument("--validate-only", action="store_true", help="check the change, make none")
    config = _action_parser(tsub, "config", help="show a topic's config: value, source, default")
    config.add_argument("name")
    add = _action_parser(tsub, "add-partitions", help="grow a topic to COUNT partitions in all")
    add.add_argument("name")
    add.add_argument("--count", "--partitions", dest="count", type=int, required=True,
                     help="the topic's partition count afterwards (more than it has)")
    add.add_argument("--validate-only", action="store_true", help="check the change, make none")
    records = _action_parser(tsub, "delete-records", help="delete the records below an offset (the log start moves)")
    records.add_argument("name")
    where = records.add_mutually_exclusive_group(required=True)
    where.add_argument("--partition", type=int, help="the partition")
    where.add_argument("--all-partitions", action="store_true", help="every partition of the topic")
    records.add_argument("--offset", required=True, metavar="OFFSET|end",
                         help="delete every record below this offset; `end`: every record")

    groups = sub.add_parser("groups", help="consumer groups on a running gateway: offsets, lag, resets "
                                           "(kafka-consumer-groups conventions; native protocol)")
    _gateway_option(groups, DEFAULT_GATEWAY)
    gsub = groups.add_subparsers(dest="action", required=True)
    _action_parser(gsub, "list", help="list groups: name, state, members (groups with committed offsets and live "
                                      "Kafka groups)")
    gdescribe = _action_parser(gsub, "describe", help="per partition: committed offset, log end offset, lag, and "
                                                      "the live Kafka member that owns it")
    gdescribe.add_argument("group")
    reset = _action_parser(gsub, "reset-offsets", help="move a group's committed offsets (the group must be "
                                                       "inactive); a dry run unless --execute")
    reset.add_argument("group")
    which = reset.add_mutually_exclusive_group()
    which.add_argument("--topic", action="append", metavar="TOPIC[:P,P…]",
                       help="a topic, or some of its partitions (repeatable)")
    which.add_argument("--all-topics", action="store_true", help="every partition the group has committed")
    to = reset.add_mutually_exclusive_group(required=True)
    to.add_argument("--to-earliest", action="store_true", help="the log start offset")
    to.add_argument("--to-latest", action="store_true", help="the log end (last stable offset)")
    to.add_argument("--to-offset", type=int, metavar="N", help="offset N (moved into the partition's range)")
    to.add_argument("--to-datetime", metavar="ISO",
                    help="the first record at or after this time, e.g. 2024-05-01T12:00:00 (local) or …+00:00")
    run = reset.add_mutually_exclusive_group()
    run.add_argument("--dry-run", action="store_true", help="show the new offsets, change nothing (the default)")
    run.add_argument("--execute", action="store_true", help="commit the new offsets")

    bench_parser = sub.add_parser("bench", help="benchmarks that print their figures")
    if bench:
        from logway.bench import registry

        registry.add_subcommands(bench_parser)
    return parser


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    args = build_parser(bench=argv[:1] == ["bench"]).parse_args(argv)
    if args.command == "serve":
        from .serve import serve

        return serve(args)
    if args.command == "topics":
        from .topics import topics

        return topics(args)
    if args.command == "groups":
        from .groups import groups

        return groups(args)
    from logway.bench import registry

    return registry.run(args)
