"""A real gateway process killed with SIGKILL in the middle of produce streams (flush: always): after each
restart every acknowledged record is present exactly once at its acknowledged offset, offsets are contiguous,
and committed offsets survive."""

from __future__ import annotations

import random
import threading
import time

from logway.bench.launcher import GatewayProcess
from logway.clients.native import NativeClient


def _producer(addr, tag, name, acked, stop, lock):
    rnd = random.Random(tag)
    seq = 0
    try:
        with NativeClient(*addr, timeout=10) as c:
            while not stop.is_set():
                n = rnd.randint(1, 20)
                payloads = [f"{tag}-{seq + i}".encode() for i in range(n)]
                offsets = c.produce("crash", 0, payloads)
                seq += n
                with lock:
                    for off, p in zip(offsets, payloads):
                        acked[off] = p
                c.commit("crash", 0, f"group-{name}", offsets[-1] + 1)
                with lock:
                    acked[("commit", name)] = offsets[-1] + 1
    except (OSError, ConnectionError):
        pass  # the gateway was killed under us


def _read_all(addr):
    out = []
    with NativeClient(*addr) as c:
        end = c.describe_topic("crash").partitions[0].log_end_offset
        offset = 0
        while offset < end:
            resp = c.fetch("crash", 0, offset, 1 << 20)
            out += [(r.offset, r.value) for r in resp.records]
            offset = resp.next_offset
        commits = {name: c.committed("crash", 0, f"group-{name}") for name in range(3)}
    return out, commits


def test_kill_9_during_produce_streams_loses_nothing_acknowledged(tmp_path):
    data = str(tmp_path / "data")
    acked: dict = {}
    lock = threading.Lock()
    rnd = random.Random(7)
    cycles = 4
    for cycle in range(cycles):
        gw = GatewayProcess(data, "storage.flush=always", "log_level=ERROR")
        if cycle == 0:
            with NativeClient(*gw.native) as c:
                c.create_topic("crash", 1)
        else:
            records, commits = _read_all(gw.native)
            _check(records, acked, commits)
        stop = threading.Event()
        threads = [threading.Thread(target=_producer, args=(gw.native, f"{cycle}.{i}", i, acked, stop, lock))
                   for i in range(3)]
        for t in threads:
            t.start()
        time.sleep(rnd.uniform(0.3, 0.8))
        gw.kill()
        stop.set()
        for t in threads:
            t.join(15)
    gw = GatewayProcess(data, "log_level=ERROR")
    try:
        records, commits = _read_all(gw.native)
        _check(records, acked, commits)
        assert sum(1 for k in acked if isinstance(k, int)) > 100  # the test really produced
    finally:
        gw.stop()


def _check(records, acked, commits):
    offsets = [o for o, _ in records]
    assert offsets == list(range(len(offsets))), "offsets must be contiguous from 0"
    by_offset = dict(records)
    for off, payload in acked.items():
        if isinstance(off, int):
            assert by_offset.get(off) == payload, f"acknowledged record at {off} lost or changed"
    values = [v for _, v in records]
    assert len(values) == len(set(values)), "a record was stored twice"
    for key, committed in acked.items():
        if isinstance(key, tuple):
            assert commits[key[1]] is not None and commits[key[1]] >= committed
