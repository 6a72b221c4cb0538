"""What the storage tests share: a settable clock, Kafka batches and TANK bundles to append, engines to open, and
readers that return what a partition holds."""

from __future__ import annotations

import random

from logway.codecs.kafka.records import KafkaFormat, decode_records, encode_batch
from logway.codecs.records import Record
from logway.storage import LogEngine, TopicConfig

FORMATS = {"kafka": KafkaFormat()}
T0 = 1_700_000_000_000


class Clock:
    """A settable wall clock (seconds) for age-based roll and retention."""

    def __init__(self, ms: int = T0) -> None:
        self.ms = ms

    def __call__(self) -> float:
        return self.ms / 1000


def batch(n: int, *, ts: int = T0, size: int = 10, tag: str = "") -> bytes:
    return encode_batch([Record(f"{tag}{i}".encode().ljust(size, b"."), key=b"k%d" % i, timestamp=ts + i)
                         for i in range(n)], default_timestamp=ts)


def open_engine(path, clock=None, **cfg) -> LogEngine:
    return LogEngine(path, FORMATS, TopicConfig(**cfg), clock=clock or Clock())


def values(plog, offset=0, max_bytes=1 << 30):
    rng = plog.read(offset, max_bytes)
    return [] if rng is None else decode_records(rng.read(), min_offset=offset)


def all_offsets(plog):
    out, off = [], plog.log_start_offset
    while off < plog.log_end_offset:
        recs = values(plog, off)
        assert recs, f"no records at {off}"
        out += [r.offset for r in recs]
        off = recs[-1].offset + 1
    return out


def fill(tmp_path, n=200, **cfg):
    eng = open_engine(tmp_path, **cfg)
    plog = eng.create_topic("t", 1).partitions[0]
    bounds = [plog.append(batch(random.randint(1, 6), size=random.randint(5, 80))) for _ in range(n)]
    seg = plog.segments[-1]
    return eng, plog, bounds, seg.log_path


def tank_engine(path, **cfg):
    from logway.codecs.tank import TankFormat

    return LogEngine(path, {"kafka": KafkaFormat(), "tank": TankFormat()}, TopicConfig(**cfg), clock=Clock())


def bundle(*values: bytes) -> bytes:
    from logway.codecs.tank import encode_bundle, wrap

    return wrap(encode_bundle([Record(v) for v in values], default_timestamp=T0))


def tank_values(plog):
    """Every value of a tank-format partition, across segments."""
    from logway.codecs.tank import decode_chunk

    out, offset = [], plog.log_start_offset
    while (rng := plog.read(offset, 1 << 20)) is not None:
        out += [r.value for r in decode_chunk(rng.read(), rng.first_offset + 1).records]
        offset = rng.end_offset
    return out
