"""The `logway` command's parser and dispatch: `serve`, `config`, `migrate`, `produce`, `consume`, `topics
create|list|describe|delete|alter|config|add-partitions|delete-records`, `groups list|describe|reset-offsets`,
`acls list|add|remove`, `users list|set|delete`, `quotas list|set|delete`, and `bench <name>`.

Bad arguments are one line on stderr (exit 2), never a usage block or a traceback. `--gateway`, `--json` and the
login options (`--user`, `--mechanism`) are taken before the action or after it (`logway topics --gateway H:P list`,
`logway topics list --gateway H:P`)."""

from __future__ import annotations

import argparse
import os
import sys

DEFAULT_GATEWAY = ("127.0.0.1", 9898)
#: The listener each protocol's clients connect to by default (`produce` / `consume --protocol`).
DEFAULT_PORTS = {"native": 9898, "kafka": 9092, "tank": 11011}


class _Parser(argparse.ArgumentParser):
    """argparse, with its errors on one line: `logway topics create: <message> (see logway topics create --help)`."""

    def error(self, message: str):
        self.exit(2, f"{self.prog}: {message} (see {self.prog} --help)\n")


def _host_port(text: str) -> tuple[str, int]:
    host, sep, port = text.rpartition(":")
    if not sep or not port.isdigit() or not 0 < int(port) < 65536:
        raise argparse.ArgumentTypeError(f"expected HOST:PORT (a port 1..65535), got {text!r}")
    return host.strip("[]") or "127.0.0.1", int(port)


def _non_empty(what: str):
    """An argument that must name something: `--data-dir ""` is refused, never taken as the default."""
    def parse(text: str) -> str:
        if not text.strip():
            raise argparse.ArgumentTypeError(f"expected {what}, got an empty value")
        return text
    return parse


def _gateway_option(parser: argparse.ArgumentParser, default, help: str = "native listener of the gateway "
                                                                          "(default 127.0.0.1:9898)") -> None:
    """`--gateway`, `--json` and the login options; on an action's parser with no default, so one given before the
    action is kept."""
    parser.add_argument("--gateway", type=_host_port, default=default, metavar="HOST:PORT", help=help)
    parser.add_argument("--json", action="store_true", default=default if default is argparse.SUPPRESS else False,
                        help="print JSON lines (one object per row or result) instead of text")
    _login_options(parser, argparse.SUPPRESS if default is argparse.SUPPRESS else None)


MECHANISMS = ("SCRAM-SHA-256", "SCRAM-SHA-512", "PLAIN")


def _login_options(parser: argparse.ArgumentParser, default=None) -> None:
    """`--user`, `--mechanism` and `--tls-ca` (the password comes from LOGWAY_PASSWORD or the terminal, the access
    token from LOGWAY_TOKEN: never from arguments, which every user of the machine can see)."""
    parser.add_argument("--user", default=default, metavar="USER",
                        help="log in as USER (password: $LOGWAY_PASSWORD, else asked); without it, $LOGWAY_TOKEN is "
                             "the gateway's access token when set")
    parser.add_argument("--mechanism", choices=MECHANISMS, default=default,
                        help="how --user logs in: SCRAM-SHA-256 (the default) or -512 keep the password on this "
                             "machine; PLAIN sends it")
    parser.add_argument("--tls-ca", default=default, metavar="FILE",
                        help="connect over TLS, trusting the certificates in FILE (a listener with tls: true)")


def _action_parser(subparsers, name: str, **kwargs) -> argparse.ArgumentParser:
    action = subparsers.add_parser(name, **kwargs)
    _gateway_option(action, argparse.SUPPRESS)
    return action


