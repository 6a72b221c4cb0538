"""The TANK 4.0 requests on the shared log, as a standalone TANK broker answers them (see docs/tank.md).

Sequence numbers are offsets + 1. A consume of a `tank`-format topic is a byte range of a segment file (sent with
`os.sendfile`); other formats are transcoded into bundles by the shared read step. A consume whose partitions are
all at EOF parks (`poll`, in the shared long-poll step) until appends bring `min_bytes` or the normalised timer
expires; what it waits for is measured from the partitions' watermarks, without reads.

With `workers: N`, every worker relays what other workers own (`forwarding.TankForwarder`): a Produce or Consume is
split by owner — its own part served here, each other worker's part sent to that worker with the same request id —
and the answers merged in request order; a split Consume that waits parks every part at once (each owner parks
its own) and is answered when the first part answers, the others then asked again without waiting. Another
worker's partitions in DiscoverPartitions are asked from their owner (for those only, so an owner never relays
again). A Produce or Consume wholly for one other worker is answered `pump.HandOver` instead: the pump gives that
worker the connection when it can (`handover.py`) and relays only when it cannot. A worker without a forwarder
answers a request for another worker's partition with a system error.
"""

from __future__ import annotations

import logging
import math
import time
from dataclasses import replace
from functools import partial

import trio

from logway.codecs.tank import (ConsumeFlags, ConsumePartitionResult, ConsumeRequest, ConsumeResponse,
                                ConsumeTopic, ConsumeTopicResult,
                                CreateTopicError, CreateTopicRequest, CreateTopicResponse,
                                DiscoverPartitionsRequest, DiscoverPartitionsResponse, DiscoverTopicsRequest,
                                DiscoverTopicsResponse, DiscoverTopologyRequest, DiscoverTopologyResponse,
                                ProduceError, ProduceRequest, ProduceResponse, ProduceResult, ReloadConfError,
                                ReloadConfRequest, ReloadConfResponse, StatusRequest, StatusResponse,
                                decode_bundle, encode_bundle, parse_bundle_header, wrap)
from logway.codecs.tank.messages import PartitionBounds, TopicInfo, valid_topic_name

from ...errors import FAILURES, ErrorKind, kind_of, running_out_line
from ...cluster.forwarding import Unreachable
from ...formats import TANK, StorageFormat
from ...pump import HandOver
from ...waiting import LongPoll, Park
from ...steps import ForeignPartition, Partition, Steps

log = logging.getLogger("logway.gateway.tank")

UINT64_MAX = 2**64 - 1
#: TANK clamps fetch_size and min_bytes to this.
MAX_FETCH = 64 * 1024 * 1024
#: TANK's long-poll timer: capped at one hour, rounded up to 64 ms with a 320 ms floor, expiry on 128 ms steps.
MAX_WAIT_MS, WAIT_STEP_MS, MIN_WAIT_MS, EXPIRY_STEP_MS = 3_600_000, 64, 320, 128
VERSION = 400
def _seconds(text: str) -> int:
    return int(text) * 1000


#: TANK's `log.cleanup.policy` values (`cleanup` is key-based compaction) as `cleanup.policy`.
_POLICIES = {"delete": "delete", "cleanup": "compact"}
#: TANK config keys we honour: the setting each sets and how its text becomes the value (ValueError, KeyError: an
#: invalid config; the storage engine checks the ranges); the others are accepted and ignored (TANK-only features
#: such as per-message flushing), as TANK ignores keys it does not know.
_CONFIG = {"log.retention.bytes": ("retention_bytes", int), "log.retention.secs": ("retention_ms", _seconds),
           "log.segment.bytes": ("segment_bytes", int), "log.index.interval.bytes": ("index_interval_bytes", int),
           "log.roll.secs": ("segment_ms", _seconds), "log.roll.jitter.secs": ("segment_ms", _seconds),
           "log.cleanup.policy": ("cleanup_policy", lambda text: _POLICIES[text.lower()]),
           "log.cleaner.min.cleanable.ratio": ("min_cleanable_dirty_ratio", str)}
