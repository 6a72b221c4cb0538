"""`logway bench requests`: what one request costs the gateway, by protocol and request type; and the lean wire
that this benchmark and `logway bench load` speak.

The benchmark starts one gateway (`GatewayProcess`, a subprocess, fresh temporary data directory, 127.0.0.1 only,
`storage.flush: none` unless `--flush`), fills partition 0 of two topics (`req-kafka` stored as Kafka batches,
`req-tank` as TANK bundles) with 400 records of 100 bytes, then runs each row below on its own: `--warmup`
requests, then `--requests` N timed ones, one at a time on one connection (closed loop) with a blocking socket
and the lean frames below, each answer checked. Per row it reports:

- the gateway's CPU per request: its user + system time over the N requests / N, in µs — summed from the
  nanosecond counters of every thread (/proc/<pid>/task/*/schedstat; /proc/<pid>/stat utime+stime when that is
  larger, i.e. a thread ended meanwhile, or schedstat is missing);
- the round trip the client saw, p50 / p99 in µs (a long-poll wake-up: from the waking produce to the answer);
- GC pressure in the gateway, from its Prometheus metrics (admin listener, GET /metrics, read before and after
  the N requests, outside the CPU window): collections per 1,000 requests by generation, the net GC-tracked
  allocations per request (collections × the generation-0 threshold + the change of gc.get_count()[0]: what
  drives the collector — containers allocated and not freed by reference counting), and the cyclic garbage the
  collector freed per request. What the two scrapes themselves leave behind is measured once and subtracted;
- with `--count-calls`: the function calls (Python and C) the gateway's event loop made per request, counted by
  the gateway itself (`count_calls: true`, `gateway/admin/calls.py`, read from the same scrapes). Unlike the
  times, this does not move with the machine's load — it changes only with the code a request runs — so it is what
  a before/after comparison on a noisy VM can trust; counting makes the gateway several times slower, so the
  CPU and RTT columns of such a run are not figures of the gateway.

Rows (`--only` keeps the protocols or rows named, e.g. `--only native,kafka` or `--only "kafka Fetch 16 KiB"`):
native Ping, Produce 10 × 100 B, Fetch 4 KiB (data present: offset 0 of a filled partition, the same answer
every time); Kafka ApiVersions, Metadata (one topic), Produce (one batch of 10 × 100 B), Fetch 16 KiB; TANK
Produce (one bundle of 10 × 100 B), Consume 16 KiB; the cross-format rows (a `tank` topic read or written
through native or Kafka, a `kafka` topic through TANK: transcoded); and per protocol a long-poll wake-up: a fetch
parked at the log end on one connection (`--park-ms` after sending it), woken by a Produce of 10 records of the
same protocol on another; its CPU is the whole cycle (park + produce + wake + answer): subtract the Produce row
for the wake-up's own cost. The count of long-polls that really parked (logway_long_polls_total) is checked.

`--acls` runs the same rows with authorization by ACLs (issue 34): nothing is open without an ACL
(`auth.allow_everyone_if_no_acl_found: false`), the clients (User:ANONYMOUS: they do not log in) are given what
they need, and `ACL_NOISE` bindings of other principals lie in the store — half of them on the very topics the
rows use, each to look through when a request's answer is not yet remembered. Without it the gateway runs as by
default: no ACL, every resource open (the authorizer still answers each check, from what it remembers). The
difference of the two runs' CPU columns is what authorization costs a request.

`--json` prints the rows as JSON (for BENCHMARKS.md) instead of the table. Figures vary with the machine and
its load; they are never asserted in tests (tests/e2e/test_bench_requests.py runs every row with a few requests).

The lean wire (`NativeWire`, `KafkaWire`, `TankWire`): each request frame is encoded once with the codec's
client side (`logway.codecs`), and only what changes is patched in (an offset, a correlation or request id);
an answer is read through its framing and the few fields a check needs — error codes, the next offset or the
high-water mark, the record count (native: the `"offset"` keys of the JSON; Kafka: batch headers; TANK:
`count_messages` over bundle headers) — without building events. `tests/e2e/test_bench_requests.py` checks these
readers against the codecs' full decoders on the gateway's real answers.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import socket
import struct
import tempfile
import time
import urllib.request
from dataclasses import asdict, dataclass, field
from typing import Any, Callable

from .proc import proc_cpu_seconds
from .registry import Benchmark

__all__ = ["BENCHMARKS", "ACL_NOISE", "AnswerError", "WireProtocolError", "NativeWire", "KafkaWire", "TankWire",
           "WIRES",
           "LeanConnection", "RequestsSettings", "RowResult", "bench_requests", "format_results", "format_json",
           "ROWS", "TOPICS", "prepare_topics", "gateway_cpu_ns", "cpu_delta_ns", "metric_readings",
           "write_bench_acls"]

KiB = 1024
RECORDS = 10
RECORD_BYTES = 100
#: Records put in partition 0 of each topic before the rows run: more than a 16 KiB read returns.
PREFILL_RECORDS = 400
TOPICS = {"kafka": "req-kafka", "tank": "req-tank"}  # storage format -> topic
HOME = {"native": "kafka", "kafka": "kafka", "tank": "tank"}
OTHER = {"native": "tank", "kafka": "tank", "tank": "kafka"}
#: Partitions of each topic: 0 read (filled), 1 produced to, 2 and 3 long-polls (one per protocol of the format).
PARTITIONS = 4
READ_PARTITION, PRODUCE_PARTITION = 0, 1
LONG_POLL_PARTITION = {"native": 2, "kafka": 3, "tank": 2}
LONG_POLL_MS = 5000
ANSWER_TIMEOUT = 15.0

_U32BE = struct.Struct(">I")
_I32BE = struct.Struct(">i")
_I64BE = struct.Struct(">q")
_TANK_HEADER = struct.Struct("<BI")
_U32LE = struct.Struct("<I")
_U64LE = struct.Struct("<Q")
#: A RecordBatch v2 header as far as a count needs: baseOffset, batchLength, magic, lastOffsetDelta.
_BATCH = struct.Struct(">qi4xb4x2xi")
_BATCH_OVERHEAD = 49  # the smallest batchLength (a header without records)
_NEXT_OFFSET = re.compile(rb'"next_offset"\s*:\s*(\d+)')


class AnswerError(Exception):
    """The gateway answered with an error (or something else than what was asked); the connection stays usable."""


class WireProtocolError(Exception):
    """An answer that cannot be read (bad framing, unknown id, a malformed field): the connection is done."""


def _find(frame: bytes, sentinel: bytes) -> int:
    pos = frame.find(sentinel)
    if pos < 0 or frame.find(sentinel, pos + 1) >= 0:
        raise AssertionError(f"sentinel {sentinel!r} not found exactly once in a request template")
    return pos


# -- native ---------------------------------------------------------------------------------------------------

class NativeWire:
    """The native protocol's frames for one (topic, partition), and its answers' readers."""

    name = "native"
    HEADER = 4  # bytes of a frame's header: a u32 BE length of the JSON that follows
    _SENTINEL = 987654321012345

    @staticmethod
    def frame_size(buf, pos: int) -> int:
        """The whole frame's length, header included (`HEADER` bytes must be there)."""
        return 4 + _U32BE.unpack_from(buf, pos)[0]

    def __init__(self, topic: str, partition: int, records=(), fetch_bytes: int = 4 * KiB,
                 long_poll_ms: int = 1000) -> None:
        from logway.codecs import native as nv

        codec = nv.NativeConnection("client")
        self.hello = codec.send(nv.PingRequest())
        self._produce = codec.send(nv.ProduceRequest(topic, partition, list(records))) if records else b""
        self._fetch = self._split(codec.send(nv.FetchRequest(topic, partition, self._SENTINEL, fetch_bytes, None,
                                                             0, 0)))
        self._poll = self._split(codec.send(nv.FetchRequest(topic, partition, self._SENTINEL, fetch_bytes, None,
                                                            long_poll_ms, 1)))

    @classmethod
    def _split(cls, frame: bytes) -> tuple[bytes, bytes]:
        body = frame[4:]
        pos = _find(body, b"%d" % cls._SENTINEL)
        return body[:pos], body[pos + len(b"%d" % cls._SENTINEL):]

    def produce_frame(self) -> bytes:
        return self._produce

    def fetch_frame(self, offset: int, long_poll: bool = False) -> bytes:
        head, tail = self._poll if long_poll else self._fetch
        body = b"%s%d%s" % (head, offset, tail)
        return _U32BE.pack(len(body)) + body

    @staticmethod
    def _error(buf, s: int, e: int) -> Exception:
        import orjson

        if buf.startswith(b'{"Error"', s + 4):
            try:
                return AnswerError(str(orjson.loads(buf[s + 4:e])["Error"]["message"]))
            except (ValueError, KeyError, TypeError):
                pass
        return WireProtocolError(f"unexpected answer {bytes(buf[s + 4:min(e, s + 84)])!r}")

    @classmethod
    def hello_answer(cls, buf, s: int, e: int) -> None:
        if not buf.startswith(b'{"Pong"', s + 4):
            raise cls._error(buf, s, e)

    @classmethod
    def produce_answer(cls, buf, s: int, e: int) -> tuple[int, int]:
        """(offsets answered, the last one + 1)."""
        import orjson

        if not buf.startswith(b'{"Produce"', s + 4):
            raise cls._error(buf, s, e)
        try:
            offsets = orjson.loads(buf[s + 4:e])["Produce"]["offsets"]
            return len(offsets), (offsets[-1] + 1 if offsets else -1)
        except (ValueError, KeyError, TypeError) as exc:
            raise WireProtocolError(f"a Produce answer that does not read: {exc}") from None

    @classmethod
    def fetch_answer(cls, buf, s: int, e: int) -> tuple[int, int]:
        """(records, next_offset): records counted by their `"offset"` keys (payloads are arrays of numbers)."""
        if not buf.startswith(b'{"Fetch"', s + 4):
            raise cls._error(buf, s, e)
        i = buf.rfind(b'"next_offset"', s, e)
        m = _NEXT_OFFSET.match(buf, i, e) if i >= 0 else None
        if m is None:
            raise WireProtocolError("a Fetch answer without next_offset")
        return buf.count(b'"offset"', s, i), int(m.group(1))