def _config_options(parser: argparse.ArgumentParser) -> None:
    """The options that choose the configuration (`serve` and `config`)."""
    parser.add_argument("--config", type=_non_empty("a YAML file"), metavar="FILE",
                        help="YAML file of settings over the embedded defaults (none by default)")
    parser.add_argument("--data-dir", type=_non_empty("a directory"), metavar="DIR",
                        help="where topics and committed offsets live (default ./data; = --set data_dir=DIR)")
    parser.add_argument("--set", action="append", default=[], metavar="KEY=VALUE",
                        help="override one setting, e.g. --set storage.flush=always (repeatable; the keys: "
                             "logway config, docs/configuration.md)")


def _serve_epilog() -> str:
    """`serve --help`'s defaults, read from the configuration schema (so they cannot drift)."""
    from logway.gateway.config import Config

    cfg = Config()
    listeners = "\n".join(f"  {name:<7} {lc.host}:{lc.port}{'' if lc.enabled else ' (disabled)'}"
                          for name, lc in cfg.listeners.items())
    return (f"defaults (the embedded configuration; `logway config` shows the effective one and where each value "
            f"comes from):\n  data_dir {cfg.data_dir}  (created if missing)\n  storage.flush {cfg.storage.flush.value}"
            f"\nlisteners (set listeners.NAME.port / .host / .enabled):\n{listeners}\n"
            "settings are layered: embedded defaults < --config FILE < LOGWAY_SECTION__KEY environment variables < "
            "--set / --data-dir.\nSIGINT/SIGTERM stop it gracefully.")


def build_parser(*, bench: bool = True) -> argparse.ArgumentParser:
    """The whole parser; with `bench` false the benchmarks' subcommands are left out (importing every benchmark
    module costs ~1 s, which the other commands need not pay)."""
    parser = _Parser(prog="logway", description="logway: one log, three wire protocols (Kafka, TANK, native JSON)")
    sub = parser.add_subparsers(dest="command", required=True)

    serve = sub.add_parser("serve", help="run the gateway (embedded defaults unless --config is given)",
                           description="Run the gateway in the foreground until SIGINT/SIGTERM: the native, Kafka, "
                                       "TANK and admin (HTTP) listeners over one log in the data directory.",
                           epilog=_serve_epilog(), formatter_class=argparse.RawDescriptionHelpFormatter)
    _config_options(serve)
    serve.add_argument("--ready-file", type=_non_empty("a file"), metavar="FILE",
                       help="write the bound addresses (and the pid) as JSON to this file once listening")
    serve.add_argument("--print-config", action="store_true",
                       help="print the effective configuration as YAML and exit")

    config = sub.add_parser("config", help="print the effective configuration: each key, its value and where the "
                                           "value comes from (default, file, environment, flag)")
    _config_options(config)
    config.add_argument("--json", action="store_true", help="print JSON lines (one object per key)")
    config.add_argument("--changed", action="store_true", help="only the keys that are not at their default")

    migrate = sub.add_parser("migrate", help="move a stopped gateway's data directory into a PostgreSQL database "
                                             "(storage.backend: postgres), then verify the copy",
                             description="Copy every topic of the data directory — its id, config overrides and "
                                         "partitions, each partition's stored batches verbatim at their offsets "
                                         "and its log start offset — the committed offsets, transaction and share "
                                         "group states, ACLs, SCRAM credentials and quotas, and the producer ids "
                                         "into a PostgreSQL database, then verify it and print a row per topic. The "
                                         "gateway must be stopped. Run again after an interruption: it goes on.")
    _config_options(migrate)
    migrate.add_argument("--to", type=_non_empty("a libpq connection string"), metavar="DSN",
                         help="the database, as a libpq connection string or URI (\"host=db1 dbname=logway\"; = "
                              "--set storage.postgres.dsn=DSN; the storage.postgres keys set win over it)")
    migrate.add_argument("--schema", type=_non_empty("a schema name"), metavar="NAME",
                         help="the schema of the database (default logway; = --set storage.postgres.schema=NAME)")
    migrate.add_argument("--into-existing", action="store_true",
                         help="copy into a schema that already holds other topics (never over them: a topic of "
                              "the same name, an offset or a state that differs is still refused)")
    migrate.add_argument("--json", action="store_true", help="print JSON lines (one object per topic)")

    _records_parsers(sub)

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
    tconfig = _action_parser(tsub, "config", help="show a topic's config: value, source, default")
    tconfig.add_argument("name")
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

    _security_parsers(sub)

    bench_parser = sub.add_parser("bench", help="benchmarks that print their figures")
    if bench:
        from logway.bench import registry

        registry.add_subcommands(bench_parser)
    return parser