#: ErrorKind -> Produce answer (anything else: SYSTEM_ERROR).
_PRODUCE_ERRORS = {ErrorKind.INVALID_OFFSET: ProduceError.INVALID_SEQNUM}
#: ErrorKind -> CreateTopic answer (anything else: INVALID_REQUEST).
_CREATE_ERRORS = {ErrorKind.TOPIC_EXISTS: CreateTopicError.ALREADY_EXISTS,
                  ErrorKind.INVALID_CONFIG: CreateTopicError.INVALID_CONFIG,
                  ErrorKind.LIMIT_REACHED: CreateTopicError.SYSTEM_ERROR,  # (TANK has no code for it)
                  ErrorKind.STORAGE_FAILURE: CreateTopicError.SYSTEM_ERROR}


#: What a parked consume's check builds while not enough has arrived (see `TankHandler.poll`).
_TIMED_OUT = object()


def _no_wait(req: ConsumeRequest) -> ConsumeRequest:
    """The same consume, answered at once."""
    return replace(req, max_wait_ms=0)


def normalised_expiry(now_s: float, max_wait_ms: int) -> float:
    """The trio time at which a parked consume times out, as TANK computes it."""
    wait = min(max_wait_ms, MAX_WAIT_MS)
    wait = max(math.ceil(wait / WAIT_STEP_MS) * WAIT_STEP_MS, MIN_WAIT_MS)
    return math.ceil((now_s * 1000 + wait) / EXPIRY_STEP_MS) * EXPIRY_STEP_MS / 1000


def _converted(fmt: StorageFormat, encode, entry, header, explicit_first: int | None) -> bytes | None:
    """A produced bundle as a partition of format `fmt` stores it: a `tank` partition's sparse bundle naming the
    seqs a ProduceWithSeqnum gave (TANK trusts base_seqnum but stores no seqs, and its readers then disagree),
    another format's whole batches (`encode`: `Steps.encoder`'s) — or None when the seqs are not contiguous (a
    Kafka-format log cannot hold gaps inside its batches). Pure: it may run in a worker thread."""
    if fmt is TANK:
        records, _ = decode_bundle(entry.bundle, entry.base_seqnum)
        return wrap(encode_bundle(records, codec=header.codec, sparse_seqs=[r.offset + 1 for r in records]))
    records, _ = decode_bundle(entry.bundle, explicit_first or 1)
    if explicit_first is not None and any(r.offset != explicit_first - 1 + i for i, r in enumerate(records)):
        return None
    return encode(records)


