"""`logway consume TOPIC`: print a topic's records, one per line — `partition offset time key value headers`, the
time in UTC, tabs, newlines and bytes that are not UTF-8 escaped (`output.cell`) — or with `--json` one object per
record:

    {"topic", "partition", "offset", "timestamp": ms, "time": "…Z", "key": text | "key_hex": hex,
     "value": text | "value_hex": hex, "headers": [{"key", "value" | "value_hex"}]}

Where each partition starts: its first retained record (the default), `--offset N`, the last N records (`--last`),
the first record at or after a time (`--from-time`), or the offset a group committed (`--group`; the first retained
record where it has none). An offset outside the partition's records is moved to its nearest end, with a note on
stderr. Without `--follow` it stops at each partition's end as it was when it started (partitions one after the
other); with it, every partition is read at once, each on a connection of its own that waits for new records, until
Ctrl-C (exit 130) or `--max-records`. `--commit` (with `--group`, native protocol) commits the offset after the
records printed, as a consumer that read them would.

Exit status: 0 done, 1 the gateway refused or went away, 2 arguments the command cannot use, 130 Ctrl-C.
"""

from __future__ import annotations

import argparse
import threading
from typing import Any

from logway.codecs.records import Record

from .connect import Login, Refused, Usage, answers, parse_time
from .links import Link, open_link
from .main import DEFAULT_PORTS
from .output import Output, fail, iso_time, text_or_hex

#: How long one read waits for new records with --follow (then it asks again; Ctrl-C is not held up by it).
FOLLOW_WAIT_MS = 5000
#: Partitions --follow reads at once, a connection each (the gateway limits connections per client address).
MAX_FOLLOWED = 64
COLUMNS = ("partition", "offset", "time", "key", "value", "headers")


def consume(args: argparse.Namespace) -> int:
    address = args.gateway or ("127.0.0.1", DEFAULT_PORTS[args.protocol])
    try:
        wanted = _check(args)
        login = Login.of(args)
        with open_link(args.protocol, address, login) as link, answers(address):
            return _Consumer(link, args, address, login).run(wanted)
    except Usage as exc:
        return fail(str(exc), 2)
    except Refused as exc:
        return fail(str(exc))
    except KeyboardInterrupt:
        return 130


def _check(args: argparse.Namespace) -> list[int] | None:
    """The partitions asked for (None: all), and the options checked before connecting."""
    for name in ("offset", "last", "max_records"):
        value = getattr(args, name)
        if value is not None and value < (1 if name != "offset" else 0):
            raise Usage(f"--{name.replace('_', '-')} must be {'0' if name == 'offset' else '1'} or more, got {value}")
    if args.commit and args.group is None:
        raise Usage("--commit needs --group GROUP (the group whose offsets move)")
    if args.from_time is not None:
        args.from_time = parse_time(args.from_time, "--from-time")
    if args.partition is None:
        return None
    try:
        wanted = sorted({int(p) for p in args.partition.split(",")})
    except ValueError:
        raise Usage(f"--partition expects P or P,P,… (numbers), got {args.partition!r}") from None
    if wanted[0] < 0:
        raise Usage(f"--partition must be 0 or more, got {wanted[0]}")
    return wanted


