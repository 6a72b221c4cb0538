"""Startup on a damaged data directory never crashes the gateway: each kind of damage is truncated, rebuilt or
quarantined with a log line naming it, the good data before it stays readable, and the gateway serves.

Real `logway serve` processes (bench/launcher.py) with stderr captured. One clean-shutdown data directory is
built once; damage confined to one topic is applied to its own topic of one shared copy (one gateway start for
all of them, then a second start that must find nothing left to repair); damage to the data directory itself
gets a copy and a gateway of its own. Recovery after a clean shutdown is the demanding case: it trusts the most
(only the tail of each segment is checksummed), so a segment replaced by garbage must still be noticed.
"""

from __future__ import annotations

import os
import random
import re
import shutil
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable

import pytest

from logway.bench.launcher import GatewayProcess
from logway.clients.errors import NativeError
from logway.clients.native import NativeClient
from logway.storage.index import ENTRY, TIME_ENTRY

from ..kafka_wire import KafkaWireClient

#: Small segments and a dense index, so one partition has six segments and every index holds several entries.
SETTINGS = ("storage.segment_bytes=4096", "storage.index_interval_bytes=512")
BATCHES, PER_BATCH, SMALL = 40, 5, 7  # partition 0: 200 records in 6 segments of 35; partition 1: 7 records
GROUP, COMMITTED = "g", 17
INTACT, SPARE = "intact", "spare"  # undamaged topics: the control, and a victim for data-directory cases


def value(partition: int, offset: int) -> bytes:
    if partition == 0:
        return b"p0-%03d-%d-" % divmod(offset, PER_BATCH) + b"x" * 80
    return b"p1-%d" % offset


def seg(topic: str, base: int, ext: str = "log", partition: int = 0) -> str:
    return f"topics/{topic}/{partition}/{base:020d}.{ext}"


def start(data: Path, stderr) -> GatewayProcess:
    return GatewayProcess(str(data), *SETTINGS, run_dir=f"{data}.run", stderr=stderr, start_timeout=20)


# -- damage ------------------------------------------------------------------------------------------------------

def garbage(data: Path, rel: str, size: int | None = None) -> None:
    path = data / rel
    size = path.stat().st_size if size is None else size
    path.write_bytes(random.Random(rel).randbytes(size))