class TankHandler:
    def __init__(self, steps: Steps, forward=None, look_up=None) -> None:
        """With `workers: N`: `forward`, a `TankForwarder`, or None; `look_up(names)` reads the topics of
        the (topic, partition) pairs another worker may have just created or grown, before a request naming one is
        answered."""
        self.steps = steps
        self.forward = forward
        self.look_up = look_up
        self.topics = steps.topics
        self.started = int(time.time())
        self._handlers = {
            ProduceRequest: self._produce, DiscoverPartitionsRequest: self._discover_partitions,
            CreateTopicRequest: self._create_topic, ReloadConfRequest: self._reload_conf,
            StatusRequest: self._status, DiscoverTopicsRequest: self._discover_topics,
            DiscoverTopologyRequest: self._discover_topology,
        }

    async def handle(self, request):
        return await self._handlers[type(request)](request)

    async def known(self, names) -> None:
        """(workers: N) Look up the (topic, partition)s a request names that this worker does not know."""
        if self.look_up is not None:
            await self.look_up(names)

    # -- positions ---------------------------------------------------------------------------------------
    def bounds(self, plog: Partition) -> tuple[int, int]:
        """(first available seq, last assigned seq) of what readers see — committed data, up to the last stable
        offset; (0, 0) for an empty partition."""
        start, end, _ = self.steps.marks(plog)
        return (self.steps.first_offset(plog) + 1 if end > start else 0), end

    # -- produce -----------------------------------------------------------------------------------------
    async def _produce(self, req: ProduceRequest) -> ProduceResponse | HandOver:
        await self.known((e.topic, e.partition) for e in req.entries)
        if self.forward is not None:
            owner = self._sole_owner((e.topic, e.partition) for e in req.entries)
            if owner is not None:  # wholly another worker's: it may take the connection (`handover.py`)
                return HandOver(owner, req, partial(self._produce_parts, req))
        return await self._produce_parts(req)

    def _sole_owner(self, names) -> int | None:
        """The worker that owns every one of the (topic, partition)s when another worker does, else None."""
        owner = None
        for name, partition in names:
            topic = self.topics.get(name)
            plog = topic.partitions[partition] if topic is not None and 0 <= partition < len(topic.partitions) \
                else None
            if type(plog) is not ForeignPartition or owner not in (None, plog.owner):
                return None
            owner = plog.owner
        return owner

    async def _produce_parts(self, req: ProduceRequest) -> ProduceResponse:
        """A Produce appended here, its entries for other workers' partitions relayed to them."""
        results = []
        touched: dict[int, tuple[Partition, int]] = {}  # each partition appended to, and its `cuts` before
        foreign: dict[int, list[int]] = {}  # owner -> indexes of the entries for its partitions
        for entry in req.entries:
            topic = self.topics.get(entry.topic)
            if topic is None:
                results.append(ProduceResult(entry.topic, entry.partition, ProduceError.UNKNOWN_TOPIC))
                continue
            if not 0 <= entry.partition < len(topic.partitions):
                results.append(ProduceResult(entry.topic, entry.partition, ProduceError.UNKNOWN_PARTITION))
                continue
            plog = topic.partitions[entry.partition]
            if type(plog) is ForeignPartition:
                if self.forward is not None:
                    foreign.setdefault(plog.owner, []).append(len(results))
                results.append(ProduceResult(entry.topic, entry.partition, ProduceError.SYSTEM_ERROR))
                continue
            cuts = self.steps.sync_point(plog)
            error = await self._append(plog, entry, req.with_seqnum)
            if error == ProduceError.OK:
                touched.setdefault(id(plog), (plog, cuts))
            results.append(ProduceResult(entry.topic, entry.partition, error))
        for owner, indexes in foreign.items():  # (workers: N) each other worker appends its entries
            part = replace(req, entries=[req.entries[i] for i in indexes])
            try:
                answer = await self.forward.request(owner, part)
            except Unreachable:
                continue  # a system error for these entries
            for i, result in zip(indexes, answer.results):
                results[i] = result
        for plog, cuts in touched.values():
            try:
                await self.steps.make_durable(plog, cuts)
            except FAILURES as exc:  # not durable, or (a cluster) the partition moved to another gateway meanwhile
                if isinstance(exc, OSError):
                    log.error("produce to %s-%d failed: %s", plog.topic, plog.partition,
                              running_out_line(exc, self.topics.data_dir))
                results = [r if (r.topic, r.partition) != (plog.topic, plog.partition)
                           else ProduceResult(r.topic, r.partition, ProduceError.SYSTEM_ERROR) for r in results]
        return ProduceResponse(req.request_id, results)

    async def _append(self, plog: Partition, entry, with_seqnum: bool) -> int:
        steps, fmt = self.steps, plog.fmt
        try:
            header = parse_bundle_header(entry.bundle)
            explicit_first = header.first_seq if header.sparse else entry.base_seqnum if with_seqnum else None
            if fmt is TANK and not (with_seqnum and not header.sparse):
                data = entry.stored()
            else:  # decoded and encoded again: in a worker thread when large
                data = await steps.convert(len(entry.bundle), _converted, fmt, steps.encoder(plog), entry, header,
                                           explicit_first)
            if explicit_first is not None and explicit_first <= steps.log_end(plog):
                return ProduceError.INVALID_SEQNUM  # at or below the last assigned seq
            if data is None or (explicit_first is not None and fmt is not TANK
                                and explicit_first != steps.log_end(plog) + 1):
                # A Kafka-format log cannot hold gaps inside its batches: only contiguous seqs are accepted.
                return ProduceError.INVALID_SEQNUM
            steps.append(plog, data)
        except (*FAILURES, ValueError) as exc:  # ValueError: a bundle that does not decode
            kind = kind_of(exc)
            if kind is ErrorKind.STORAGE_FAILURE:
                log.error("produce to %s-%d failed: %s", plog.topic, plog.partition,
                          running_out_line(exc, self.topics.data_dir))
            elif kind not in _PRODUCE_ERRORS:
                log.info("produce to %s-%d refused: %s", plog.topic, plog.partition, exc)
            return _PRODUCE_ERRORS.get(kind, ProduceError.SYSTEM_ERROR)
        return ProduceError.OK

    # -- consume -----------------------------------------------------------------------------------------
    async def consume_now(self, req) -> ConsumeResponse | None:
        """The immediate answer, or None when every partition is at EOF and the request may wait."""
        topics = []
        ready = req.max_wait_ms == 0
        for t in req.topics:
            topic = self.topics.get(t.name)
            if topic is None:
                topics.append(ConsumeTopicResult(t.name, unknown=True, requested_count=len(t.partitions)))
                ready = True
                continue
            parts = []
            for p in t.partitions:
                if not 0 <= p.partition < len(topic.partitions):
                    parts.append(ConsumePartitionResult(p.partition, ConsumeFlags.UNKNOWN_PARTITION))
                    ready = True
                    continue
                result, has_answer = await self._consume_partition(topic.partitions[p.partition], p)
                parts.append(result)
                ready = ready or has_answer
            topics.append(ConsumeTopicResult(t.name, parts))
        return ConsumeResponse(req.request_id, topics) if ready else None

    async def _consume_partition(self, plog: Partition, p) -> tuple[ConsumePartitionResult, bool]:
        if type(plog) is ForeignPartition:  # another worker's, asked of a worker that does not relay
            return ConsumePartitionResult(p.partition, ConsumeFlags.SYSTEM_ERROR), True
        first, last = self.bounds(plog)
        seq = first if p.seq_num == 0 else p.seq_num
        if seq in (0, UINT64_MAX) or seq == last + 1:  # at EOF
            return ConsumePartitionResult(p.partition, ConsumeFlags.OK, first, last, b""), False
        if seq > last + 1 or seq < first:
            return ConsumePartitionResult(p.partition, ConsumeFlags.BOUNDARY, 0, last, b"", first), True
        return await self._chunk(plog, p.partition, seq - 1, min(p.fetch_size, MAX_FETCH), last), True

    async def _chunk(self, plog: Partition, partition: int, offset: int, max_bytes: int, last: int,
                     at_once: bool = False):
        try:
            read = await self.steps.read(plog, offset, max(max_bytes, 1), TANK, at_once=at_once)
        except FAILURES as exc:
            return self._refused(plog, partition, offset, last, exc)
        return self._chunk_of(read, partition, last)

    @staticmethod
    def _refused(plog: Partition, partition: int, offset: int, last: int, exc: Exception):
        # A stored batch whose records cannot be decoded (the produce path checks only its header and CRC),
        # or a record TANK cannot carry (a key over 255 bytes): this partition's answer is a system error,
        # the connection and the request's other partitions are served as usual.
        log.warning("consume of %s-%d at offset %d refused: %s", plog.topic, partition, offset, exc)
        return ConsumePartitionResult(partition, ConsumeFlags.SYSTEM_ERROR, 0, last, b"")

    @staticmethod
    def _chunk_of(read, partition: int, last: int) -> ConsumePartitionResult:
        if read is None:
            return ConsumePartitionResult(partition, ConsumeFlags.OK, 0, last, b"")
        if read.zero_copy:
            rng = read.slice
            # the bytes when the segment still holds them (a tailing consumer's batch: one small piece to send),
            # else the file range itself
            chunk = rng.data if rng.data is not None else rng
            info = TANK.scan(memoryview(read.head(TANK.header_size)), 0)
            if info is not None and info[1] is not None:  # the first bundle is sparse: it names its own seq
                return ConsumePartitionResult(partition, ConsumeFlags.SPARSE_FIRST, None, last, chunk)
            return ConsumePartitionResult(partition, ConsumeFlags.OK, rng.first_offset + 1, last, chunk)
        if not read.count:
            return ConsumePartitionResult(partition, ConsumeFlags.OK, 0, last, b"")
        return ConsumePartitionResult(partition, ConsumeFlags.OK, read.first + 1, last, read.data)

    def park(self, req) -> list:
        """What a consume that must wait watches: (topic, log, partition, where its end stood — `Steps.tail`) per
        partition. Taken in the same step as the EOF check, so an append that follows the request is never
        missed."""
        watched = []
        for t in req.topics:
            topic = self.topics.names[t.name]
            for p in t.partitions:
                plog = topic.partitions[p.partition]
                watched.append((t.name, plog, p.partition, self.steps.tail(plog)))
        return watched

    def poll(self, req, watched: list) -> LongPoll:
        """A consume whose partitions are all at EOF (`watched`: `park`'s), answered on min_bytes appended or on the
        timer — or at once with the timer's answer when the connection may not park more."""
        min_bytes = max(min(req.min_bytes, MAX_FETCH), 1)

        async def build(at_once):
            if self._captured(watched) >= min_bytes:
                return await self._wake_response(req, watched, at_once), True
            return _TIMED_OUT, False  # the timer's answer is built only if the timer does run out

        def timed_out(answer):
            return self._timeout_response(req, watched) if answer is _TIMED_OUT else answer

        keys = [(w[0], w[2]) for w in watched]
        return self.steps.long_poll(keys, normalised_expiry(trio.current_time(), req.max_wait_ms), build,
                                    now=partial(self.timeout_now, req, watched)).then(timed_out)

    def _captured(self, watched) -> int:
        """Bytes appended to the watched partitions since they were parked, from their watermarks (no reads). A
        roll of a watched partition counts as enough: it forces the answer, as in TANK; so does a transaction's end
        that makes parked data readable (in `tank` topics it appends nothing)."""
        total = 0
        for _, plog, _, tail in watched:
            since = self.steps.appended_since(plog, tail)
            total += MAX_FETCH if since is None else since
        return total

    async def _wake_response(self, req, watched, at_once: bool) -> ConsumeResponse:
        """The answer to a woken consume: each partition's data from where it was parked (not limited by
        fetch_size)."""
        topics: dict[str, list] = {}
        for name, plog, partition, tail in watched:
            start, last = tail.last_stable, self.steps.marks(plog).last_stable
            if last <= start:
                result = ConsumePartitionResult(partition, ConsumeFlags.OK, 0, last, b"")
            else:
                result = await self._chunk(plog, partition, start, MAX_FETCH, last, at_once)
            topics.setdefault(name, []).append(result)
        return ConsumeResponse(req.request_id, [ConsumeTopicResult(n, parts) for n, parts in topics.items()])

    def timeout_response(self, req) -> ConsumeResponse:
        """The answer a parked consume gets when its timer expires, given at once."""
        return self._timeout_response(req, self.park(req))

    async def timeout_now(self, req, watched) -> ConsumeResponse:
        """The timer's answer of a consume parked on `watched`, at once (too many parked on its connection)."""
        return self._timeout_response(req, watched)

    def _timeout_response(self, req, watched) -> ConsumeResponse:
        topics: dict[str, list] = {}
        for name, plog, partition, _ in watched:
            topics.setdefault(name, []).append(
                ConsumePartitionResult(partition, ConsumeFlags.OK, 0, self.steps.marks(plog).last_stable, b""))
        return ConsumeResponse(req.request_id, [ConsumeTopicResult(n, parts) for n, parts in topics.items()])

    # -- consume across workers (workers: N) ---------------------------------------------------------------------
    def split(self, req: ConsumeRequest) -> tuple[ConsumeRequest | None, dict[int, ConsumeRequest]]:
        """The consume's own part (unknown topics and partitions included) and each other worker's part, all with
        the request's id and wait; (req, {}) when nothing in it is another worker's (or nothing is relayed)."""
        if self.forward is None:
            return req, {}
        own: list[ConsumeTopic] = []
        theirs: dict[int, list[ConsumeTopic]] = {}
        for t in req.topics:
            topic = self.topics.get(t.name)
            count = len(topic.partitions) if topic is not None else 0
            mine, by_owner = [], {}
            for p in t.partitions:
                plog = topic.partitions[p.partition] if 0 <= p.partition < count else None
                if type(plog) is ForeignPartition:
                    by_owner.setdefault(plog.owner, []).append(p)
                else:
                    mine.append(p)
            if mine or not by_owner:
                own.append(ConsumeTopic(t.name, mine))
            for owner, ps in by_owner.items():
                theirs.setdefault(owner, []).append(ConsumeTopic(t.name, ps))
        if not theirs:
            return req, {}

        return (replace(req, topics=own) if own else None), {o: replace(req, topics=ts) for o, ts in theirs.items()}

    async def consume_relayed(self, req: ConsumeRequest, own: ConsumeRequest | None, theirs: dict):
        """A consume with other workers' partitions (`split`): the merged answers at once when it may not wait,
        else a `Park` that parks every part at once and answers when the first part does — the parts still
        parked then cancelled and asked again without waiting."""
        if req.max_wait_ms == 0:
            answers = [await self._part_now(own)] if own is not None else []
            return self._merged(req, answers + [await self._ask(o, sub) for o, sub in theirs.items()])

        async def wait():
            answers: dict = {}
            async with trio.open_nursery() as nursery:
                def done(key, answer) -> None:
                    answers[key] = answer
                    nursery.cancel_scope.cancel()  # the first part answered: so does the request

                async def own_part() -> None:
                    answer = await self.consume_now(own)
                    if answer is None:
                        # (no await since the EOF check)
                        answer, _ = await self.steps.waiter.answer(self.poll(own, self.park(own)))
                    done(None, answer)

                async def their_part(owner: int, sub: ConsumeRequest) -> None:
                    done(owner, await self._ask(owner, sub))

                if own is not None:
                    nursery.start_soon(own_part)
                for owner, sub in theirs.items():
                    nursery.start_soon(their_part, owner, sub)
            if own is not None and None not in answers:
                answers[None] = await self._part_now(own)
            for owner, sub in theirs.items():
                if owner not in answers:
                    answers[owner] = await self._ask(owner, _no_wait(sub))
            return self._merged(req, answers.values())

        async def now() -> ConsumeResponse:  # too many parked on the connection: answered without waiting
            parts = [self.timeout_response(own)] if own is not None else []  # (own: the timer's answer)
            # Each owner's own answer to its part, not waiting: their partitions' watermarks live there.
            return self._merged(req, parts + [await self._ask(o, _no_wait(sub)) for o, sub in theirs.items()])

        return Park(wait, now)

    async def _part_now(self, own: ConsumeRequest) -> ConsumeResponse:
        return await self.consume_now(_no_wait(own))

    async def _ask(self, owner: int, sub: ConsumeRequest) -> ConsumeResponse:
        """Another worker's answer to its part; a system error for its partitions when it does not answer."""
        try:
            return await self.forward.request(owner, sub)
        except Unreachable:
            return ConsumeResponse(sub.request_id, [ConsumeTopicResult(t.name, [
                ConsumePartitionResult(p.partition, ConsumeFlags.SYSTEM_ERROR) for p in t.partitions])
                for t in sub.topics])

    @staticmethod
    def _merged(req: ConsumeRequest, answers) -> ConsumeResponse:
        """The parts' answers as one, in the request's order."""
        found, unknown = {}, {}
        for answer in answers:
            for t in answer.topics:
                if t.unknown:
                    unknown[t.name] = t
                for r in t.partitions:
                    found[(t.name, r.partition)] = r
        return ConsumeResponse(req.request_id, [
            unknown[t.name] if t.name in unknown else ConsumeTopicResult(t.name, [
                found.get((t.name, p.partition)) or ConsumePartitionResult(p.partition, ConsumeFlags.SYSTEM_ERROR)
                for p in t.partitions])
            for t in req.topics])

    # -- the other requests ------------------------------------------------------------------------------
    async def _discover_partitions(self, req) -> DiscoverPartitionsResponse:
        await self.known((req.topic, p) for p in req.partitions or (0,))
        topic = self.topics.get(req.topic)
        if topic is None:
            return DiscoverPartitionsResponse(req.request_id, req.topic, [])
        wanted = range(len(topic.partitions)) if req.partitions is None else req.partitions
        out = []
        foreign: dict[int, list[int]] = {}  # owner -> indexes in `out` of its partitions
        for p in wanted:
            if not 0 <= p < len(topic.partitions):
                out.append(PartitionBounds(UINT64_MAX, UINT64_MAX, 0xFB))
            elif type(topic.partitions[p]) is ForeignPartition:
                if self.forward is not None:
                    foreign.setdefault(topic.partitions[p].owner, []).append(len(out))
                out.append(PartitionBounds(UINT64_MAX, UINT64_MAX, 0xFB))
            else:
                out.append(PartitionBounds(*self.bounds(topic.partitions[p])))
        for owner, indexes in foreign.items():  # (workers: N) asked of each owner
            try:
                answer = await self.forward.request(owner, DiscoverPartitionsRequest(
                    req.request_id, req.topic, [wanted[i] for i in indexes]))
            except Unreachable:
                continue
            for i, bounds in zip(indexes, answer.partitions):
                out[i] = bounds
        return DiscoverPartitionsResponse(req.request_id, req.topic, out)

    async def _create_topic(self, req) -> CreateTopicResponse:
        def answer(err):
            return CreateTopicResponse(req.request_id, req.topic, err)

        if not valid_topic_name(req.topic) or req.partitions < 1:
            return answer(CreateTopicError.INVALID_REQUEST)
        if req.config_errors:
            return answer(CreateTopicError.INVALID_CONFIG)
        overrides: dict = {"format": TANK.name}
        for key, value in req.config.items():
            if key in _CONFIG:
                name, convert = _CONFIG[key]
                try:
                    overrides[name] = convert(value)
                except (ValueError, KeyError):
                    return answer(CreateTopicError.INVALID_CONFIG)
        try:
            await self.topics.create(req.topic, req.partitions, overrides)
        except FAILURES as exc:
            return answer(_CREATE_ERRORS.get(kind_of(exc), CreateTopicError.INVALID_REQUEST))
        return answer(CreateTopicError.OK)

    async def _reload_conf(self, req) -> ReloadConfResponse:
        topic = self.topics.get(req.topic)
        if topic is None:
            err = ReloadConfError.UNKNOWN_TOPIC
        elif not 0 <= req.partition < len(topic.partitions):
            err = ReloadConfError.UNKNOWN_PARTITION
        else:
            err = ReloadConfError.OK  # configuration lives in topic.json and is always current
        return ReloadConfResponse(req.request_id, req.topic, req.partition, err)

    async def _status(self, req) -> StatusResponse:
        topics = self.topics.all()
        partitions = sum(len(t.partitions) for t in topics)
        return StatusResponse(req.request_id, len(topics), partitions, open_partitions=partitions,
                              open_partitions_time=0, startup_ts=self.started, version=VERSION)

    async def _discover_topics(self, req) -> DiscoverTopicsResponse:
        return DiscoverTopicsResponse(req.request_id, [TopicInfo(t.name, len(t.partitions))
                                                       for t in self.topics.all()])

    async def _discover_topology(self, req) -> DiscoverTopologyResponse:
        return DiscoverTopologyResponse(req.request_id, None)