# -- Kafka ----------------------------------------------------------------------------------------------------

class KafkaWire:
    """Kafka frames for one (topic, partition) at the versions `logway.clients.kafka` speaks (Produce v8, Fetch
    v11, ApiVersions v2), correlation ids patched in; and their answers' readers."""

    name = "kafka"
    HEADER = 4  # an i32 BE size
    _OFFSET_SENTINEL = 0x0123456789ABCDEF
    _MAX_CID = 2**31 - 1

    @staticmethod
    def frame_size(buf, pos: int) -> int:
        return 4 + _I32BE.unpack_from(buf, pos)[0]

    def __init__(self, topic: str, partition: int, batch: bytes = b"", fetch_bytes: int = 16 * KiB,
                 long_poll_ms: int = 1000, client_id: str = "logway-bench") -> None:
        from logway.clients.kafka import V_API_VERSIONS, V_FETCH, V_PRODUCE
        from logway.codecs.kafka.api import api_versions, fetch, produce

        self.topic, self.partition, self.client_id = topic, partition, client_id
        self.cid = 0  # the correlation id of the request last framed
        self.hello = bytearray(self.frame(api_versions.API_KEY, V_API_VERSIONS, api_versions.ApiVersionsRequest()))
        self.produce_template = bytearray(self.frame(produce.API_KEY, V_PRODUCE, produce.ProduceRequest(
            transactional_id=None, acks=1, timeout_ms=30000, topic_data=[produce.TopicProduceData(
                name=topic, partition_data=[produce.PartitionProduceData(index=partition, records=batch)])])))

        def fetch_request(max_wait_ms: int, min_bytes: int) -> tuple[bytearray, int]:
            frame = self.frame(fetch.API_KEY, V_FETCH, fetch.FetchRequest(
                replica_id=-1, max_wait_ms=max_wait_ms, min_bytes=min_bytes, max_bytes=fetch_bytes,
                isolation_level=fetch.READ_UNCOMMITTED, session_id=0, session_epoch=-1,
                topics=[fetch.FetchTopic(topic=topic, partitions=[fetch.FetchPartition(
                    partition=partition, fetch_offset=self._OFFSET_SENTINEL, partition_max_bytes=fetch_bytes)])]))
            return bytearray(frame), _find(frame, _I64BE.pack(self._OFFSET_SENTINEL))

        self._fetch, self._fetch_pos = fetch_request(0, 0)
        self._poll, self._poll_pos = fetch_request(long_poll_ms, 1)
        name = topic.encode()
        self._name = name
        self._produce_answer = struct.Struct(f">iih{len(name)}siihq")
        self._fetch_answer = struct.Struct(f">iihiih{len(name)}siihqqqi")

    def frame(self, api_key: int, version: int, body: Any, correlation_id: int = 0) -> bytes:
        """Any request, framed by the codec (tests and the requests benchmark use it for the rarer ones)."""
        from logway.codecs.kafka.connection import KafkaClientConnection, KafkaRequest

        return KafkaClientConnection().send(KafkaRequest(api_key, version, correlation_id, self.client_id, body))

    def _number(self, frame: bytearray) -> bytearray:
        cid = self.cid = self.cid + 1 if self.cid < self._MAX_CID else 0
        _I32BE.pack_into(frame, 8, cid)
        return frame

    def hello_frame(self) -> bytearray:
        return self._number(self.hello)

    def produce_frame(self) -> bytearray:
        return self._number(self.produce_template)

    def fetch_frame(self, offset: int, long_poll: bool = False) -> bytearray:
        frame, pos = (self._poll, self._poll_pos) if long_poll else (self._fetch, self._fetch_pos)
        _I64BE.pack_into(frame, pos, offset)
        return self._number(frame)

    def numbered(self, frame: bytes | bytearray) -> bytearray:
        """A frame of `frame()` with the next correlation id (a copy)."""
        return self._number(bytearray(frame))

    def _check_cid(self, buf, s: int) -> None:
        cid = _I32BE.unpack_from(buf, s + 4)[0]
        if cid != self.cid:
            raise WireProtocolError(f"an answer with correlation id {cid}, {self.cid} expected")

    def hello_answer(self, buf, s: int, e: int) -> None:
        self._check_cid(buf, s)
        code = struct.unpack_from(">h", buf, s + 8)[0]
        if code:
            raise AnswerError(_kafka_error(code, "api versions"))

    def answer_header(self, buf, s: int, e: int) -> None:
        """Any answer: its correlation id is the last one sent."""
        self._check_cid(buf, s)

    def produce_answer(self, buf, s: int, e: int) -> int:
        """The base offset of the batch."""
        st = self._produce_answer
        if e - s < 4 + st.size:
            raise WireProtocolError(f"a Produce answer of {e - s} bytes")
        cid, topics, _, name, parts, index, code, base = st.unpack_from(buf, s + 4)
        if cid != self.cid:
            raise WireProtocolError(f"an answer with correlation id {cid}, {self.cid} expected")
        if topics != 1 or parts != 1 or name != self._name or index != self.partition:
            raise AnswerError(f"a Produce answer for {topics} topic(s) / {parts} partition(s), not ours")
        if code:
            raise AnswerError(_kafka_error(code, "produce"))
        return base

    def fetch_answer(self, buf, s: int, e: int, offset: int) -> tuple[int, int, int]:
        """(records at or after `offset` in the whole batches, the offset after the last of them (`offset` when
        none), the high-water mark)."""
        st = self._fetch_answer
        if e - s < 4 + st.size:
            raise WireProtocolError(f"a Fetch answer of {e - s} bytes")
        (cid, _, code, _, topics, _, name, parts, index, pcode, hwm, _, _,
         aborted) = st.unpack_from(buf, s + 4)
        if cid != self.cid:
            raise WireProtocolError(f"an answer with correlation id {cid}, {self.cid} expected")
        if code:
            raise AnswerError(_kafka_error(code, "fetch"))
        if topics != 1 or parts != 1 or name != self._name or index != self.partition:
            raise AnswerError(f"a Fetch answer for {topics} topic(s) / {parts} partition(s), not ours")
        if pcode:
            raise AnswerError(_kafka_error(pcode, "fetch"))
        p = s + 4 + st.size + (16 * aborted if aborted > 0 else 0) + 4  # + preferred_read_replica
        size = _I32BE.unpack_from(buf, p)[0]
        p += 4
        end = p + size if size > 0 else p
        if end > e:
            raise WireProtocolError("a Fetch answer's records run past its frame")
        count, next_offset = 0, offset
        unpack = _BATCH.unpack_from
        while end - p >= 61:
            base, length, magic, delta = unpack(buf, p)
            if magic != 2 or length < _BATCH_OVERHEAD:
                raise WireProtocolError(f"not a RecordBatch v2 (magic {magic}, batchLength {length})")
            if p + 12 + length > end:
                break  # a partial last batch
            last = base + delta + 1
            count += last - (base if base > offset else offset) if last > offset else 0
            if last > next_offset:
                next_offset = last
            p += 12 + length
        return count, next_offset, hwm