def _acl_selection(parser: argparse.ArgumentParser, *, binding: bool) -> None:
    """The options naming ACLs: one binding to add (`binding`), or a filter over them."""
    resource = parser.add_mutually_exclusive_group(required=binding)
    resource.add_argument("--topic", metavar="NAME", help="a topic (or, with --prefixed, every topic whose name "
                                                         "starts with NAME; * = every topic)")
    resource.add_argument("--group", metavar="NAME", help="a consumer group (as --topic)")
    resource.add_argument("--transactional-id", metavar="ID", help="a transactional id (as --topic)")
    resource.add_argument("--cluster", action="store_true", help="the cluster (creating topics, ACLs, users, ...)")
    parser.add_argument("--principal", required=binding, metavar="TYPE:NAME",
                        help="who: User:alice, User:* (everyone)" + ("" if binding else "; default any"))
    parser.add_argument("--host", default="*" if binding else None,
                        help="from this IP address only" + (" (default * : any)" if binding else "; default any"))
    parser.add_argument("--operation", action="append", default=[], required=binding, metavar="OP",
                        help="Read, Write, Create, Delete, Alter, Describe, ClusterAction, DescribeConfigs, "
                             "AlterConfigs, IdempotentWrite or All (repeatable)")
    if binding:
        parser.add_argument("--prefixed", action="store_true", help="the name is a prefix (a PREFIXED pattern)")
        parser.add_argument("--deny", action="store_true", help="deny instead of allow (a Deny wins over an Allow)")
    else:
        parser.add_argument("--pattern", choices=("any", "match", "literal", "prefixed"), default="any",
                            help="literal or prefixed bindings only, or (match) those that apply to the name given "
                                 "(default any)")
        parser.add_argument("--permission", choices=("allow", "deny"), help="only Allow or Deny bindings")


#: The client quotas `quotas set` gives (Kafka's keys, enforced by the gateway) and what each measures.
QUOTA_KEYS = {"producer_byte_rate": "bytes of records produced a second",
              "consumer_byte_rate": "bytes of records fetched a second",
              "request_percentage": "the gateway's time its requests take, in % of one core"}


def _quota_entity(parser: argparse.ArgumentParser) -> None:
    """The options naming a quota entity (Kafka's: a user, a client id, both; or their defaults)."""
    user = parser.add_mutually_exclusive_group()
    user.add_argument("--for-user", metavar="NAME", help="the user NAME (its principal's name: alice for User:alice)")
    user.add_argument("--for-default-user", action="store_true", help="the default user: each user with no quota "
                                                                      "of its own")
    client = parser.add_mutually_exclusive_group()
    client.add_argument("--for-client-id", metavar="ID", help="the client id ID (what a Kafka client names itself)")
    client.add_argument("--for-default-client-id", action="store_true", help="the default client id")


