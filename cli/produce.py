"""`logway produce TOPIC [VALUE…]`: write records, the values given or one per line of stdin, and print where each
went: `topic partition offset` (or JSON lines with `--json`).

Stdin is read as it comes (a line typed at a terminal is sent at once; a pipe's lines go in batches of what has
arrived, at most `BATCH_RECORDS` records or `BATCH_BYTES` bytes per partition and request). Lines are text values,
`KEY SEP VALUE` with `--key-separator SEP`, or with `--input json` objects:

    {"value": "…", "key": "…", "headers": {"k": "v"} | [["k", "v"], …], "timestamp": ms | "ISO 8601", "partition": n}

(`value_hex` / `key_hex` for bytes that are not text; `value: null` is a tombstone). A keyed record without a
partition goes where Kafka's default partitioner puts it (murmur2 of the key: the partition a Kafka producer picks),
the others to one partition chosen at random for the whole run (as Kafka's sticky partitioner does per batch).

Exit status: 0 written, 1 the gateway refused (what was written before stays written: the lines printed), 2 an
argument or input line the command cannot use (with its line number).
"""

from __future__ import annotations

import argparse
import os
import random
import sys
from collections.abc import Iterator

import orjson

from logway.codecs.records import Record

from .connect import Login, Refused, Usage, answers, parse_time
from .links import Link, open_link
from .main import DEFAULT_PORTS
from .output import Output, fail

#: Records per produce request (one partition): a request stays well under every protocol's frame limit.
BATCH_RECORDS = 500
#: Bytes of keys and values per produce request (the native frame limit is 10 MiB; JSON arrays of bytes take ~4x).
BATCH_BYTES = 1024 * 1024
#: The longest stdin line read (a longer one is refused with its line number: nothing would take it anyway).
MAX_LINE_BYTES = 16 * 1024 * 1024


def produce(args: argparse.Namespace) -> int:
    address = args.gateway or ("127.0.0.1", DEFAULT_PORTS[args.protocol])
    try:
        defaults = _defaults(args)
        with open_link(args.protocol, address, Login.of(args)) as link, answers(address):
            return _run(link, args, defaults)
    except Usage as exc:
        return fail(str(exc), 2)
    except Refused as exc:
        return fail(str(exc))


def _defaults(args: argparse.Namespace) -> Record:
    """The record fields the options give every record (checked before connecting)."""
    if args.partition is not None and args.partition < 0:
        raise Usage(f"--partition must be 0 or more, got {args.partition}")
    if args.values and args.input == "json":
        raise Usage("--input json reads stdin: give no VALUE arguments")
    if args.key_separator == "":
        raise Usage("--key-separator must not be empty")
    headers = []
    for item in args.header:
        key, sep, value = item.partition("=")
        if not sep or not key:
            raise Usage(f"--header expects KEY=VALUE, got {item!r}")
        headers.append((key, value.encode()))
    if headers and args.protocol != "kafka":
        raise Usage(_NO_HEADERS.format(args.protocol))
    timestamp = None if args.timestamp is None else parse_time(args.timestamp, "--timestamp")
    return Record(b"", None if args.key is None else args.key.encode(), timestamp, tuple(headers))


_NO_HEADERS = ("record headers need --protocol kafka: the {} protocol carries none (the records would lose them)")


def _run(link: Link, args: argparse.Namespace, defaults: Record) -> int:
    count = link.partitions(args.topic)
    if args.partition is not None and args.partition >= count:
        raise Refused(f"partition not found: topic={args.topic}, partition={args.partition} (it has {count})")
    out = Output(args.json, live=not args.values)
    out.header(("topic", "partition", "offset"))
    sticky = random.randrange(count)
    pending: dict[int, list[Record]] = {}
    sizes: dict[int, int] = {}

    def send(partition: int) -> None:
        records = pending.pop(partition, [])
        sizes.pop(partition, None)
        if records:
            for offset in link.produce(args.topic, partition, records):
                out.row(args.topic, partition, offset)

    def place(partition: int | None, record: Record) -> int:
        if record.headers and not link.headers:
            raise Usage(_NO_HEADERS.format(link.protocol))
        if record.value is None and not link.headers:
            raise Usage(f"a record without a value (a tombstone) needs --protocol kafka: the {link.protocol} "
                        "protocol carries none")
        if partition is None:
            partition = args.partition
        if partition is None:
            return sticky if record.key is None else _partition_for_key(record.key, count)
        if partition >= count:
            raise Refused(f"partition not found: topic={args.topic}, partition={partition} (it has {count})")
        return partition

    batches = _stdin_records(args, defaults) if not args.values else \
        [[_record_of(value.encode(), args, defaults, None) for value in args.values]]
    for batch in batches:  # what stdin had at once (a line typed at a terminal goes at once), or the VALUEs
        problem = None
        for partition, record in batch:
            try:
                partition = place(partition, record)
            except (Usage, Refused) as exc:  # the records before it are still written
                problem = exc
                break
            pending.setdefault(partition, []).append(record)
            sizes[partition] = sizes.get(partition, 0) + len(record.value or b"") + len(record.key or b"")
            if len(pending[partition]) >= BATCH_RECORDS or sizes[partition] >= BATCH_BYTES:
                send(partition)
        for partition in list(pending):
            send(partition)
        if problem is not None:
            raise problem
    return 0


