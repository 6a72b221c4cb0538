"""`logway groups list | describe GROUP | reset-offsets GROUP …`: consumer groups on a running gateway, with
kafka-consumer-groups' conventions, over the native protocol (`ListGroups`, `DescribeGroup`, `ResetGroupOffsets`).

Why the native protocol rather than a Kafka client: the committed offsets of every protocol's consumers live in one
offset store, and the native listener answers from it directly (plus the Kafka coordinator's membership, which the
gateway hands its native handler); the gateway's Kafka ListGroups knows only the groups its coordinator holds in
memory, so a native consumer's group — or any group after a restart — would be missing. One address (`--gateway`,
as `logway topics`) serves every command, and a reset is checked and committed in one step on the gateway.

Output is tab-separated, a header line first, or JSON lines with `--json` (`output.py`):

- `list`: `group state members type` per group (Kafka's states; a group with committed offsets only is Empty, of
  type `-`; a live Kafka group's type is `classic`, `consumer` (KIP-848) or `share` (KIP-932), as kafka-groups
  --list shows it).
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

from logway.clients.errors import NativeError
from logway.clients.native import NativeClient

from . import connect
from .connect import Usage, parse_time
from .output import Output, fail


def groups(args: argparse.Namespace) -> int:
    return connect.run(args, _check, _run)


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


def _check(args: argparse.Namespace):
    if args.action != "reset-offsets":
        return None
    if args.to_offset is not None:
        if args.to_offset < 0:
            raise Usage(f"--to-offset must be 0 or more, got {args.to_offset}")
        target = ("offset", args.to_offset)
    elif args.to_datetime is not None:
        target = ("timestamp", parse_time(args.to_datetime, "--to-datetime"))
    else:
        target = ("earliest" if args.to_earliest else "latest", None)
    if args.all_topics:
        topics = None
    elif args.topic:
        topics = [_topic_spec(t) for t in args.topic]
    else:
        raise Usage("groups reset-offsets needs --topic TOPIC[:PARTITIONS] (repeatable) or --all-topics")
    return target, topics


def _run(client: NativeClient, args: argparse.Namespace, checked, out: Output) -> int:
    if args.action == "list":
        out.table(("group", "state", "members", "type"),
                  ((g.group_id, g.state, g.members, g.type or "-") for g in client.list_groups()))
    elif args.action == "describe":
        _describe(client, args.group, out)
    else:
        (to, value), topics = checked
        answer = client.reset_group_offsets(args.group, to, value, topics=topics, validate_only=not args.execute)
        out.table(("group", "topic", "partition", "current_offset", "new_offset"),
                  ((answer.group_id, r.topic, r.partition, r.previous_offset, r.offset) for r in answer.offsets))
        if to == "offset":  # as kafka-consumer-groups: say where an offset outside the partition's range went
            for r in answer.offsets:
                if r.offset != value:
                    side = "higher than the latest" if value > r.offset else "lower than the earliest"
                    fail(f"new offset {value} is {side} offset of {r.topic} partition {r.partition}: "
                         f"set to {r.offset}")
        if not answer.reset:
            fail(f"dry run: group {args.group} is unchanged (add --execute to commit these offsets)")
    return 0


def _describe(client: NativeClient, group: str, out: Output) -> None:
    d = client.describe_group(group)
    if d.state == "Dead" and not d.partitions and not d.members:
        raise NativeError(f"group not found: {group}")
    owner = {}
    for m in d.members:
        for key in m.partitions:
            owner[tuple(key)] = m
    out.header(("group", "topic", "partition", "current_offset", "log_end_offset", "lag", "consumer_id", "host",
                "client_id"))
    for p in d.partitions:
        m = owner.get((p.topic, p.partition))
        who = (None, None, None) if m is None else (m.member_id, m.client_host, m.client_id)
        out.row(d.group_id, p.topic, p.partition, p.committed_offset, p.log_end_offset, p.lag, *who)
    for m in d.members:
        if not m.partitions:
            out.row(d.group_id, None, None, None, None, None, m.member_id, m.client_host, m.client_id)