def _security_parsers(sub) -> None:
    """`acls`, `users` and `quotas`."""
    acls = sub.add_parser("acls", help="who may do what: list, add and remove ACLs (Kafka's model; native protocol)")
    _gateway_option(acls, DEFAULT_GATEWAY)
    asub = acls.add_subparsers(dest="action", required=True)
    _acl_selection(_action_parser(asub, "list", help="list ACLs (all, or those matching the options)"),
                   binding=False)
    _acl_selection(_action_parser(asub, "add", help="allow (or --deny) a principal operations on a resource"),
                   binding=True)
    remove = _action_parser(asub, "remove", help="remove the ACLs matching the options (at least one)")
    _acl_selection(remove, binding=False)

    users = sub.add_parser("users", help="users' SCRAM credentials: list, set a password, delete (native protocol)")
    _gateway_option(users, DEFAULT_GATEWAY)
    usub = users.add_subparsers(dest="action", required=True)
    ulist = _action_parser(usub, "list", help="users with stored credentials: mechanisms and iterations")
    ulist.add_argument("names", nargs="*", metavar="USER", help="only these users")
    uset = _action_parser(usub, "set", help="give USER a password (a salted SCRAM credential: the password is "
                                            "salted here and never sent)")
    uset.add_argument("name", metavar="USER")
    uset.add_argument("--scram", choices=("SCRAM-SHA-256", "SCRAM-SHA-512"), action="append", dest="scram",
                      help="the mechanism(s) to make a credential for (default both)")
    uset.add_argument("--iterations", type=int, default=4096, help="PBKDF2 iterations, 4096..16384 (default 4096)")
    uset.add_argument("--password-stdin", action="store_true",
                      help="read the new password from stdin (else $LOGWAY_NEW_PASSWORD, else asked twice)")
    udelete = _action_parser(usub, "delete", help="delete USER's credentials (every mechanism, or --scram ones)")
    udelete.add_argument("name", metavar="USER")
    udelete.add_argument("--scram", choices=("SCRAM-SHA-256", "SCRAM-SHA-512"), action="append", dest="scram",
                         help="only this mechanism's credential (repeatable)")

    quotas = sub.add_parser("quotas", help="client quotas (Kafka's): list, set, delete byte rates and request time "
                                           "per user or client id (native protocol)")
    _gateway_option(quotas, DEFAULT_GATEWAY)
    qsub = quotas.add_subparsers(dest="action", required=True)
    qlist = _action_parser(qsub, "list", help="quotas: of every entity, or of those the options name")
    _quota_entity(qlist)
    qlist.add_argument("--strict", action="store_true", help="only entities of exactly the types named (without: "
                                                             "also those that add another type)")
    qset = _action_parser(qsub, "set", help="set quotas of an entity (other quotas of it stay)")
    _quota_entity(qset)
    for key, what in QUOTA_KEYS.items():
        qset.add_argument("--" + key.replace("_", "-"), dest=key, type=float, metavar="N", help=what)
    qdelete = _action_parser(qsub, "delete", help="delete quotas of an entity (all of them, or --quota ones)")
    _quota_entity(qdelete)
    qdelete.add_argument("--quota", action="append", default=[], choices=tuple(QUOTA_KEYS),
                         help="only this quota (repeatable)")


