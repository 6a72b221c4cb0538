"""A full disk: appends are refused with each protocol's error (never acknowledged), the log stays consistent,
and the gateway accepts writes again by itself once space returns. Uses a small tmpfs mounted for the test
(needs root, as in CI; skipped with the reason otherwise)."""

from __future__ import annotations

import os
import subprocess

import pytest
import trio

from logway.codecs import native as nv
from logway.codecs.records import Record

from .conftest import AsyncNative, running_gateway


@pytest.fixture
def small_disk(tmp_path):
    mount = tmp_path / "disk"
    mount.mkdir()
    done = subprocess.run(["mount", "-t", "tmpfs", "-o", "size=3m", "tmpfs", str(mount)], capture_output=True)
    if done.returncode != 0:
        pytest.skip(f"cannot mount a small tmpfs here ({done.stderr.decode().strip() or 'not root'})")
    try:
        yield mount
    finally:
        subprocess.run(["umount", "-l", str(mount)], capture_output=True)


async def test_disk_full_refuses_produces_and_recovers_when_space_returns(small_disk):
    ballast = small_disk / "ballast"
    data = small_disk / "data"
    async with running_gateway(data, "storage.flush=always") as gw:
        c = await AsyncNative.connect(gw)
        await c.request(nv.CreateTopicRequest("full", 1))
        with open(ballast, "wb") as f:  # leave only a little room
            f.write(b"\0" * (2 * 1024 * 1024))
        acked, errors = [], []
        for i in range(200):
            resp = await c.request(nv.ProduceRequest("full", 0, [Record(b"%05d" % i + b"x" * 20_000)]))
            if isinstance(resp, nv.ErrorResponse):
                errors.append(resp.message)
                if len(errors) >= 3:
                    break
            else:
                acked.append((resp.offsets[0], i))
        assert acked and errors, "the disk never filled up"
        assert all("No space left on device" in e for e in errors), errors
        plog = gw.engine.partition("full", 0)
        assert plog.log_end_offset == len(acked)  # nothing half-written, nothing acknowledged that is missing
        os.unlink(ballast)  # space returns
        again = await c.request(nv.ProduceRequest("full", 0, [Record(b"after")]))
        assert again == nv.ProduceResponse([len(acked)])
        fetched = []
        offset = 0
        while offset <= len(acked):
            resp = await c.request(nv.FetchRequest("full", 0, offset, 1 << 20))
            fetched += resp.records
            offset = resp.next_offset
        assert [r.offset for r in fetched] == list(range(len(acked) + 1))
        assert [r.value[:5] for r in fetched[:-1]] == [b"%05d" % i for _, i in acked]
        await c.aclose()
    async with running_gateway(data) as gw:  # and it reopens cleanly
        assert gw.engine.partition("full", 0).log_end_offset == len(acked) + 1
        await trio.sleep(0)