def _kafka_error(code: int, operation: str) -> str:
    from logway.codecs.kafka.error_codes import ErrorCode

    try:
        name = ErrorCode(code).name
    except ValueError:
        name = "?"
    return f"Kafka error {code} ({name}) in {operation}"


# -- TANK -----------------------------------------------------------------------------------------------------

class TankWire:
    """TANK frames for one (topic, partition), request ids patched in; and their answers' readers."""

    name = "tank"
    HEADER = 5  # msg_type u8, payload length u32 LE
    _SEQ_SENTINEL = 0x0123456789ABCDEF
    _RID_SENTINEL = 0x7A6B5C4D
    hello = None  # the broker speaks first (a Ping)

    @staticmethod
    def frame_size(buf, pos: int) -> int:
        return 5 + _U32LE.unpack_from(buf, pos + 1)[0]

    def __init__(self, topic: str, partition: int, bundle: bytes = b"", fetch_bytes: int = 16 * KiB,
                 long_poll_ms: int = 1000, client_id: bytes = b"logway-bench") -> None:
        from logway.codecs import tank

        codec = tank.TankClientConnection()
        self.rid = 0
        self._name = topic.encode()

        def numbered(frame: bytes, at: int = 7) -> bytearray:
            pos = _find(frame, _U32LE.pack(self._RID_SENTINEL))
            if pos != at:
                raise AssertionError(f"a TANK request id at {pos}, not {at}")
            return bytearray(frame)

        self.produce_template = numbered(codec.send(tank.ProduceRequest(
            self._RID_SENTINEL, [tank.ProduceEntry(topic, partition, bundle)], client_id=client_id))) \
            if bundle else bytearray()

        def consume(max_wait_ms: int, min_bytes: int) -> tuple[bytearray, int]:
            frame = codec.send(tank.ConsumeRequest(self._RID_SENTINEL, max_wait_ms, min_bytes, [tank.ConsumeTopic(
                topic, [tank.ConsumePartition(partition, self._SEQ_SENTINEL, fetch_bytes)])], 2, b""))
            return numbered(frame), _find(frame, _U64LE.pack(self._SEQ_SENTINEL))

        self._fetch, self._fetch_pos = consume(0, 0)
        self._poll, self._poll_pos = consume(long_poll_ms, 1)
        # TANK has no Ping a client sends (the broker ignores one): its cheapest question is DiscoverPartitions.
        # (Its request id follows the frame header: no client version before it.)
        self._discover = numbered(codec.send(tank.DiscoverPartitionsRequest(self._RID_SENTINEL, topic, [partition])),
                                  5)

    def _number(self, frame: bytearray, at: int = 7) -> bytearray:
        rid = self.rid = self.rid + 1 if self.rid < 0xFFFFFFFF else 1
        _U32LE.pack_into(frame, at, rid)
        return frame

    def produce_frame(self) -> bytearray:
        return self._number(self.produce_template)

    def discover_frame(self) -> bytearray:
        """DiscoverPartitions of this partition: the bounds of one partition, the protocol's cheapest request."""
        return self._number(self._discover, 5)

    def discover_answer(self, buf, s: int, e: int) -> tuple[int, int]:
        """(first available seq, high-water mark) of the partition."""
        self._check(buf, s, e, 0x06)
        rid = _U32LE.unpack_from(buf, s + 5)[0]
        if rid != self.rid:
            raise WireProtocolError(f"a DiscoverPartitions answer to request {rid}, {self.rid} expected")
        name = self._name
        p = s + 9
        if e - p < 3 + len(name) or buf[p] != len(name) or buf[p + 1:p + 1 + len(name)] != name:
            raise WireProtocolError("a DiscoverPartitions answer for another topic")
        p += 1 + len(name)
        count = struct.unpack_from("<H", buf, p)[0]
        if count != 1:
            raise AnswerError(f"a DiscoverPartitions answer with {count} partitions (0: unknown topic)")
        if e - p < 2 + 16:
            raise WireProtocolError(f"a DiscoverPartitions answer of {e - s} bytes")
        first, hwm = struct.unpack_from("<QQ", buf, p + 2)
        if first == hwm == 0xFFFFFFFFFFFFFFFF:  # a reason byte follows
            reason = f"{buf[p + 18]:#04x}" if e > p + 18 else "missing"
            raise AnswerError(f"DiscoverPartitions: no bounds for the partition (reason {reason})")
        return first, hwm

    def consume_frame(self, seq: int, long_poll: bool = False) -> bytearray:
        frame, pos = (self._poll, self._poll_pos) if long_poll else (self._fetch, self._fetch_pos)
        _U64LE.pack_into(frame, pos, seq)
        return self._number(frame)

    @staticmethod
    def hello_answer(buf, s: int, e: int) -> None:
        if buf[s] != 0x03 or e - s != 5:
            raise WireProtocolError(f"TANK's greeting expected, got a frame of type {buf[s]:#04x}")

    def _check(self, buf, s: int, e: int, msg_type: int) -> None:
        if buf[s] != msg_type:
            raise WireProtocolError(f"a TANK answer of type {buf[s]:#04x}, {msg_type:#04x} expected")
        if e - s < 9:
            raise WireProtocolError("a TANK answer without its request id")

    def produce_answer(self, buf, s: int, e: int) -> None:
        self._check(buf, s, e, 0x01)
        rid = _U32LE.unpack_from(buf, s + 5)[0]
        if rid != self.rid:
            raise WireProtocolError(f"a Produce answer to request {rid}, {self.rid} expected")
        if e - s != 10:
            raise AnswerError(f"a Produce answer of {e - s - 9} error bytes for one entry")
        if buf[s + 9]:
            raise AnswerError(f"Produce error {buf[s + 9]:#04x}")

    def consume_answer(self, buf, s: int, e: int, seq: int) -> tuple[int, int, int]:
        """(messages at or after `seq` in the whole bundles, the seq to ask for next, the high-water mark)."""
        from logway.codecs.tank import count_messages

        self._check(buf, s, e, 0x02)
        header_len, rid = struct.unpack_from("<II", buf, s + 5)
        if rid != self.rid:
            raise WireProtocolError(f"a Consume answer to request {rid}, {self.rid} expected")
        name = self._name
        p = s + 13  # topics_cnt
        if buf[p] != 1 or buf[p + 1] != len(name) or buf[p + 2:p + 2 + len(name)] != name:
            raise AnswerError("a Consume answer for another topic")
        p += 2 + len(name)
        if buf[p] != 1:
            raise AnswerError(f"a Consume answer with {buf[p]} partitions")
        partition, flags = struct.unpack_from("<HB", buf, p + 1)
        if partition == 0xFFFF:
            raise AnswerError(f"unknown topic {name.decode()}")
        p += 4
        if flags == 0x00:
            base, hwm, size = struct.unpack_from("<QQI", buf, p)
        elif flags == 0xFE:
            base = None
            hwm, size = struct.unpack_from("<QI", buf, p)
        else:
            raise AnswerError(f"Consume err_flags {flags:#04x} at seq {seq}")
        c0 = s + 9 + header_len
        if c0 + size > e:
            raise WireProtocolError("a Consume answer's chunk runs past its frame")
        if not size:
            return 0, seq, hwm
        counted = _count_bundles(buf, c0, c0 + size, base, seq, hwm) if base is not None else None
        if counted is not None:
            return counted[0], counted[1], hwm
        try:  # a sparse or unusual bundle: the codec's general count
            counted = count_messages(bytes(memoryview(buf)[c0:c0 + size]), base, min_seq=seq, max_seq=hwm)
        except Exception as exc:  # RecordFormatError: bundles that do not read
            raise WireProtocolError(f"a Consume chunk that does not read: {exc}") from None
        return counted.messages, (counted.next_seq if counted.next_seq is not None else seq), hwm