class _Consumer:
    def __init__(self, link: Link, args: argparse.Namespace, address: tuple[str, int], login: Login | None) -> None:
        self.link = link
        self.args = args
        self.address = address
        self.login = login
        self.topic = args.topic
        self.out = Output(args.json, live=args.follow)
        self.printed = 0
        self.lock = threading.Lock()  # (--follow) one partition's reader prints at a time
        self.done = threading.Event()  # (--follow) --max-records reached, or a reader failed
        self.failure: BaseException | None = None

    def run(self, wanted: list[int] | None) -> int:
        link, args = self.link, self.args
        count = link.partitions(self.topic)
        partitions = wanted if wanted is not None else list(range(count))
        missing = [p for p in partitions if p >= count]
        if missing:
            raise Refused(f"partition not found: topic={self.topic}, partition={missing[0]} (it has {count})")
        if args.follow and len(partitions) > MAX_FOLLOWED:
            raise Usage(f"--follow reads at most {MAX_FOLLOWED} partitions at once (a connection each): choose "
                        "some with --partition")
        bounds = link.bounds(self.topic, partitions)
        starts = self._starts(partitions, bounds)
        self.out.header(COLUMNS)
        if not args.follow:
            for p in partitions:
                if not self._read(link, p, starts[p], bounds[p][1]):
                    break
            return 0
        return self._follow(partitions, starts)

    def _starts(self, partitions: list[int], bounds: dict[int, tuple[int, int]]) -> dict[int, int]:
        args = self.args
        if args.offset is not None:
            asked = dict.fromkeys(partitions, args.offset)
        elif args.last is not None:
            asked = {p: bounds[p][1] - args.last for p in partitions}
        elif args.from_time is not None:
            asked = self.link.offsets_at(self.topic, partitions, args.from_time)
        elif args.group is not None:
            committed = self.link.committed(args.group, self.topic, partitions)
            asked = {p: bounds[p][0] if committed[p] is None else committed[p] for p in partitions}
        else:
            asked = {p: bounds[p][0] for p in partitions}
        starts = {}
        for p in partitions:
            first, end = bounds[p]
            starts[p] = min(max(asked[p], first), end)
            if args.offset is not None and starts[p] != asked[p]:
                side = "below the first retained record" if asked[p] < first else "past the end"
                fail(f"offset {asked[p]} is {side} of partition {p}: reading from {starts[p]}")
        return starts

    def _read(self, link: Link, partition: int, offset: int, end: int | None) -> bool:
        """Print the partition's records from `offset` up to `end` (None: on and on); False once --max-records
        were printed (or, following, when told to stop)."""
        wait = FOLLOW_WAIT_MS if end is None else 0
        while end is None or offset < end:
            if self.done.is_set():
                return False
            records, next_offset = link.read(self.topic, partition, offset, wait)
            if not records and next_offset <= offset:
                if end is not None:
                    return True  # nothing more to read now (e.g. the rest is an open transaction's)
                continue
            with self.lock:
                for r in records:
                    if end is not None and r.offset >= end:
                        break
                    self._print(partition, r)
                    if self.args.max_records is not None and self.printed >= self.args.max_records:
                        self._commit(link, partition, r.offset + 1)
                        self.done.set()
                        return False
            offset = next_offset
            self._commit(link, partition, offset)
        return True

    def _commit(self, link: Link, partition: int, offset: int) -> None:
        if self.args.commit:
            link.commit(self.args.group, self.topic, partition, offset)

    def _print(self, partition: int, r: Record) -> None:
        self.printed += 1
        if not self.args.json:
            self.out.row(partition, r.offset, iso_time(r.timestamp), r.key, r.value,
                         ", ".join(f"{k}={'' if v is None else v.decode('utf-8', 'backslashreplace')}"
                                   for k, v in r.headers) or None)
            return
        data: dict[str, Any] = {"topic": self.topic, "partition": partition, "offset": r.offset,
                                "timestamp": r.timestamp, "time": iso_time(r.timestamp)}
        data |= text_or_hex(r.key, "key") | text_or_hex(r.value, "value")
        data["headers"] = [{"key": k} | text_or_hex(v, "value") for k, v in r.headers]
        self.out.record(data)

    def _follow(self, partitions: list[int], starts: dict[int, int]) -> int:
        """Every partition at once, a thread and a connection each, until --max-records or Ctrl-C."""
        def reader(partition: int) -> None:
            try:
                with open_link(self.link.protocol, self.address, self.login) as link, answers(self.address):
                    self._read(link, partition, starts[partition], None)
            except BaseException as exc:  # reported by the main thread
                self.failure = self.failure or exc
                self.done.set()

        for p in partitions:
            threading.Thread(target=reader, args=(p,), name=f"consume-{p}", daemon=True).start()
        while not self.done.wait(0.5):  # (a timed wait: Ctrl-C is delivered to this thread)
            pass
        if self.failure is not None:
            raise self.failure
        return 0
