"""Side checksums of formats without their own (TANK bundles): written with each append, checked by recovery, rebuilt
for old partitions, and an unverifiable segment emptied."""

from __future__ import annotations

import os

import pytest

from logway.codecs.records import Record
from logway.codecs.tank import encode_bundle, wrap

from logway.storage.partition import CHECKSUMMED

from .helpers import T0, batch, bundle, tank_engine, tank_values


def test_tank_segments_keep_a_crc_per_bundle(tmp_path):
    from crc32c import crc32c
    from logway.storage.checksums import ENTRY as CRC_ENTRY

    eng = tank_engine(tmp_path)
    plog = eng.create_topic("t", 1, {"format": "tank"}).partitions[0]
    bundles = [bundle(b"a"), bundle(b"bb", b"cc"), bundle(b"d" * 300)]
    for b in bundles:
        plog.append(b)
    seg = plog.segments[-1]
    with open(seg.checksums.path, "rb") as f:
        entries = list(CRC_ENTRY.iter_unpack(f.read()))
    positions = [0, len(bundles[0]), len(bundles[0]) + len(bundles[1])]
    assert entries == [(p, crc32c(b)) for p, b in zip(positions, bundles)]
    kafka = eng.create_topic("k", 1).partitions[0]
    kafka.append(batch(1))
    assert kafka.segments[-1].checksums is None  # Kafka batches carry their own CRC
    assert not os.path.exists(kafka.segments[-1].log_path[:-4] + ".checksums")
    eng.close()


@pytest.mark.parametrize("damage", ["bundle-without-checksum", "sparse-bundle-without-checksum", "checksum-mismatch",
                                    "checksum-file-torn"])
def test_recovery_cuts_a_tank_bundle_its_checksum_does_not_vouch_for(tmp_path, damage):
    """A sparse bundle names its own first offset: cut, it must not move the log end there (the log end is what
    a Kafka ListOffsets answers)."""

    eng = tank_engine(tmp_path)
    plog = eng.create_topic("t", 1, {"format": "tank"}).partitions[0]
    plog.append(bundle(b"acked-1"))
    plog.append(bundle(b"acked-2"))
    seg = plog.segments[-1]
    log_path, crc_path = seg.log_path, seg.checksums.path
    good = seg.size
    if damage == "bundle-without-checksum":
        extra = bundle(b"data reached the disk, its checksum did not")
    elif damage == "sparse-bundle-without-checksum":
        extra = wrap(encode_bundle([Record(b"garbage")], default_timestamp=T0, sparse_seqs=[2**63 - 9]))
    else:
        plog.append(bundle(b"the last one"))
    eng.close(clean=False)
    if damage.endswith("bundle-without-checksum"):
        with open(log_path, "ab") as f:  # a whole, well-formed bundle: only the missing checksum betrays it
            f.write(extra)
    elif damage == "checksum-mismatch":
        with open(log_path, "r+b") as f:  # same length, different bytes: a plausible garbage bundle
            f.seek(good)
            data = bytearray(f.read())
            data[-1] ^= 0x20
            f.seek(good)
            f.write(data)
    else:
        os.truncate(crc_path, os.path.getsize(crc_path) - 3)
    damaged_size = os.path.getsize(log_path)
    eng = tank_engine(tmp_path)
    plog = eng.partition("t", 0)
    assert tank_values(plog) == [b"acked-1", b"acked-2"]
    assert plog.log_end_offset == 2 and plog.recovery.truncated_bytes == damaged_size - good > 0
    assert os.path.getsize(crc_path) == 2 * 8
    plog.append(bundle(b"after"))
    assert tank_values(plog) == [b"acked-1", b"acked-2", b"after"]
    eng.close()