def _count_bundles(buf, p: int, end: int, seq: int, min_seq: int, max_seq: int) -> tuple[int, int] | None:
    """`count_messages` for the usual chunk — plain bundles (not sparse, codec 0 or 1) whose count is in the
    header — inline: (messages with min_seq <= seq <= max_seq in the whole bundles, the seq after the last whole
    bundle, or `min_seq` when there is none); None for anything else (the caller then asks `count_messages`)."""
    total = 0
    next_seq = min_seq
    while p < end:
        b = buf[p]
        if b < 0x80:
            q = p + 1
            blen = b
        elif p + 2 < end and buf[p + 1] < 0x80:
            q = p + 2
            blen = (b & 0x7F) | (buf[p + 1] << 7)
        elif p + 3 < end and buf[p + 2] < 0x80:
            q = p + 3
            blen = (b & 0x7F) | ((buf[p + 1] & 0x7F) << 7) | (buf[p + 2] << 14)
        else:
            return None
        stop = q + blen
        if stop > end:
            break  # a cut-off last bundle is not counted
        flags = buf[q] if blen else 0x80
        if flags & _SLOW_BUNDLE:
            return None
        count = (flags >> 2) & 0x0F
        if not count:
            if blen < 2 or buf[q + 1] >= 0x80 or not buf[q + 1]:
                return None
            count = buf[q + 1]
        last = seq + count - 1
        lo = seq if seq > min_seq else min_seq
        hi = last if last < max_seq else max_seq
        if hi >= lo:
            total += hi - lo + 1
        seq = next_seq = last + 1
        p = stop
    return total, next_seq


#: Bundle flags `_count_bundles` leaves to `count_messages`: sparse, extra flags, codecs other than 0 and 1.
_SLOW_BUNDLE = 0x80 | 0x40 | 0x02


WIRES = {"native": NativeWire, "kafka": KafkaWire, "tank": TankWire}


# -- a lean blocking connection -----------------------------------------------------------------------------------

class LeanConnection:
    """A blocking socket reading whole frames of one protocol into a reusable buffer."""

    def __init__(self, address, wire_class, timeout: float = ANSWER_TIMEOUT) -> None:
        self.sock = socket.create_connection(address, timeout=timeout)
        self.sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        self.header = wire_class.HEADER
        self.frame_size = wire_class.frame_size
        self.buf = bytearray(1 << 20)
        self.view = memoryview(self.buf)
        self.have = 0  # bytes in `buf`
        self.used = 0  # of which the answer returned last (at the start)

    def send(self, frame) -> None:
        self.sock.sendall(frame)

    def receive(self) -> tuple[int, int]:
        """Read the next whole frame: (start, end) in `buf` (valid until the next call)."""
        buf, header = self.buf, self.header
        rest = self.have - self.used
        if rest and self.used:  # bytes of the next frame came with the last one
            buf[:rest] = buf[self.used:self.have]
        self.have, self.used = rest, 0
        size = 0
        while True:
            if not size and self.have >= header:
                size = self.frame_size(buf, 0)
                if size > len(buf):
                    self.view.release()
                    buf.extend(bytes(size - len(buf)))
                    self.view = memoryview(buf)
            if size and self.have >= size:
                self.used = size
                return 0, size
            n = self.sock.recv_into(self.view[self.have:])
            if not n:
                raise WireProtocolError("the gateway closed the connection")
            self.have += n

    def exchange(self, frame) -> tuple[int, int]:
        self.sock.sendall(frame)
        return self.receive()

    def close(self) -> None:
        self.sock.close()


