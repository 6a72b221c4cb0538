"""The engine's budget of open segment files (`logway.storage.openfiles`): open files follow what is used, never
the number of segments or partitions; a file let go is never closed under a reader that holds it; running out of
descriptors sheds half and lowers the budget. And the blocks segments reserve ahead on disk, which follow what a
partition has written and are given back when a crash left them."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import textwrap

from logway.storage import EngineLimits, LogEngine, TopicConfig
from logway.storage.files import preallocate

from .helpers import FORMATS, Clock, batch, values

MiB = 1 << 20


def open_in(directory) -> list[str]:
    """This process's descriptors naming files under `directory`."""
    found = []
    for fd in os.listdir("/proc/self/fd"):
        try:
            target = os.readlink(f"/proc/self/fd/{fd}")
        except OSError:
            continue
        if target.startswith(str(directory)):
            found.append(target)
    return found


def engine(path, budget: int, **cfg) -> LogEngine:
    return LogEngine(path, FORMATS, TopicConfig(**cfg), clock=Clock(),
                     limits=EngineLimits(open_segment_files=budget))


def test_many_segments_keep_at_most_the_budget_open(tmp_path):
    eng = engine(tmp_path, 20, segment_bytes=1024)
    plog = eng.create_topic("t", 1).partitions[0]
    for i in range(300):
        plog.append(batch(1, size=900, tag=f"{i}-"))
    assert len(plog.segments) > 250
    topics = tmp_path / "topics"
    assert len(open_in(topics)) <= 20 and len(eng.files) <= 20
    assert len(values(plog)) == 1  # (one batch per read: the first segment)
    offset = 0
    while offset < plog.log_end_offset:  # every segment read: its data file and mapped index opened again
        offset = plog.read(offset, 1 << 20).end_offset
    assert len(open_in(topics)) <= 20 and eng.files.let_go > 300
    eng.close()
    assert open_in(topics) == []


def test_a_slice_of_a_file_let_go_stays_readable_until_dropped(tmp_path):
    eng = engine(tmp_path, 16, segment_bytes=1024)
    plog = eng.create_topic("t", 1).partitions[0]
    for i in range(100):
        plog.append(batch(1, size=900, tag=f"{i}-"))
    first = plog.read(0, 1 << 20)
    expected = first.read()
    path = first.segment.log_path
    for offset in range(1, plog.log_end_offset):  # the pool lets the first segment's file go meanwhile
        plog.read(offset, 1)
    assert first.file not in eng.files
    assert open_in(path) == [path]  # held by the slice alone
    assert os.pread(first.fileno(), first.length, first.position) == expected
    a, b = socket.socketpair()
    with a, b:
        assert os.sendfile(a.fileno(), first.fileno(), first.position, first.length) == first.length
        assert b.recv(1 << 20) == expected
    del first
    assert open_in(path) == []  # closed with the last holder


def test_a_slice_of_a_segment_retention_deleted_stays_readable_and_then_goes(tmp_path):
    clock = Clock()
    eng = LogEngine(tmp_path, FORMATS, TopicConfig(segment_bytes=1024, retention_ms=1000), clock=clock,
                    limits=EngineLimits(open_segment_files=16))
    plog = eng.create_topic("t", 1).partitions[0]
    for i in range(10):
        plog.append(batch(1, size=900, tag=f"{i}-"))
    held = plog.read(0, 1 << 20)
    expected = held.read()
    clock.ms += 10 * 24 * 3600 * 1000
    assert plog.enforce_retention() == 9 and not os.path.exists(held.segment.log_path)
    assert held.read() == expected  # the unlinked file, through the slice's descriptor
    del held
    assert [f for f in open_in(tmp_path) if f.endswith("(deleted)")] == []
    eng.close()


def test_running_out_of_descriptors_sheds_half_and_lowers_the_budget(tmp_path):
    """In a process whose descriptor limit leaves fewer than the budget: opening segments past the limit lets half
    of the open ones go, lowers the budget to what is left, logs it, and goes on."""
    script = textwrap.dedent(f"""
        import json, os, resource
        from logway.storage import EngineLimits, LogEngine, TopicConfig
        from logway.codecs.kafka.records import KafkaFormat, encode_batch
        from logway.codecs.records import Record
        eng = LogEngine({str(tmp_path)!r}, {{"kafka": KafkaFormat()}}, TopicConfig(segment_bytes=1024),
                        limits=EngineLimits(open_segment_files=1000))
        plog = eng.create_topic("t", 1).partitions[0]
        used = len(os.listdir("/proc/self/fd"))
        resource.setrlimit(resource.RLIMIT_NOFILE, (used + 60, used + 60))
        for i in range(200):
            plog.append(encode_batch([Record(b"x" * 900)], default_timestamp=0))
        offset = 0
        while offset < plog.log_end_offset:
            offset = plog.read(offset, 1 << 20).end_offset
        print(json.dumps({{"limit": eng.files.limit, "held": len(eng.files), "end": plog.log_end_offset}}))
    """)
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    result = json.loads(done.stdout)
    assert result["end"] == 200 and result["held"] <= result["limit"] < 60
    assert "out of file descriptors opening" in done.stderr and "at most" in done.stderr


def test_blocks_are_reserved_as_a_partition_grows(tmp_path):
    """A partition that holds a few bytes reserves a few bytes; one that grows reserves about as much again as it
    holds (up to 16 MiB)."""
    eng = engine(tmp_path, 64)
    tiny, grown = eng.create_topic("t", 2).partitions
    tiny.append(batch(1, size=1))
    tiny_log = tiny.segments[-1].log_path
    assert os.stat(tiny_log).st_blocks * 512 <= 8192
    for i in range(40):
        grown.append(batch(1, size=64 * 1024, tag=f"{i}-"))
    seg = grown.segments[-1]
    allocated = os.stat(seg.log_path).st_blocks * 512
    assert seg.size < allocated <= 2 * seg.size + 64 * 1024
    eng.close()  # a clean close gives the reservation back
    assert os.stat(seg.log_path).st_blocks * 512 < seg.size + 8192


def test_blocks_a_crash_left_reserved_are_given_back_at_open(tmp_path):
    """The state a killed process leaves: blocks reserved past the end of an active segment. Opening the partition
    gives them back, the records untouched."""
    eng = engine(tmp_path, 64)
    plog = eng.create_topic("t", 1).partitions[0]
    plog.append(batch(3))
    path = plog.segments[-1].log_path
    eng.close()
    fd = os.open(path, os.O_RDWR)
    try:
        assert preallocate(fd, os.fstat(fd).st_size, 8 * MiB)
    finally:
        os.close(fd)
    assert os.stat(path).st_blocks * 512 > 8 * MiB
    eng = engine(tmp_path, 64)
    assert os.stat(path).st_blocks * 512 < 64 * 1024
    assert len(values(eng.partition("t", 0))) == 3
    eng.close()