def write(data: Path, rel: str, content: bytes = b"not ours\n") -> None:
    path = data / rel
    if path.is_dir():
        shutil.rmtree(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(content)


def make_dir(data: Path, rel: str) -> None:
    path = data / rel
    if path.exists():
        path.unlink()
    (path / "inside").mkdir(parents=True)


def index_past_data(data: Path, topic: str) -> None:
    path = data / seg(topic, 70, "index")
    entries = path.read_bytes()
    path.write_bytes(entries[:-ENTRY.size] + ENTRY.pack(30, 99_999))


# -- cases -------------------------------------------------------------------------------------------------------

@dataclass(frozen=True)
class Case:
    name: str
    damage: Callable[[Path, str], object]
    #: log lines that must be there: each a tuple of substrings ("{t}" = the topic) of one WARNING/ERROR line
    logs: tuple[tuple[str, ...], ...]
    #: partition -> how many leading records of the undamaged partition stay readable; None: topic quarantined
    keep: dict[int, int] | None = field(default_factory=lambda: {0: BATCHES * PER_BATCH, 1: SMALL})
    #: what the repair left on disk: check(data, topic, golden)
    after: Callable[[Path, str, Path], object] | None = None
    committed: int | None = COMMITTED


def same_file(rel: str) -> Callable[[Path, str, Path], None]:
    """The rebuilt file is byte for byte what the undamaged directory held."""
    def check(data: Path, topic: str, golden: Path) -> None:
        name = rel.format(t=topic)
        assert (data / name).read_bytes() == (golden / name).read_bytes(), name
    return check


def quarantined(*labels: str) -> Callable[[Path, str, Path], None]:
    def check(data: Path, topic: str, golden: Path) -> None:
        held = os.listdir(data / "quarantine")
        for label in labels:
            label = label.format(t=topic)
            assert any(re.fullmatch(re.escape(label) + r"\.[0-9a-f]{8}", q) for q in held), (label, held)
    return check


def emptied(rel: str, then: Callable | None = None) -> Callable[[Path, str, Path], None]:
    def check(data: Path, topic: str, golden: Path) -> None:
        assert (data / rel.format(t=topic)).stat().st_size == 0
        if then is not None:
            then(data, topic, golden)
    return check


def left_alone(rel: str) -> Callable[[Path, str, Path], None]:
    def check(data: Path, topic: str, golden: Path) -> None:
        assert (data / rel.format(t=topic)).exists()
    return check


DROPPED_AFTER_70 = quarantined(*(f"{{t}}-0.{b:020d}.{ext}" for b in (105, 140, 175) for ext in ("log", "index",
                                                                                                   "timeindex")))
FULL = {0: BATCHES * PER_BATCH, 1: SMALL}

#: Damage confined to one topic: all of these share one data directory and one gateway start.
TOPIC_CASES = [
    Case("garbage_segment", lambda d, t: garbage(d, seg(t, 175)),
         logs=((seg("{t}", 175), "truncating"),), keep={0: 175, 1: SMALL}, after=emptied(seg("{t}", 175))),
    Case("garbage_middle_segment", lambda d, t: garbage(d, seg(t, 70)),
         logs=((seg("{t}", 70), "truncating"), ("topics/{t}/0", "dropping 3 later segment(s)"),
               (seg("{t}", 105), "quarantine/{t}-0.")),
         keep={0: 70, 1: SMALL}, after=emptied(seg("{t}", 70), DROPPED_AFTER_70)),
    Case("garbage_only_segment", lambda d, t: garbage(d, seg(t, 0, partition=1)),
         logs=((seg("{t}", 0, partition=1), "truncating"),), keep={0: 200, 1: 0},
         after=emptied(seg("{t}", 0, partition=1))),
    Case("truncated_index", lambda d, t: os.truncate(d / seg(t, 70, "index"), 21),
         logs=((seg("{t}", 70, "index"), "rebuilding"),), after=same_file(seg("{t}", 70, "index"))),
    Case("index_past_data", index_past_data,
         logs=((seg("{t}", 70, "index"), "rebuilding"),), after=same_file(seg("{t}", 70, "index"))),
    Case("garbage_time_index", lambda d, t: garbage(d, seg(t, 70, "timeindex"), 10 * TIME_ENTRY.size),
         logs=((seg("{t}", 70, "timeindex"), "rebuilding"),), after=same_file(seg("{t}", 70, "timeindex"))),
    Case("zero_length_segment", lambda d, t: os.truncate(d / seg(t, 70), 0),
         logs=((seg("{t}", 70, ""),), ("topics/{t}/0", "dropping 3 later segment(s)")),
         keep={0: 70, 1: SMALL}, after=DROPPED_AFTER_70),
    Case("unknown_file_in_topic_dir", lambda d, t: write(d, f"topics/{t}/notes.txt"),
         logs=(("topics/{t}: ignoring unknown entry notes.txt",),), after=left_alone("topics/{t}/notes.txt")),
    Case("unknown_file_in_partition_dir", lambda d, t: write(d, f"topics/{t}/0/backup.bak"),
         logs=(("topics/{t}/0: ignoring unknown file backup.bak",),), after=left_alone("topics/{t}/0/backup.bak")),
    Case("unparsable_partition_dir", lambda d, t: make_dir(d, f"topics/{t}/zero"),
         logs=(("topics/{t}: ignoring unknown entry zero",),), after=left_alone("topics/{t}/zero")),
    Case("topic_without_metadata", lambda d, t: os.unlink(d / f"topics/{t}/topic.json"),
         logs=(("topics/{t} (", "quarantine/{t}."),), keep=None, after=quarantined("{t}"), committed=None),
    Case("metadata_invalid_json", lambda d, t: write(d, f"topics/{t}/topic.json", b'{"name": "x", "parti'),
         logs=(("topics/{t} (", "quarantine/{t}."),), keep=None, after=quarantined("{t}"), committed=None),
    Case("metadata_not_an_object", lambda d, t: write(d, f"topics/{t}/topic.json", b"[1, 2]"),
         logs=(("topics/{t} (", "quarantine/{t}."),), keep=None, after=quarantined("{t}"), committed=None),
    Case("partition_is_a_file", lambda d, t: write(d, f"topics/{t}/1"),
         logs=(("topics/{t}/1:", "quarantine/{t}-1."),), keep={0: 200, 1: 0}, after=quarantined("{t}-1")),
    Case("segment_is_a_dir", lambda d, t: make_dir(d, seg(t, 900)),
         logs=((seg("{t}", 900), "quarantine/{t}-0."),), after=quarantined(f"{{t}}-0.{900:020d}.log")),
    Case("index_is_a_dir", lambda d, t: make_dir(d, seg(t, 70, "index")),
         logs=((seg("{t}", 70, "index"), "quarantine/{t}-0."),), after=same_file(seg("{t}", 70, "index"))),
]


def _stale_lock(d: Path, t: str) -> None:
    os.unlink(d / ".clean_shutdown")  # the owner died: no clean-shutdown marker
    write(d, ".lock", b"999999\n")


def _offsets_tail(d: Path, t: str) -> None:
    with open(d / "offsets/offsets.log", "ab") as f:
        f.write(random.Random(1).randbytes(100))


def _producer_ids_continue_above_the_floor(data: Path, topic: str, golden: Path, gw: GatewayProcess) -> None:
    with KafkaWireClient(*gw.addresses["kafka"]) as k:
        assert k.init_producer_id()[0] >= 10**15  # past anything a damaged file may have handed out


#: Damage to the data directory itself: each gets a copy and a gateway of its own; the survivor checked is INTACT.
DATA_DIR_CASES = [
    Case("unknown_files_in_data_dir", lambda d, t: (write(d, "notes.txt"), write(d, "offsets/extra")),
         logs=(("ignoring unknown entry notes.txt",), ("offsets", "ignoring unknown file extra")),
         after=left_alone("notes.txt")),
    Case("offset_store_garbage_tail", _offsets_tail, logs=(("offsets", "dropped 100 bytes"),)),
    Case("offset_store_not_an_offset_log", lambda d, t: garbage(d, "offsets/offsets.log"),
         logs=(("offsets", "quarantine/offsets."),), after=quarantined("offsets"), committed=None),
    Case("offsets_dir_is_a_file", lambda d, t: write(d, "offsets"),
         logs=(("offsets:", "quarantine/offsets."),), after=quarantined("offsets"), committed=None),
    Case("stale_lock_file", _stale_lock, logs=((".lock", "999999"),)),
    Case("lock_file_is_a_dir", lambda d, t: make_dir(d, ".lock"),
         logs=((".lock:", "quarantine/.lock."),), after=quarantined(".lock")),
    Case("clean_marker_is_a_dir", lambda d, t: make_dir(d, ".clean_shutdown"),
         logs=((".clean_shutdown:", "quarantine/.clean_shutdown."),), after=quarantined(".clean_shutdown")),
    Case("scratch_dirs_are_files", lambda d, t: (write(d, "tmp"), write(d, "trash")),
         logs=(("/tmp:", "quarantine/tmp."), ("/trash:", "quarantine/trash.")), after=quarantined("tmp", "trash")),
    Case("topics_dir_is_a_file", lambda d, t: write(d, "topics"),
         logs=(("/topics:", "quarantine/topics."),), keep=None, after=quarantined("topics"), committed=None),
    Case("quarantine_is_a_file", lambda d, t: (write(d, "quarantine"), os.unlink(d / f"topics/{SPARE}/topic.json")),
         logs=(("quarantine is not a directory",), (f"topics/{SPARE} (", f"quarantine/{SPARE}.")),
         after=quarantined(SPARE)),
    Case("producer_ids_garbage", lambda d, t: write(d, "producer_ids", b"garbage"),
         logs=(("producer_ids", "quarantine/producer_ids."),), after=quarantined("producer_ids")),
]
_EXTRA = {"producer_ids_garbage": _producer_ids_continue_above_the_floor}


# -- fixtures ----------------------------------------------------------------------------------------------------

@pytest.fixture(scope="module")
def golden(tmp_path_factory) -> Path:
    """A clean-shutdown data directory: every case's topic, INTACT and SPARE, each with partition 0 in six
    segments and partition 1 in one, and a committed offset per topic."""
    data = tmp_path_factory.mktemp("corrupt") / "golden"
    with start(data, None) as gw, NativeClient(*gw.native) as c:
        for topic in [c.name for c in TOPIC_CASES] + [INTACT, SPARE]:
            c.create_topic(topic, 2)
            for i in range(BATCHES):
                c.produce(topic, 0, [value(0, i * PER_BATCH + j) for j in range(PER_BATCH)])
            c.produce(topic, 1, [value(1, j) for j in range(SMALL)])
            c.commit(topic, 0, GROUP, COMMITTED)
    assert gw.proc.returncode == 0 and (data / ".clean_shutdown").exists()
    assert len(list((data / "topics" / INTACT / "0").glob("*.log"))) == 6
    return data


@dataclass
class Running:
    gw: GatewayProcess
    data: Path
    log_path: Path

    def log(self) -> str:
        return self.log_path.read_text(errors="replace")


@pytest.fixture(scope="module")
def shared(golden, tmp_path_factory):
    """One copy of the golden directory with every TOPIC_CASES damage applied, each to its own topic."""
    data = tmp_path_factory.mktemp("shared") / "data"
    shutil.copytree(golden, data)
    for case in TOPIC_CASES:
        case.damage(data, case.name)
    log_path = data.parent / "gateway.log"
    with open(log_path, "wb") as stderr:
        gw = start(data, stderr)
    try:
        yield Running(gw, data, log_path)
    finally:
        gw.stop()


# -- checks ------------------------------------------------------------------------------------------------------

def read_all(c: NativeClient, topic: str, partition: int) -> list[tuple[int, bytes]]:
    end = c.describe_topic(topic).partitions[partition].log_end_offset
    out, offset = [], 0
    while offset < end:
        resp = c.fetch(topic, partition, offset, 1 << 20)
        assert resp.records, (topic, partition, offset, end)
        out += [(r.offset, r.value) for r in resp.records]
        offset = resp.next_offset
    return out


def check(case: Case, run: Running, topic: str, golden: Path) -> None:
    log = run.log()
    assert "Traceback" not in log, log
    problems = [line for line in log.splitlines() if " WARNING " in line or " ERROR " in line]
    for wanted in case.logs:
        wanted = tuple(w.format(t=topic) for w in wanted)
        assert any(all(w in line for w in wanted) for line in problems), (wanted, problems)
    if case.after is not None:
        case.after(run.data, topic, golden)
    extra = _EXTRA.get(case.name)
    if extra is not None:
        extra(run.data, topic, golden, run.gw)
    with NativeClient(*run.gw.native) as c:
        if case.keep is None:
            with pytest.raises(NativeError, match="not found"):
                c.describe_topic(topic)
            topic, keep = f"{topic}-new", {0: 0}  # the gateway still serves: a new topic works
            c.create_topic(topic, 1)
        else:
            keep = case.keep
            for partition, n in keep.items():  # the good data before the damage, exactly
                assert read_all(c, topic, partition) == [(o, value(partition, o)) for o in range(n)], partition
            assert c.committed(topic, 0, GROUP) == case.committed
        for partition, n in keep.items():  # and it takes new records right after them
            assert c.produce(topic, partition, [b"new", b"newer"]) == [n, n + 1]
            assert read_all(c, topic, partition)[n:] == [(n, b"new"), (n + 1, b"newer")]


@pytest.mark.parametrize("case", TOPIC_CASES, ids=lambda c: c.name)
def test_damaged_topic(case, shared, golden):
    check(case, shared, case.name, golden)


@pytest.mark.parametrize("case", DATA_DIR_CASES, ids=lambda c: c.name)
def test_damaged_data_dir(case, golden, tmp_path):
    data = tmp_path / "data"
    shutil.copytree(golden, data)
    case.damage(data, INTACT)
    log_path = tmp_path / "gateway.log"
    with open(log_path, "wb") as stderr:
        gw = start(data, stderr)
    try:
        check(case, Running(gw, data, log_path), INTACT, golden)
    finally:
        assert gw.stop() == 0


def test_second_start_finds_nothing_to_repair(shared, golden):
    """Every repair of the shared directory was made on disk: a restart truncates, rebuilds and moves nothing,
    and every topic keeps what the first start served."""
    with NativeClient(*shared.gw.native) as c:
        before = {(t.name, p): c.describe_topic(t.name).partitions[p].log_end_offset
                  for t in c.list_topics() for p in range(t.partitions)}
    assert shared.gw.stop() == 0
    log_path = shared.data.parent / "second.log"
    with open(log_path, "wb") as stderr, start(shared.data, stderr) as gw, NativeClient(*gw.native) as c:
        after = {(t.name, p): c.describe_topic(t.name).partitions[p].log_end_offset
                 for t in c.list_topics() for p in range(t.partitions)}
    assert after == before
    log = log_path.read_text(errors="replace")
    repairs = [line for line in log.splitlines() if "storage opened" not in line  # (the summary: below)
               and re.search(r"truncat|rebuild|dropp|moved to|quarantine|did not shut down", line)]
    assert not repairs and "Traceback" not in log, repairs
    assert "truncated 0 bytes, dropped 0 segment(s), rebuilt the indexes of 0 segment(s)" in log


def test_one_recovery_summary_line_per_start(shared, golden, tmp_path):
    """Every start logs one line saying what was opened and what recovery did (here: the damaged directory)."""
    import re

    lines = [line for line in shared.log().splitlines() if "storage opened" in line]
    assert len(lines) == 1, lines
    m = re.search(r"storage opened \((clean|unclean) start\): (\d+) topic\(s\), (\d+) partition\(s\); recovery "
                  r"truncated (\d+) bytes, dropped (\d+) segment\(s\), rebuilt the indexes of (\d+) segment\(s\)",
                  lines[0])
    assert m, lines[0]
    topics, partitions, truncated, rebuilt = int(m[2]), int(m[3]), int(m[4]), int(m[6])
    assert topics >= 2 and partitions == 2 * topics and truncated > 0 and rebuilt > 0
    # an undamaged copy: a clean start with nothing to do
    data = tmp_path / "clean"
    shutil.copytree(golden, data)
    log_path = tmp_path / "clean.log"
    with open(log_path, "wb") as stderr:
        start(data, stderr).stop()
    [line] = [line for line in log_path.read_text().splitlines() if "storage opened" in line]
    assert "(clean start)" in line and "truncated 0 bytes, dropped 0 segment(s), rebuilt the indexes of 0" in line