def _records_parsers(sub) -> None:
    """`produce` and `consume`."""
    where = ("the listener of --protocol (default 127.0.0.1:9898 native, :9092 kafka, :11011 tank)")
    produce = sub.add_parser(
        "produce", help="write records to a topic: the values given, or one per line of stdin",
        description="Write records to TOPIC: each VALUE given, or else each line read from stdin (as it comes: "
                    "lines typed at a terminal are sent one by one). Keyed records go to the partition Kafka's "
                    "default partitioner picks (murmur2 of the key), others to one partition chosen at random, "
                    "unless --partition says. Prints the partition and offset of each record.")
    produce.add_argument("topic")
    produce.add_argument("values", nargs="*", metavar="VALUE", help="a record's value (none: read stdin)")
    produce.add_argument("--key", help="the key of every record")
    produce.add_argument("--partition", type=int, help="write to this partition")
    produce.add_argument("--header", action="append", default=[], metavar="KEY=VALUE",
                         help="a header on every record (repeatable; --protocol kafka: the native and TANK "
                              "protocols carry no headers)")
    produce.add_argument("--timestamp", metavar="MS|ISO",
                         help="the records' time: ms since the epoch, or ISO 8601 (no zone: local time); default now")
    produce.add_argument("--input", choices=("text", "json"), default="text",
                         help="stdin lines: text (a value per line, the default) or JSON objects {\"value\", \"key\", "
                              "\"headers\", \"timestamp\", \"partition\"} (\"value_hex\"/\"key_hex\" for bytes)")
    produce.add_argument("--key-separator", metavar="SEP",
                         help="text lines are KEY SEP VALUE (e.g. --key-separator :)")
    produce.add_argument("--protocol", choices=tuple(DEFAULT_PORTS), default="native",
                         help="speak this protocol to the gateway (default native)")
    produce.add_argument("--gateway", type=_host_port, metavar="HOST:PORT", help=where)
    produce.add_argument("--json", action="store_true", help="print JSON lines instead of text")
    _login_options(produce)

    consume = sub.add_parser(
        "consume", help="print a topic's records, from the beginning (or an offset, a time, a group's position) "
                        "to the end, or on and on with --follow",
        description="Print TOPIC's records: partition, offset, time (UTC), key, value and headers, one per line "
                    "(tabs, newlines and bytes that are not UTF-8 escaped), or JSON lines with --json. Without "
                    "--follow it stops at the end of each partition as it was when it started. Ctrl-C stops it.")
    consume.add_argument("topic")
    consume.add_argument("--partition", metavar="P[,P…]", help="only these partitions (default: all)")
    start = consume.add_mutually_exclusive_group()
    start.add_argument("--from-beginning", action="store_true", help="from the first retained record (the default)")
    start.add_argument("--offset", type=int, metavar="N", help="from offset N of each partition")
    start.add_argument("--last", type=int, metavar="N", help="the last N records of each partition")
    start.add_argument("--from-time", metavar="MS|ISO",
                       help="from the first record at or after this time (ms, or ISO 8601; no zone: local time)")
    start.add_argument("--group", help="from the offsets GROUP committed (the beginning where it has none)")
    consume.add_argument("--commit", action="store_true",
                         help="with --group: commit the offsets after the records printed (native protocol)")
    consume.add_argument("--follow", "-f", action="store_true",
                         help="keep waiting for new records (until Ctrl-C or --max-records)")
    consume.add_argument("--max-records", "-n", type=int, metavar="N", help="stop after N records")
    consume.add_argument("--protocol", choices=tuple(DEFAULT_PORTS), default="native",
                         help="speak this protocol to the gateway (default native)")
    consume.add_argument("--gateway", type=_host_port, metavar="HOST:PORT", help=where)
    consume.add_argument("--json", action="store_true", help="print JSON lines instead of text")
    _login_options(consume)


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    parser = build_parser(bench=argv[:1] == ["bench"])
    if argv[:1] == ["produce"]:  # VALUEs may come after options too: `produce t --key k "a value"`
        args, rest = parser.parse_known_args(argv)
        unknown = [item for item in rest if item.startswith("-") and item != "-"]
        if unknown:
            parser.error(f"unrecognized arguments: {' '.join(unknown)}")
        args.values += rest
    else:
        args = parser.parse_args(argv)
    from .output import OutputClosed

    try:
        return _dispatch(args)
    except (OutputClosed, BrokenPipeError):  # `logway consume … | head`: the reader had enough
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())  # (nothing more to flush at exit)
        return 0


def _dispatch(args: argparse.Namespace) -> int:
    if args.command == "serve":
        from .serve import serve

        return serve(args)
    if args.command == "config":
        from .config import show_config

        return show_config(args)
    if args.command == "produce":
        from .produce import produce

        return produce(args)
    if args.command == "consume":
        from .consume import consume

        return consume(args)
    if args.command == "topics":
        from .topics import topics

        return topics(args)
    if args.command == "groups":
        from .groups import groups

        return groups(args)
    if args.command == "migrate":
        from .migrate import migrate

        return migrate(args)
    if args.command in ("acls", "users", "quotas"):
        from . import security

        return getattr(security, args.command)(args)
    from logway.bench import registry

    return registry.run(args)
