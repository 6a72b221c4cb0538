"""`logway bench floor` (bench/floor.py): a minimal relay process of each kind (bare epoll, trio) copies the
client's messages from one connection to the other and the benchmark reports their round trips; no timing is
asserted."""

from __future__ import annotations

import subprocess
import sys

import pytest

from logway.bench.floor import MODES, bench_floor


@pytest.mark.parametrize("mode", MODES)
def test_each_relay_carries_every_message(mode):
    rtts = bench_floor(mode, samples=30, warmup=3, gap_ms=0.2)
    assert len(rtts) == 30
    assert rtts == sorted(rtts) and rtts[0] > 0


def test_the_command_reports_both_relays_and_refuses_unknown_ones():
    out = subprocess.run([sys.executable, "-m", "logway.cli", "bench", "floor", "--samples", "10", "--warmup", "1"],
                         capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    assert "epoll  relay: p50" in out.stdout and "trio   relay: p50" in out.stdout
    bad = subprocess.run([sys.executable, "-m", "logway.cli", "bench", "floor", "--modes", "uring"],
                         capture_output=True, text=True, timeout=60)
    assert bad.returncode != 0 and "--modes takes epoll, trio" in bad.stderr
