"""`logway produce` and `logway consume` in each protocol: a `Link` is one connection to the gateway that writes and
reads records the way that protocol's clients do.

| | native (default) | kafka | tank |
|---|---|---|---|
| partitions, bounds | DescribeTopic | Metadata, ListOffsets | DiscoverPartitions |
| from a time | DescribeTopic `at_timestamp` | ListOffsets by timestamp | — |
| a group's position | OffsetFetch (commit: OffsetCommit) | OffsetFetch | — (TANK has no groups) |
| read | Fetch (long-poll with `max_wait_ms`) | Fetch, read_uncommitted as kcat (control batches left out) | Consume |
| write | Produce (the offsets answered) | Produce: a RecordBatch v2, acks=all | Produce (no offsets answered) |
| headers, no value (a tombstone) | — | yes | — |

What a protocol cannot do is refused before anything is sent (`Usage`, exit 2), naming the protocol that can.
Offsets are Kafka's everywhere (TANK's sequence numbers are offset + 1). A `connect.Login` logs the native link in
(a user or the token) and the Kafka link (SASL, as a user); TANK has no login; each connects over TLS with it.
"""

from __future__ import annotations

import time

from logway.codecs.records import Record

from .connect import TIMEOUT, Login, Refused, Usage, open_native, where

__all__ = ["Link", "open_link"]

#: Bytes asked for per read: records are printed as they come, so a read need not be large.
READ_BYTES = 1024 * 1024


class Link:
    """One connection to the gateway, in one protocol. Offsets are Kafka's; `bounds` are (log start, end)."""

    protocol = ""
    headers = False  # whether records carry headers, and may have no value (tombstones), in this protocol

    def partitions(self, topic: str) -> int:
        raise NotImplementedError

    def bounds(self, topic: str, partitions: list[int]) -> dict[int, tuple[int, int]]:
        raise NotImplementedError

    def offsets_at(self, topic: str, partitions: list[int], ms: int) -> dict[int, int]:
        raise Usage(f"--from-time needs --protocol native or kafka: the {self.protocol} protocol cannot look up "
                    "offsets by time")

    def committed(self, group: str, topic: str, partitions: list[int]) -> dict[int, int | None]:
        raise Usage(f"--group needs --protocol native or kafka: the {self.protocol} protocol has no consumer groups")

    def commit(self, group: str, topic: str, partition: int, offset: int) -> None:
        raise Usage(f"--commit needs --protocol native (the {self.protocol} protocol's commits belong to its "
                    "consumer groups)")

    def read(self, topic: str, partition: int, offset: int, wait_ms: int) -> tuple[list[Record], int]:
        """Records from `offset` on (none: none yet, after up to `wait_ms`), and the offset to read next."""
        raise NotImplementedError

    def produce(self, topic: str, partition: int, records: list[Record]) -> list[int | None]:
        """Append `records`; their offsets (None where the protocol does not say)."""
        raise NotImplementedError

    def close(self) -> None:
        self.client.close()

    def __enter__(self) -> "Link":
        return self

    def __exit__(self, *exc) -> None:
        self.close()


def _not_found(topic: str) -> Refused:
    return Refused(f"topic not found: {topic} (create it with: logway topics create {topic})")


class NativeLink(Link):
    protocol = "native"

    def __init__(self, address: tuple[str, int], login: Login | None) -> None:
        self.client = open_native(*address, login)

    def partitions(self, topic: str) -> int:
        from logway.clients.errors import NativeError

        try:
            return len(self.client.describe_topic(topic).partitions)
        except NativeError as exc:
            if exc.message.startswith("topic not found"):
                raise _not_found(topic) from None
            raise

    def bounds(self, topic: str, partitions: list[int]) -> dict[int, tuple[int, int]]:
        d = self.client.describe_topic(topic, details=True, partitions=partitions)
        return {p.partition: (p.log_start_offset, p.log_end_offset if p.last_stable_offset is None
                              else p.last_stable_offset) for p in d.partitions}

    def offsets_at(self, topic: str, partitions: list[int], ms: int) -> dict[int, int]:
        d = self.client.describe_topic(topic, partitions=partitions, at_timestamp=ms)
        return {p.partition: p.timestamp_offset for p in d.partitions}

    def committed(self, group: str, topic: str, partitions: list[int]) -> dict[int, int | None]:
        return {p: self.client.committed(topic, p, group) for p in partitions}

    def commit(self, group: str, topic: str, partition: int, offset: int) -> None:
        self.client.commit(topic, partition, group, offset)

    def read(self, topic: str, partition: int, offset: int, wait_ms: int) -> tuple[list[Record], int]:
        answer = self.client.fetch(topic, partition, offset, READ_BYTES, max_wait_ms=wait_ms)
        return list(answer.records), answer.next_offset

    def produce(self, topic: str, partition: int, records: list[Record]) -> list[int | None]:
        return list(self.client.produce(topic, partition, records))


