"""`logway groups list | describe GROUP | reset-offsets GROUP …`: consumer groups on a running gateway, with
kafka-consumer-groups' conventions, over the native protocol (`ListGroups`, `DescribeGroup`, `ResetGroupOffsets`).

Why the native protocol rather than a Kafka client: the committed offsets of every protocol's consumers live in one
offset store, and the native listener answers from it directly (plus the Kafka coordinator's membership, which the
gateway hands its native handler); the gateway's Kafka ListGroups knows only the groups its coordinator holds in
memory, so a native consumer's group — or any group after a restart — would be missing. One address (`--gateway`,
as `logway topics`) serves every command, and a reset is checked and committed in one step on the gateway.

Output is tab-separated, a header line first (`groups list` has none, as `topics list`):

- `list`: `GROUP<TAB>STATE<TAB>MEMBERS<TAB>TYPE` per group (Kafka's states; a group with committed offsets only is
  Empty, of type `-`; a live Kafka group's type is `classic`, `consumer` (KIP-848) or `share` (KIP-932), as
  kafka-groups --list shows it).
- `describe`: `group topic partition current_offset log_end_offset lag consumer_id host client_id`; the log end is
  the last stable offset (what a committed reader gets), lag = log end - committed; `-` where there is no value
  (no commit yet; no live member owns the partition). A live member without partitions gets a row of its own.
- `reset-offsets`: `group topic partition current_offset new_offset`; a dry run (the default) changes nothing and
  says so on stderr; `--execute` commits. Refused (exit 1) while the Kafka group has active members. `--to-offset`
  outside a partition's range is moved to its nearest end, with a note on stderr (as kafka-consumer-groups).
"""

from __future__ import annotations

import argparse
import re
import sys
from datetime import datetime

from logway.clients.errors import NativeError
from logway.clients.native import NativeClient

from . import connect
from .connect import Usage


def groups(args: argparse.Namespace) -> int:
    return connect.run(args, _check, _run)


def _dash(value) -> str:
    return "-" if value is None or value == "" else str(value)


_PARTITIONS = re.compile(r"\d+(,\d+)*")


def _topic_spec(text: str) -> tuple[str, list[int] | None]:
    """`TOPIC` (every partition) or `TOPIC:P,P,…` (those partitions), as kafka-consumer-groups' --topic."""
    name, sep, parts = text.rpartition(":")
    if sep and _PARTITIONS.fullmatch(parts):
        if not name:
            raise Usage(f"--topic expects TOPIC or TOPIC:PARTITION,…, got {text!r}")
        return name, sorted({int(p) for p in parts.split(",")})
    if not text:
        raise Usage("--topic expects a topic name")
    return text, None


def parse_datetime(text: str) -> int:
    """ISO 8601 (`2024-05-01T12:00:00`, `…T12:00:00.000`, `…+02:00`, `…Z`; without a zone: local time, as
    kafka-consumer-groups) -> ms since the epoch."""
    try:
        when = datetime.fromisoformat(text.strip())
    except ValueError:
        raise Usage(f"--to-datetime expects an ISO 8601 date and time (e.g. 2024-05-01T12:00:00 or "
                    f"2024-05-01T12:00:00+00:00), got {text!r}") from None
    ms = int(when.timestamp() * 1000)  # a naive datetime is taken as local time
    if ms < 0:
        raise Usage(f"--to-datetime must be after 1970-01-01, got {text!r}")
    return ms


def _check(args: argparse.Namespace):
    if args.action != "reset-offsets":
        return None
    if args.to_offset is not None:
        if args.to_offset < 0:
            raise Usage(f"--to-offset must be 0 or more, got {args.to_offset}")
        target = ("offset", args.to_offset)
    elif args.to_datetime is not None:
        target = ("timestamp", parse_datetime(args.to_datetime))
    else:
        target = ("earliest" if args.to_earliest else "latest", None)
    if args.all_topics:
        topics = None
    elif args.topic:
        topics = [_topic_spec(t) for t in args.topic]
    else:
        raise Usage("groups reset-offsets needs --topic TOPIC[:PARTITIONS] (repeatable) or --all-topics")
    return target, topics


def _run(client: NativeClient, args: argparse.Namespace, checked) -> int:
    if args.action == "list":
        for g in client.list_groups():
            print(f"{g.group_id}\t{g.state}\t{g.members}\t{_dash(g.type)}")
    elif args.action == "describe":
        _describe(client, args.group)
    else:
        (to, value), topics = checked
        answer = client.reset_group_offsets(args.group, to, value, topics=topics, validate_only=not args.execute)
        print("group\ttopic\tpartition\tcurrent_offset\tnew_offset")
        for r in answer.offsets:
            print(f"{answer.group_id}\t{r.topic}\t{r.partition}\t{_dash(r.previous_offset)}\t{r.offset}")
        if to == "offset":  # as kafka-consumer-groups: say where an offset outside the partition's range went
            for r in answer.offsets:
                if r.offset != value:
                    side = "higher than the latest" if value > r.offset else "lower than the earliest"
                    print(f"logway: new offset {value} is {side} offset of {r.topic} partition {r.partition}: "
                          f"set to {r.offset}", file=sys.stderr)
        if not answer.reset:
            print(f"logway: dry run: group {args.group} is unchanged (add --execute to commit these offsets)",
                  file=sys.stderr)
    return 0


def _describe(client: NativeClient, group: str) -> None:
    d = client.describe_group(group)
    if d.state == "Dead" and not d.partitions and not d.members:
        raise NativeError(f"group not found: {group}")
    owner = {}
    for m in d.members:
        for key in m.partitions:
            owner[tuple(key)] = m
    print("group\ttopic\tpartition\tcurrent_offset\tlog_end_offset\tlag\tconsumer_id\thost\tclient_id")
    for p in d.partitions:
        m = owner.get((p.topic, p.partition))
        who = ("-", "-", "-") if m is None else (m.member_id, _dash(m.client_host), _dash(m.client_id))
        print("\t".join((d.group_id, p.topic, str(p.partition), _dash(p.committed_offset), _dash(p.log_end_offset),
                         _dash(p.lag), *who)))
    for m in d.members:
        if not m.partitions:
            print("\t".join((d.group_id, "-", "-", "-", "-", "-", m.member_id, _dash(m.client_host),
                             _dash(m.client_id))))