# -- the gateway's side: CPU and GC ---------------------------------------------------------------------------------

def gateway_cpu_ns(pid: int) -> tuple[int, int]:
    """(ns on CPU summed over the process's threads from schedstat, user + system ns from /proc/<pid>/stat)."""
    total = 0
    try:
        for tid in os.listdir(f"/proc/{pid}/task"):
            try:
                with open(f"/proc/{pid}/task/{tid}/schedstat") as f:
                    total += int(f.read().split()[0])
            except (FileNotFoundError, ProcessLookupError, IndexError, ValueError):
                pass  # a thread that just ended
    except FileNotFoundError:
        total = 0
    return total, round(proc_cpu_seconds(pid) * 1_000_000_000)


def cpu_delta_ns(before: tuple[int, int], after: tuple[int, int]) -> int:
    """The CPU used between two `gateway_cpu_ns` readings: schedstat's (ns precision) unless /proc/<pid>/stat's
    (10 ms ticks, but counting threads that ended) is larger by more than two ticks."""
    sched = after[0] - before[0]
    stat = after[1] - before[1]
    tick = 1_000_000_000 // os.sysconf("SC_CLK_TCK")
    return stat if (not after[0] or stat > sched + 2 * tick) else sched


# (a `workers: N` supervisor's admin listener labels every worker's samples: `worker="i"`, summed below)
_GC_LINE = re.compile(r'^(python_gc_[a-z_]+)\{generation="(\d)"(?:,worker="\d+")?\}\s+(\S+)$', re.M)
_CALLS_LINE = re.compile(r'^logway_python_calls_total(?:\{worker="\d+"\})?\s+(\S+)$', re.M)
#: The counters `metric_readings` sums over their labels (worker, protocol).
_SUMMED_LINE = re.compile(r'^logway_(transcoded_(?:reads|batches)(?:_shared)?|relayed_requests)_total(?:\{[^}]*\})?'
                          r'\s+(\S+)$', re.M)
#: Connections handed over between workers (`way` out: given; refused: relayed instead), summed over the rest.
_HANDED_LINE = re.compile(r'^logway_connections_handed_over_total\{[^}]*way="(out|refused)"[^}]*\}\s+(\S+)$', re.M)
#: The key of `metric_readings` that holds [logway_python_calls_total], when the gateway counts calls.
CALLS = "calls"


def metric_readings(admin_address) -> dict[str, list[float]]:
    """The gateway's python_gc_* metrics by name, each a list over generations 0-2, under `CALLS`
    [logway_python_calls_total] when the gateway counts calls (`--count-calls`), and
    [transcoded_reads|batches(_shared)], and [relayed_requests] and [handed_over_out|refused] (workers: N; every
    protocol's) — one GET /metrics.
    From a `workers: N` supervisor's admin listener, the sums over the workers (the GC thresholds: the largest, a
    setting rather than a count)."""
    host, port = admin_address
    with urllib.request.urlopen(f"http://{host}:{port}/metrics", timeout=ANSWER_TIMEOUT) as resp:
        text = resp.read().decode()
    out: dict[str, list[float]] = {}
    for name, gen, value in _GC_LINE.findall(text):
        gens = out.setdefault(name, [0.0, 0.0, 0.0])
        i = int(gen)
        gens[i] = max(gens[i], float(value)) if name == "python_gc_threshold" else gens[i] + float(value)
    calls = _CALLS_LINE.findall(text)
    if calls:
        out[CALLS] = [sum(map(float, calls))]
    for name, value in _SUMMED_LINE.findall(text):
        out[name] = [out.get(name, [0.0])[0] + float(value)]
    for way, value in _HANDED_LINE.findall(text):
        name = f"handed_over_{way}"
        out[name] = [out.get(name, [0.0])[0] + float(value)]
    return out


def _calls(before: dict, after: dict) -> float | None:
    """Function calls of the gateway's event loop between two readings (None when it does not count them)."""
    if CALLS not in before or CALLS not in after:
        return None
    return after[CALLS][0] - before[CALLS][0]


def _net_allocations(before: dict, after: dict) -> float | None:
    """GC-tracked allocations minus deallocations between two readings (see the module docstring)."""
    if "python_gc_threshold" not in after or "python_gc_count" not in after:
        return None
    collections = sum(after["python_gc_collections_total"]) - sum(before["python_gc_collections_total"])
    return (collections * (after["python_gc_threshold"][0] + 1) + after["python_gc_count"][0]
            - before["python_gc_count"][0])


# -- the benchmark --------------------------------------------------------------------------------------------------

@dataclass
class RequestsSettings:
    requests: int = 3000
    warmup: int = 300
    flush: str = "none"
    park_ms: float = 1.0
    only: tuple[str, ...] = ()
    count_calls: bool = False  # the gateway counts its function calls (slower: CPU figures then say nothing)
    acls: bool = False  # authorization by ACLs: no resource open without one, ACL_NOISE bindings to look through


@dataclass
class RowResult:
    protocol: str
    request: str
    requests: int
    cpu_us: float  # gateway CPU per request
    rtt_p50_us: float
    rtt_p99_us: float
    gc_per_1k: list[float] = field(default_factory=list)  # collections per 1,000 requests, generations 0-2
    allocs_per_request: float | None = None  # net GC-tracked allocations per request
    garbage_per_request: float | None = None  # objects the cyclic collector freed per request
    records: int = 0  # records moved by the timed requests (produced or read)
    note: str = ""
    calls_per_request: float | None = None  # function calls of the gateway's event loop (`--count-calls`)


@dataclass
class _Row:
    protocol: str
    request: str
    prepare: Callable  # (bench) -> step(): runs one request; (records it moved, round trip in ns)


class _Bench:
    """The gateway, the clients' connections, and what the rows share."""

    def __init__(self, gw, settings: RequestsSettings) -> None:
        from logway.codecs.kafka.records import encode_batch
        from logway.codecs.records import Record
        from logway.codecs.tank import encode_bundle

        self.gw = gw
        self.settings = settings
        now = int(time.time() * 1000)
        self.records = [Record(os.urandom(RECORD_BYTES)) for _ in range(RECORDS)]
        self.kafka_batch = encode_batch(self.records, default_timestamp=now)
        self.tank_bundle = encode_bundle(self.records, codec=0, default_timestamp=now)
        self.connections: list[LeanConnection] = []

    def connect(self, proto: str) -> LeanConnection:
        conn = LeanConnection(self.gw.addresses[proto], WIRES[proto])
        self.connections.append(conn)
        if proto == "tank":
            s, e = conn.receive()
            TankWire.hello_answer(conn.buf, s, e)
        return conn

    def wire(self, proto: str, fmt: str, partition: int, fetch_bytes: int = 16 * KiB):
        topic = TOPICS[fmt]
        if proto == "native":
            return NativeWire(topic, partition, self.records, fetch_bytes, LONG_POLL_MS)
        if proto == "kafka":
            return KafkaWire(topic, partition, self.kafka_batch, fetch_bytes, LONG_POLL_MS)
        return TankWire(topic, partition, self.tank_bundle, fetch_bytes, LONG_POLL_MS)

    def close(self) -> None:
        for conn in self.connections:
            conn.close()
        self.connections.clear()