def _partition_for_key(key: bytes, count: int) -> int:
    from logway.pipeline.producer import partition_for_key  # Kafka's default partitioner (no Spark needed)

    return partition_for_key(key, count)


def _stdin_records(args: argparse.Namespace, defaults: Record) -> Iterator[list[tuple[int | None, Record]]]:
    """Stdin's lines as records, a list per read: each read returns what has arrived (a terminal: one line)."""
    number = 0
    rest = b""
    fd = sys.stdin.fileno()
    while True:
        chunk = os.read(fd, 1024 * 1024)
        if chunk:
            lines = (rest + chunk).split(b"\n")
            rest = lines.pop()
            if len(rest) > MAX_LINE_BYTES:
                raise Usage(f"stdin line {number + 1} is longer than {MAX_LINE_BYTES} bytes")
        else:  # the end: a last line without its newline
            lines, rest = [rest] if rest else [], b""
        batch = []
        for line in lines:
            number += 1
            line = line.removesuffix(b"\r")
            if args.input == "json" and not line.strip():
                continue  # (a text line may be an empty value)
            try:
                batch.append(_line_record(line, number, args, defaults))
            except Usage:
                yield batch  # the lines before it are written, then the run stops
                raise
        yield batch
        if not chunk:
            return


def _line_record(line: bytes, number: int, args: argparse.Namespace, defaults: Record) -> tuple[int | None, Record]:
    if args.input == "json":
        try:
            return _json_record(orjson.loads(line), defaults)
        except (orjson.JSONDecodeError, Usage, ValueError, TypeError) as exc:
            raise Usage(f"stdin line {number}: {exc}") from None
    return _record_of(line, args, defaults, number)


def _record_of(value: bytes, args: argparse.Namespace, defaults: Record, number: int | None):
    key = defaults.key
    if args.key_separator is not None:
        sep = args.key_separator.encode()
        if sep not in value:
            where = f"stdin line {number}" if number is not None else f"the value {value.decode()!r}"
            raise Usage(f"{where} has no key separator {args.key_separator!r}")
        key, value = value.split(sep, 1)
    return None, Record(value, key, defaults.timestamp, defaults.headers)


def _bytes(obj: dict, name: str) -> bytes | None:
    if f"{name}_hex" in obj:
        return bytes.fromhex(obj[f"{name}_hex"])
    value = obj.get(name)
    if value is None:
        return None
    if not isinstance(value, str):
        raise ValueError(f"{name!r} must be text (or {name}_hex for bytes), got {type(value).__name__}")
    return value.encode()


def _json_record(obj, defaults: Record) -> tuple[int | None, Record]:
    if not isinstance(obj, dict):
        raise ValueError("each line must be a JSON object")
    unknown = set(obj) - {"value", "value_hex", "key", "key_hex", "headers", "timestamp", "partition"}
    if unknown:
        raise ValueError(f"unknown field(s) {', '.join(sorted(unknown))}")
    headers = obj.get("headers") or ()
    pairs = list(headers.items()) if isinstance(headers, dict) else headers
    if not all(isinstance(h, (list, tuple)) and len(h) == 2 and isinstance(h[0], str)
               and (h[1] is None or isinstance(h[1], str)) for h in pairs):
        raise ValueError("headers must be {\"key\": \"value\", …} or [[\"key\", \"value\"], …]")
    timestamp = obj.get("timestamp", defaults.timestamp)
    if isinstance(timestamp, str):
        timestamp = parse_time(timestamp, "timestamp")
    elif timestamp is not None and (not isinstance(timestamp, int) or isinstance(timestamp, bool) or timestamp < 0):
        raise ValueError("timestamp must be milliseconds since 1970 or ISO 8601 text")
    partition = obj.get("partition")
    if partition is not None and (not isinstance(partition, int) or isinstance(partition, bool) or partition < 0):
        raise ValueError("partition must be an integer, 0 or more")
    key = _bytes(obj, "key") if "key" in obj or "key_hex" in obj else defaults.key
    headers = tuple((k, None if v is None else v.encode()) for k, v in pairs) or defaults.headers
    return partition, Record(_bytes(obj, "value"), key, timestamp, headers)