def test_a_tank_partition_from_an_older_logway_gets_its_checksums_rebuilt(tmp_path, caplog):
    eng = tank_engine(tmp_path, segment_bytes=1024)
    plog = eng.create_topic("t", 1, {"format": "tank"}).partitions[0]
    while len(plog.segments) < 3:
        plog.append(bundle(b"x" * 100))
    want = tank_values(plog)
    n = plog.log_end_offset
    eng.close()
    pdir = os.path.join(tmp_path, "topics", "t", "0")
    for name in os.listdir(pdir):
        if name.endswith(".checksums") or name == CHECKSUMMED:  # what an older logway left
            os.unlink(os.path.join(pdir, name))
    eng = tank_engine(tmp_path, segment_bytes=1024)
    plog = eng.partition("t", 0)
    assert plog.log_end_offset == n and plog.recovery.truncated_bytes == 0
    assert os.path.exists(os.path.join(pdir, CHECKSUMMED))  # from now on, a missing checksum file is not legacy
    assert sorted(n for n in os.listdir(pdir) if n.endswith(".checksums")) == sorted(
        n[:-4] + ".checksums" for n in os.listdir(pdir) if n.endswith(".log"))
    assert "rebuilding it from the data" in caplog.text
    eng.close(clean=False)
    eng = tank_engine(tmp_path, segment_bytes=1024)  # and the rebuilt checksums vouch for the data
    assert eng.partition("t", 0).log_end_offset == n and eng.partition("t", 0).recovery.truncated_bytes == 0
    assert tank_values(eng.partition("t", 0)) == want and len(want) == n
    eng.close()


def test_a_new_tank_segment_whose_checksum_file_never_reached_the_disk_is_emptied(tmp_path, caplog):
    eng = tank_engine(tmp_path, segment_bytes=1024)
    plog = eng.create_topic("t", 1, {"format": "tank"}).partitions[0]
    while len(plog.segments) < 2:
        plog.append(bundle(b"y" * 100))
    frozen_end = plog.segments[0].next_offset
    active = plog.segments[-1]
    eng.close(clean=False)
    os.unlink(active.checksums.path)  # its name was never synced; the data file's was (or persisted anyway)
    eng = tank_engine(tmp_path, segment_bytes=1024)
    plog = eng.partition("t", 0)
    assert plog.log_end_offset == frozen_end and plog.recovery.truncated_bytes == active.size
    assert "cannot be verified" in caplog.text
    eng.close()


@pytest.mark.parametrize("seq", [2**63 + 5, 2**32 + 7])
def test_a_rebuild_never_accepts_a_bundle_whose_offsets_no_append_could_have_made(tmp_path, caplog, seq):
    """A rebuild trusts the data, but not past the rules appends keep: a sparse bundle whose seq is beyond int64
    (no Kafka client could be told it), or beyond what the segment's u32 index can address, is garbage."""

    eng = tank_engine(tmp_path)
    plog = eng.create_topic("t", 1, {"format": "tank"}).partitions[0]
    plog.append(bundle(b"kept-1", b"kept-2"))
    seg = plog.segments[-1]
    good = seg.size
    eng.close(clean=False)
    os.unlink(seg.checksums.path)  # an older logway's partition: rebuilt from the data
    os.unlink(os.path.join(plog.directory, CHECKSUMMED))
    with open(seg.log_path, "ab") as f:
        f.write(wrap(encode_bundle([Record(b"garbage")], default_timestamp=T0, sparse_seqs=[seq])))
    damaged_size = os.path.getsize(seg.log_path)
    eng = tank_engine(tmp_path)
    plog = eng.partition("t", 0)
    assert plog.log_end_offset == 2 and plog.recovery.truncated_bytes == damaged_size - good > 0
    assert os.path.getsize(seg.log_path) == good
    assert tank_values(plog) == [b"kept-1", b"kept-2"]
    assert "outside the segment" in caplog.text
    eng.close()


def test_a_partition_marked_checksummed_never_takes_a_missing_checksum_file_for_an_older_logway(tmp_path, caplog):
    """Once a partition is marked, its first segment without a checksum file (its name lost to a power cut while
    the data file's survived) is emptied like any other, not rebuilt from data nothing vouches for."""
    eng = tank_engine(tmp_path)
    eng.create_topic("k", 1)  # Kafka batches carry their own CRC: no marker
    plog = eng.create_topic("t", 1, {"format": "tank"}).partitions[0]
    pdir = plog.directory
    assert os.path.exists(os.path.join(pdir, CHECKSUMMED))
    assert not os.path.exists(os.path.join(eng.partition("k", 0).directory, CHECKSUMMED))
    plog.append(bundle(b"unverifiable"))
    seg = plog.segments[0]
    eng.close(clean=False)
    os.unlink(seg.checksums.path)
    eng = tank_engine(tmp_path)
    plog = eng.partition("t", 0)
    assert plog.log_end_offset == 0 and plog.recovery.truncated_bytes > 0
    assert "cannot be verified" in caplog.text and "older logway" not in caplog.text
    eng.close()