def prepare_topics(gw) -> None:
    """The two topics, and PREFILL_RECORDS records in partition 0 of each."""
    from logway.clients.kafka import KafkaClient, KafkaConfig
    from logway.clients.native import NativeClient
    from logway.clients.tank import TankClient
    from logway.codecs.records import Record

    with NativeClient(*gw.native, timeout=30) as client:
        client.create_topic(TOPICS["kafka"], PARTITIONS)
    records = [Record(os.urandom(RECORD_BYTES)) for _ in range(RECORDS)]
    now = int(time.time() * 1000)
    with TankClient(*gw.addresses["tank"], timeout=30) as tank:
        err = tank.create_topic(TOPICS["tank"], PARTITIONS)
        if err:
            raise SystemExit(f"logway bench requests: TANK CreateTopic answered error {err}")
        for _ in range(PREFILL_RECORDS // RECORDS):
            tank.produce(TOPICS["tank"], READ_PARTITION, records, codec=0)
    from logway.codecs.kafka.records import encode_batch

    with KafkaClient(KafkaConfig(*gw.addresses["kafka"], client_id="logway-bench", retries=0)) as kafka:
        for _ in range(PREFILL_RECORDS // RECORDS):
            kafka.produce(TOPICS["kafka"], READ_PARTITION, encode_batch(records, default_timestamp=now), acks=1)


# Each row's `prepare(bench)` opens what it needs and returns `step()`: one request, answered and checked, its
# records; and the round trip it timed, in ns (returned as (records, ns)).

def _simple(proto: str, build, check):
    """A row of one request at a time on one `proto` connection: `build(bench)` -> (wire, next_frame()), `check`
    reads the answer in place and returns its records."""
    def prepare(b: _Bench):
        conn = b.connect(proto)
        wire, next_frame = build(b)

        def step():
            frame = next_frame()
            t0 = time.perf_counter_ns()
            s, e = conn.exchange(frame)
            t1 = time.perf_counter_ns()
            return check(wire, conn.buf, s, e), t1 - t0
        return step
    return prepare


def _native_simple(frame_of, check):
    """`_simple` for native builders, which give one frame for every request."""
    def build(b: _Bench):
        wire, frame = frame_of(b)
        return wire, lambda: frame
    return _simple("native", build, check)


def _native_ping(b):
    wire = NativeWire(TOPICS["kafka"], 0)
    return wire, wire.hello


def _native_pong(wire, buf, s, e):
    wire.hello_answer(buf, s, e)
    return 0


def _native_produce(fmt):
    def frame_of(b):
        wire = b.wire("native", fmt, PRODUCE_PARTITION)
        return wire, wire.produce_frame()
    return frame_of


def _native_produced(wire, buf, s, e):
    count, _ = wire.produce_answer(buf, s, e)
    if count != RECORDS:
        raise AnswerError(f"{count} offsets for {RECORDS} records")
    return count


def _native_fetch(fmt):
    def frame_of(b):
        wire = b.wire("native", fmt, READ_PARTITION, 4 * KiB)
        return wire, wire.fetch_frame(0)
    return frame_of


def _native_fetched(wire, buf, s, e):
    count, _ = wire.fetch_answer(buf, s, e)
    if not count:
        raise AnswerError("a Fetch of a filled partition answered no record")
    return count


def _kafka_api_versions(b):
    wire = KafkaWire(TOPICS["kafka"], 0)
    return wire, wire.hello_frame


def _kafka_hello_checked(wire, buf, s, e):
    wire.hello_answer(buf, s, e)
    return 0


def _kafka_metadata(b):
    from logway.clients.kafka import V_METADATA
    from logway.codecs.kafka.api import metadata

    wire = KafkaWire(TOPICS["kafka"], 0)
    frame = bytearray(wire.frame(metadata.API_KEY, V_METADATA, metadata.MetadataRequest(
        topics=[metadata.MetadataRequestTopic(name=TOPICS["kafka"])], allow_auto_topic_creation=False)))
    return wire, lambda: wire.numbered(frame)


def _kafka_metadata_checked(wire, buf, s, e):
    wire.answer_header(buf, s, e)
    if buf.find(TOPICS["kafka"].encode(), s, e) < 0:
        raise AnswerError("a Metadata answer without the topic")
    return 0


def _produce(proto: str, fmt: str):
    """Kafka or TANK: a Produce of RECORDS to `fmt`'s topic (the frame rebuilt for each request)."""
    def build(b):
        wire = b.wire(proto, fmt, PRODUCE_PARTITION)
        return wire, wire.produce_frame
    return build


def _produced(wire, buf, s, e):
    """Kafka or TANK: the Produce answer has no error (raises otherwise)."""
    wire.produce_answer(buf, s, e)
    return RECORDS


def _kafka_fetch(fmt):
    def build(b):
        wire = b.wire("kafka", fmt, READ_PARTITION, 16 * KiB)
        return wire, lambda: wire.fetch_frame(0)
    return build


def _kafka_fetched(wire, buf, s, e):
    count, _, _ = wire.fetch_answer(buf, s, e, 0)
    if not count:
        raise AnswerError("a Fetch of a filled partition answered no record")
    return count


def _tank_consume(fmt):
    def build(b):
        wire = b.wire("tank", fmt, READ_PARTITION, 16 * KiB)
        return wire, lambda: wire.consume_frame(1)
    return build


def _tank_consumed(wire, buf, s, e):
    count, _, _ = wire.consume_answer(buf, s, e, 1)
    if not count:
        raise AnswerError("a Consume of a filled partition answered no message")
    return count


def _wake_up(proto: str):
    """A fetch parked at the log end on one connection, woken by a Produce of RECORDS on another."""
    def prepare(b: _Bench):
        fmt = HOME[proto]
        partition = LONG_POLL_PARTITION[proto]
        waiter, producer = b.connect(proto), b.connect(proto)
        poll, prod = b.wire(proto, fmt, partition), b.wire(proto, fmt, partition)
        park = b.settings.park_ms / 1000
        end = [_log_end(b, proto, fmt, partition)]

        def step():
            offset = end[0]
            if proto == "tank":
                waiter.send(poll.consume_frame(offset + 1, long_poll=True))
            else:
                waiter.send(poll.fetch_frame(offset, long_poll=True))
            time.sleep(park)
            t0 = time.perf_counter_ns()
            producer.send(prod.produce_frame())
            s, e = waiter.receive()
            t1 = time.perf_counter_ns()
            if proto == "native":
                count, next_offset = poll.fetch_answer(waiter.buf, s, e)
            elif proto == "kafka":
                count, next_offset, _ = poll.fetch_answer(waiter.buf, s, e, offset)
            else:
                count, next_seq, _ = poll.consume_answer(waiter.buf, s, e, offset + 1)
                next_offset = next_seq - 1
            s, e = producer.receive()
            prod.produce_answer(producer.buf, s, e)
            if count != RECORDS or next_offset != offset + RECORDS:
                raise AnswerError(f"a long-poll at {offset} woke with {count} records up to {next_offset}")
            end[0] = next_offset
            return count, t1 - t0
        return step
    return prepare


def _log_end(b: _Bench, proto: str, fmt: str, partition: int) -> int:
    from logway.clients.native import NativeClient

    with NativeClient(*b.gw.native, timeout=30) as client:
        desc = client.describe_topic(TOPICS[fmt])
    for p in desc.partitions:
        if p.partition == partition:
            return p.log_end_offset
    raise AnswerError(f"no partition {partition} in {TOPICS[fmt]}")


def _rows() -> list[_Row]:
    return [
        _Row("native", "Ping", _native_simple(_native_ping, _native_pong)),
        _Row("native", "Produce 10 x 100 B", _native_simple(_native_produce("kafka"), _native_produced)),
        _Row("native", "Fetch 4 KiB", _native_simple(_native_fetch("kafka"), _native_fetched)),
        _Row("native", "Produce 10 x 100 B, tank topic", _native_simple(_native_produce("tank"),
                                                                         _native_produced)),
        _Row("native", "Fetch 4 KiB, tank topic", _native_simple(_native_fetch("tank"), _native_fetched)),
        _Row("native", "long-poll wake-up", _wake_up("native")),
        _Row("kafka", "ApiVersions", _simple("kafka", _kafka_api_versions, _kafka_hello_checked)),
        _Row("kafka", "Metadata (1 topic)", _simple("kafka", _kafka_metadata, _kafka_metadata_checked)),
        _Row("kafka", "Produce 10 x 100 B", _simple("kafka", _produce("kafka", "kafka"), _produced)),
        _Row("kafka", "Fetch 16 KiB", _simple("kafka", _kafka_fetch("kafka"), _kafka_fetched)),
        _Row("kafka", "Produce 10 x 100 B, tank topic", _simple("kafka", _produce("kafka", "tank"), _produced)),
        _Row("kafka", "Fetch 16 KiB, tank topic", _simple("kafka", _kafka_fetch("tank"), _kafka_fetched)),
        _Row("kafka", "long-poll wake-up", _wake_up("kafka")),
        _Row("tank", "Produce 10 x 100 B", _simple("tank", _produce("tank", "tank"), _produced)),
        _Row("tank", "Consume 16 KiB", _simple("tank", _tank_consume("tank"), _tank_consumed)),
        _Row("tank", "Produce 10 x 100 B, kafka topic", _simple("tank", _produce("tank", "kafka"), _produced)),
        _Row("tank", "Consume 16 KiB, kafka topic", _simple("tank", _tank_consume("kafka"), _tank_consumed)),
        _Row("tank", "long-poll wake-up", _wake_up("tank")),
    ]


ROWS = [(r.protocol, r.request) for r in _rows()]


def _selected(rows: list[_Row], only: tuple[str, ...]) -> list[_Row]:
    if not only:
        return rows
    wanted = {w.strip().lower() for w in only if w.strip()}
    return [r for r in rows if r.protocol in wanted or f"{r.protocol} {r.request}".lower() in wanted]


#: `--acls`: bindings of other principals besides the benchmark's own, half of them on the topics it uses (each
#: of its requests is authorized against those), half elsewhere.
ACL_NOISE = 1000


def write_bench_acls(data_dir: str) -> int:
    """(`--acls`) Before the gateway starts, put in its security store what the benchmark's requests need — its
    clients are User:ANONYMOUS (they do not log in): All on the topics `req-…` and on the cluster (the admin
    listener's /metrics), Read on every group — and ACL_NOISE bindings of other principals; how many in all."""
    from logway.gateway.security import Acl, Operation, PatternType, Permission, ResourceType
    from logway.storage.security import SecurityStore

    def acl(rtype, name, pattern, principal, op, permission=Permission.ALLOW):
        return Acl(rtype, name, pattern, principal, "*", op, permission).record()

    me = "User:ANONYMOUS"
    acls = [acl(ResourceType.TOPIC, "req-", PatternType.PREFIXED, me, Operation.ALL),
            acl(ResourceType.CLUSTER, "kafka-cluster", PatternType.LITERAL, me, Operation.ALL),
            acl(ResourceType.GROUP, "*", PatternType.LITERAL, me, Operation.READ)]
    for i in range(ACL_NOISE // 2):
        acls.append(acl(ResourceType.TOPIC, "req-", PatternType.PREFIXED, f"User:other-{i}", Operation.WRITE,
                        Permission.DENY))
        acls.append(acl(ResourceType.TOPIC, f"app-{i}-", PatternType.PREFIXED, f"User:other-{i}", Operation.READ))
    store = SecurityStore(os.path.join(data_dir, "security"))
    try:
        store.change_acls(acls, [])
    finally:
        store.close()
    return len(acls)


def _pct(values: list[int], q: float) -> float:
    return values[min(len(values) - 1, int(q * len(values)))] if values else float("nan")


def bench_requests(settings: RequestsSettings) -> list[RowResult]:
    """Start a gateway, run every selected row (see the module docstring), stop it; one result per row."""
    from .launcher import GatewayProcess

    if settings.requests < 1 or settings.warmup < 0:
        raise SystemExit("logway bench requests: --requests must be positive and --warmup not negative")
    rows = _selected(_rows(), settings.only)
    if not rows:
        raise SystemExit(f"logway bench requests: --only {','.join(settings.only)} selects no row")
    results = []
    with tempfile.TemporaryDirectory(prefix="logway-requests-") as tmp:
        data = os.path.join(tmp, "data")
        if settings.acls:
            write_bench_acls(data)
        with GatewayProcess(data, f"storage.flush={settings.flush}", "log_level=WARNING",
                            "listeners.tank.enabled=true",
                            # set only when asked: a gateway of before count_calls (or ACLs) existed runs the rest
                            *(("count_calls=true",) if settings.count_calls else ()),
                            *(("auth.allow_everyone_if_no_acl_found=false",) if settings.acls else ())) as gw:
            for proto in ("native", "kafka", "tank", "admin"):
                if proto not in gw.addresses:
                    raise SystemExit(f"logway bench requests: the gateway has no {proto} listener")
            prepare_topics(gw)
            admin = gw.addresses["admin"]
            # What two scrapes in a row leave behind (subtracted from every row's allocations).
            first = metric_readings(admin)
            second = metric_readings(admin)
            scrape = (_net_allocations(first, second), _calls(first, second))
            if settings.count_calls and scrape[1] is None:
                raise SystemExit("logway bench requests: the gateway does not count calls (an older gateway?)")
            for row in rows:
                results.append(_run_row(gw, settings, row, admin, scrape))
    return results


def _long_polls(admin) -> float:
    host, port = admin
    with urllib.request.urlopen(f"http://{host}:{port}/metrics", timeout=ANSWER_TIMEOUT) as resp:
        for line in resp.read().decode().splitlines():
            if line.startswith("logway_long_polls_total "):
                return float(line.split()[1])
    return float("nan")


def _run_row(gw, settings: RequestsSettings, row: _Row, admin, scrape) -> RowResult:
    """One row; `scrape`: (allocations, calls) a scrape of /metrics itself leaves in a reading, subtracted."""
    scrape_allocs, scrape_calls = scrape
    bench = _Bench(gw, settings)
    try:
        step = row.prepare(bench)
        for _ in range(settings.warmup):
            step()
        n = settings.requests
        wake_up = row.request == "long-poll wake-up"
        parked0 = _long_polls(admin) if wake_up else 0.0
        rtts = [0] * n
        records = 0
        gc_before = metric_readings(admin)
        cpu0 = gateway_cpu_ns(gw.pid)
        for i in range(n):
            moved, rtts[i] = step()
            records += moved
        cpu1 = gateway_cpu_ns(gw.pid)
        gc_after = metric_readings(admin)
        note = ""
        if wake_up:
            parked = _long_polls(admin) - parked0
            if parked < 0.9 * n:
                note = f"only {parked:.0f} of {n} long-polls parked (raise --park-ms)"
    finally:
        bench.close()
    rtts.sort()
    cpu = cpu_delta_ns(cpu0, cpu1)
    collections = gc_after.get("python_gc_collections_total")
    before = gc_before.get("python_gc_collections_total")
    allocs = _net_allocations(gc_before, gc_after)
    if allocs is not None and scrape_allocs is not None:
        allocs -= scrape_allocs
    garbage = gc_after.get("python_gc_objects_collected_total")
    garbage0 = gc_before.get("python_gc_objects_collected_total")
    calls = _calls(gc_before, gc_after)
    if calls is not None and scrape_calls is not None:
        calls -= scrape_calls
    return RowResult(
        row.protocol, row.request, n, cpu / n / 1000, _pct(rtts, .5) / 1000, _pct(rtts, .99) / 1000,
        [1000 * (a - b) / n for a, b in zip(collections, before)] if collections and before else [],
        None if allocs is None else allocs / n,
        None if garbage is None or garbage0 is None else (sum(garbage) - sum(garbage0)) / n,
        records, note, None if calls is None else calls / n)


def format_results(results: list[RowResult], settings: RequestsSettings) -> str:
    acls = f"; ACLs: on, {ACL_NOISE + 3} bindings" if settings.acls else ""
    lines = [f"gateway CPU per request (flush: {settings.flush}; {settings.requests:,} requests per row after "
             f"{settings.warmup:,} of warm-up, one at a time on one connection{acls})",
             f"  {'protocol':8s} {'request':33s} {'CPU µs':>8s} {'RTT p50':>9s} {'RTT p99':>9s} "
             f"{'GC per 1k (gen 0/1/2)':>22s} {'allocs':>8s} {'garbage':>8s}"
             + (f" {'calls':>8s}" if settings.count_calls else "")]
    for r in results:
        gcs = "/".join(f"{x:.1f}" for x in r.gc_per_1k) if r.gc_per_1k else "-"
        allocs = "-" if r.allocs_per_request is None else f"{r.allocs_per_request:.1f}"
        garbage = "-" if r.garbage_per_request is None else f"{r.garbage_per_request:.2f}"
        calls = "" if r.calls_per_request is None else f" {r.calls_per_request:8.1f}"
        lines.append(f"  {r.protocol:8s} {r.request:33s} {r.cpu_us:8.1f} {r.rtt_p50_us:9.1f} {r.rtt_p99_us:9.1f} "
                     f"{gcs:>22s} {allocs:>8s} {garbage:>8s}{calls}" + (f"  ({r.note})" if r.note else ""))
    lines.append("  CPU: the gateway's user + system µs per request; RTT: µs as the client saw them (a wake-up: from "
                 "the waking produce to the answer); allocs: net GC-tracked allocations per request; garbage: "
                 "objects the cyclic collector freed per request. A wake-up row's CPU includes its produce.")
    if settings.count_calls:
        lines.append("  calls: Python and C function calls of the gateway's event loop per request (counted with "
                     "sys.setprofile, which makes the gateway several times slower: CPU and RTT are not figures "
                     "of the gateway in this mode).")
    return "\n".join(lines)


def format_json(results: list[RowResult], settings: RequestsSettings) -> str:
    """{"settings": ..., "rows": [...]}, one row per line, figures rounded to 0.01."""
    def rounded(value):
        if isinstance(value, float):
            return round(value, 2)
        if isinstance(value, list):
            return [rounded(v) for v in value]
        return value

    rows = ",\n".join("  " + json.dumps({k: rounded(v) for k, v in asdict(r).items()}, ensure_ascii=False)
                      for r in results)
    return f'{{"settings": {json.dumps(asdict(settings))},\n "rows": [\n{rows}\n]}}'


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--requests", type=int, default=3000, help="timed requests per row")
    parser.add_argument("--warmup", type=int, default=300, help="untimed requests per row before the timed ones")
    parser.add_argument("--flush", default="none", choices=("none", "interval", "always"),
                        help="the gateway's storage.flush")
    parser.add_argument("--park-ms", type=float, default=1.0,
                        help="long-poll wake-up rows: ms between sending the fetch and the produce that wakes it")
    parser.add_argument("--only", default="",
                        help="comma-separated protocols or rows (\"kafka Fetch 16 KiB\") to run; empty: all")
    parser.add_argument("--json", action="store_true", help="print the rows as JSON instead of a table")
    parser.add_argument("--acls", action="store_true",
                        help=f"authorize every request by ACLs: nothing is open without one (the clients, "
                             f"User:ANONYMOUS, are given what they need), {ACL_NOISE} more bindings of other "
                             "principals to look through")
    parser.add_argument("--count-calls", action="store_true",
                        help="also count the gateway's function calls per request (count_calls: true: "
                             "deterministic, but the gateway runs several times slower)")


def run(args: argparse.Namespace) -> int:
    settings = RequestsSettings(requests=args.requests, warmup=args.warmup, flush=args.flush, park_ms=args.park_ms,
                                only=tuple(x for x in args.only.split(",") if x.strip()),
                                count_calls=args.count_calls, acls=args.acls)
    results = bench_requests(settings)
    if args.json:
        print(format_json(results, settings))
    else:
        print(format_results(results, settings))
    return 0


BENCHMARKS = [Benchmark("requests", "gateway CPU µs, round trip and GC pressure per request, by protocol and request "
                                    "type (one connection, closed loop)", add_arguments, run)]