class KafkaLink(Link):
    protocol = "kafka"
    headers = True

    def __init__(self, address: tuple[str, int], login: Login | None) -> None:
        from logway.clients.errors import GatewayUnavailable
        from logway.clients.kafka import KafkaClient, KafkaConfig
        from logway.codecs.errors import RemoteProtocolError

        self.client = KafkaClient(KafkaConfig(*address, client_id="logway-cli", connect_timeout=TIMEOUT,
                                              timeout=TIMEOUT, retries=1, **(login.kafka() if login else {})))
        try:
            self.client.api_versions()
        except GatewayUnavailable as exc:
            self.client.close()
            if isinstance(exc.__cause__, RemoteProtocolError):
                raise Refused(f"{where(address)} does not speak the Kafka protocol (is it the native or TANK "
                              "port?)") from None
            raise Refused(str(exc)) from None

    def partitions(self, topic: str) -> int:
        count = self.client.partition_counts([topic]).get(topic)
        if count is None:
            raise _not_found(topic)
        return count

    def bounds(self, topic: str, partitions: list[int]) -> dict[int, tuple[int, int]]:
        from logway.clients.kafka import EARLIEST, LATEST

        starts = self.client.list_offsets({(topic, p): EARLIEST for p in partitions})
        ends = self.client.list_offsets({(topic, p): LATEST for p in partitions})
        return {p: (starts[(topic, p)], ends[(topic, p)]) for p in partitions}

    def offsets_at(self, topic: str, partitions: list[int], ms: int) -> dict[int, int]:
        found = self.client.list_offsets({(topic, p): ms for p in partitions})
        ends = self.bounds(topic, partitions)
        return {p: ends[p][1] if found[(topic, p)] < 0 else found[(topic, p)] for p in partitions}

    def committed(self, group: str, topic: str, partitions: list[int]) -> dict[int, int | None]:
        found = self.client.offset_fetch(group, [(topic, p) for p in partitions])
        return {p: found.get((topic, p)) for p in partitions}

    def read(self, topic: str, partition: int, offset: int, wait_ms: int) -> tuple[list[Record], int]:
        from logway.codecs.kafka.records import decode_batch, iter_batches

        answer = self.client.fetch(topic, partition, offset, READ_BYTES, max_wait_ms=wait_ms)
        records: list[Record] = []
        next_offset = offset
        for batch in iter_batches(answer.records):
            header, decoded = decode_batch(batch)  # a control batch (a transaction's end) has no records
            records += [r for r in decoded if r.offset >= offset]
            next_offset = max(next_offset, header.base_offset + header.last_offset_delta + 1)
        return records, next_offset

    def produce(self, topic: str, partition: int, records: list[Record]) -> list[int | None]:
        from logway.codecs.kafka.records import encode_batch

        base = self.client.produce(topic, partition, encode_batch(records, default_timestamp=int(time.time() * 1000)))
        return list(range(base, base + len(records)))


class TankLink(Link):
    protocol = "tank"

    def __init__(self, address: tuple[str, int], login: Login | None = None) -> None:
        from logway.clients.tank import TankClient
        from logway.codecs.errors import RemoteProtocolError

        try:  # a TANK broker greets a new connection with a Ping at once: a short wait tells a wrong port
            self.client = TankClient(*address, timeout=5.0, connect_timeout=TIMEOUT, client_id=b"logway-cli",
                                     ssl_context=login.ssl_context() if login is not None else None)
        except (TimeoutError, RemoteProtocolError, ConnectionError) as exc:
            if isinstance(exc, OSError) and not isinstance(exc, TimeoutError) and exc.errno is not None:
                raise Refused(f"cannot reach the gateway at {where(address)}: {exc.strerror or exc}") from None
            raise Refused(f"{where(address)} does not speak the TANK protocol (is it the native or Kafka "
                          "port?)") from None
        except OSError as exc:
            raise Refused(f"cannot reach the gateway at {where(address)}: {exc.strerror or exc}") from None
        self.client.timeout = TIMEOUT

    def _bounds(self, topic: str):
        found = self.client.discover_partitions(topic)
        if not found:
            raise _not_found(topic)
        return found

    def partitions(self, topic: str) -> int:
        return len(self._bounds(topic))

    def bounds(self, topic: str, partitions: list[int]) -> dict[int, tuple[int, int]]:
        found = self._bounds(topic)  # seqs: the first available, the last assigned (offset + 1)
        return {p: (max(found[p].first_available - 1, 0), found[p].high_water_mark) for p in partitions}

    def read(self, topic: str, partition: int, offset: int, wait_ms: int) -> tuple[list[Record], int]:
        got = self.client.get(topic, partition, offset + 1, max_wait_ms=wait_ms)
        return ([Record(m.value, m.key, m.timestamp, offset=m.seq - 1) for m in got.messages],
                max(got.next_seq - 1, offset))

    def produce(self, topic: str, partition: int, records: list[Record]) -> list[int | None]:
        from logway.clients.errors import TankError

        code = self.client.produce(topic, partition, records)
        if code:
            raise TankError(f"the gateway refused the TANK produce to {topic}/{partition}: error {code:#04x}", code,
                            topic, partition)
        return [None] * len(records)


_LINKS = {"native": NativeLink, "kafka": KafkaLink, "tank": TankLink}


def open_link(protocol: str, address: tuple[str, int], login: Login | None = None) -> Link:
    """A checked connection to the gateway's `protocol` listener at `address`, logged in as `login` says; Refused
    when there is none."""
    return _LINKS[protocol](address, login)
