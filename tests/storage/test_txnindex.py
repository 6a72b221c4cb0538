"""A partition's transactional writes (logway.storage.txnindex through PartitionLog): the last stable offset, aborted
ranges, markers, durability order, recovery that cuts entries whose batches were lost, and pruning."""

from __future__ import annotations

import os

from logway.storage import LogEngine, TopicConfig
from logway.storage.txnindex import ENTRY_SIZE, INDEX_NAME

from .helpers import FORMATS, Clock, bundle, batch, open_engine, tank_engine

PID, EPOCH = 7, 3


def index_path(plog):
    return os.path.join(plog.directory, INDEX_NAME)


def test_a_partition_without_transactions_has_no_index_file(tmp_path):
    eng = open_engine(tmp_path)
    plog = eng.create_topic("t", 1).partitions[0]
    plog.append(batch(3))
    plog.sync()
    assert not os.path.exists(index_path(plog))
    assert plog.last_stable_offset == plog.high_watermark == 3
    assert plog.aborted(0, 3) == []
    eng.close()


def test_open_transaction_holds_the_lso_and_commit_releases_it(tmp_path):
    eng = open_engine(tmp_path)
    plog = eng.create_topic("t", 1).partitions[0]
    plog.append(batch(2))                                   # 0-1 plain
    plog.append(batch(3), producer=(PID, EPOCH))           # 2-4 transactional
    plog.append(batch(1))                                   # 5 plain, after the open transaction
    assert plog.txns.open_transactions() == {PID: (EPOCH, 2)}
    assert plog.last_stable_offset == 2
    # a read bounded by the LSO stops before the transaction's first batch
    rng = plog.read(0, 1 << 20, until=plog.last_stable_offset)
    assert (rng.first_offset, rng.end_offset) == (0, 2)
    assert plog.read(2, 1 << 20, until=2) is None
    assert plog.end_transaction(PID, EPOCH, committed=True, marker=batch(1))  # the marker at 6
    assert plog.log_end_offset == 7
    assert plog.last_stable_offset == 7 and plog.aborted(0, 7) == []
    assert not plog.end_transaction(PID, EPOCH, committed=True, marker=batch(1))  # repeated: nothing written
    assert plog.log_end_offset == 7
    eng.close()


def test_abort_is_listed_with_its_exact_ranges(tmp_path):
    eng = open_engine(tmp_path)
    plog = eng.create_topic("t", 1).partitions[0]
    plog.append(batch(2), producer=(PID, EPOCH))   # 0-1
    plog.append(batch(2))                          # 2-3 another writer, inside the transaction's span
    plog.append(batch(2), producer=(PID, EPOCH))   # 4-5
    plog.end_transaction(PID, EPOCH, committed=False, marker=batch(1))  # 6
    [txn] = plog.aborted(0, plog.log_end_offset)
    assert (txn.producer_id, txn.first, txn.end, txn.ranges) == (PID, 0, 6, ((0, 1), (4, 5)))
    assert [o for o in range(7) if txn.covers(o)] == [0, 1, 4, 5]
    assert plog.aborted(7, 100) == [] and plog.aborted(6, 7) == [txn]  # the marker itself is in range
    assert plog.last_stable_offset == plog.log_end_offset
    eng.close()


def test_state_survives_a_clean_and_an_unclean_reopen(tmp_path):
    eng = open_engine(tmp_path)
    plog = eng.create_topic("t", 1).partitions[0]
    plog.append(batch(2), producer=(PID, EPOCH))
    plog.end_transaction(PID, EPOCH, committed=False, marker=batch(1))
    plog.append(batch(3), producer=(PID + 1, 0))   # still open at the stop
    eng.close()
    eng = open_engine(tmp_path)
    plog = eng.partition("t", 0)
    assert plog.txns.open_transactions() == {PID + 1: (0, 3)} and plog.last_stable_offset == 3
    assert [t.ranges for t in plog.aborted(0, 10)] == [((0, 1),)]
    plog.sync()
    eng.close(clean=False)
    eng = open_engine(tmp_path)
    plog = eng.partition("t", 0)
    assert plog.txns.open_transactions() == {PID + 1: (0, 3)}
    plog.end_transaction(PID + 1, 0, committed=True, marker=batch(1))
    assert plog.last_stable_offset == plog.log_end_offset == 7
    eng.close()


def test_entries_whose_batches_were_lost_are_cut_on_recovery(tmp_path):
    """The entry is written (and synced) before its batch: when recovery cuts the batch, the entry goes too."""
    eng = open_engine(tmp_path)
    plog = eng.create_topic("t", 1).partitions[0]
    plog.append(batch(2))
    plog.sync()
    log_size = plog.segments[-1].size
    plog.append(batch(3), producer=(PID, EPOCH))
    plog.sync()
    log_path = plog.segments[-1].log_path
    eng.close(clean=False)
    with open(log_path, "r+b") as f:  # the transactional batch never reached the disk
        f.truncate(log_size)
    eng = open_engine(tmp_path)
    plog = eng.partition("t", 0)
    assert plog.log_end_offset == 2
    assert plog.txns.open_transactions() == {} and plog.last_stable_offset == 2
    assert plog.txns.dropped == ENTRY_SIZE
    eng.close()


def test_a_torn_index_tail_is_cut(tmp_path):
    eng = open_engine(tmp_path)
    plog = eng.create_topic("t", 1).partitions[0]
    plog.append(batch(2), producer=(PID, EPOCH))
    plog.end_transaction(PID, EPOCH, committed=False, marker=batch(1))
    path = index_path(plog)
    eng.close()
    with open(path, "ab") as f:
        f.write(b"\x01garbage-half-an-entry")
    with open(path, "r+b") as f:  # and flip a byte of the END entry: its CRC no longer matches
        f.seek(ENTRY_SIZE + 20)
        byte = f.read(1)
        f.seek(ENTRY_SIZE + 20)
        f.write(bytes([byte[0] ^ 0xFF]))
    eng = open_engine(tmp_path)
    plog = eng.partition("t", 0)
    # the END entry is gone: the transaction is open again (the coordinator completes it at start)
    assert plog.txns.open_transactions() == {PID: (EPOCH, 0)}
    assert os.path.getsize(path) == ENTRY_SIZE
    eng.close()


def test_an_end_written_after_a_lost_batch_entry_is_kept(tmp_path):
    """An index written before each end was kept next to its marker could hold the END of a transaction after the
    DATA entry of a later batch (appended between the marker and the END). When a crash loses that batch, its
    entry describes nothing and is skipped; the END after it still counts (the transaction stayed ended), and the
    file is rewritten without the entry."""
    eng = open_engine(tmp_path)
    plog = eng.create_topic("t", 1).partitions[0]
    plog.append(batch(3), producer=(PID, EPOCH))                        # 0-2
    assert plog.end_transaction(PID, EPOCH, committed=True, marker=batch(1))  # marker at 3
    log_size = plog.segments[-1].size
    plog.append(batch(2), producer=(PID + 1, 0))                        # 4-5, another producer's
    plog.sync()
    log_path, path = plog.segments[-1].log_path, index_path(plog)
    eng.close(clean=False)
    with open(path, "rb") as f:
        data_p, end_p, data_q = (f.read(ENTRY_SIZE) for _ in range(3))
    with open(path, "wb") as f:  # the order of old: the later batch's entry before the end
        f.write(data_p + data_q + end_p)
    with open(log_path, "r+b") as f:  # the later batch torn by the crash: recovery cuts it
        f.truncate(log_size + 30)
    eng = open_engine(tmp_path)
    plog = eng.partition("t", 0)
    assert plog.log_end_offset == 4
    assert plog.txns.open_transactions() == {}
    assert plog.stable_bounds() == (4, 4) and plog.aborted(0, 4) == []
    assert plog.txns.dropped == ENTRY_SIZE
    eng.close()
    eng = open_engine(tmp_path)  # the rewritten file says the same
    assert eng.partition("t", 0).txns.open_transactions() == {}
    eng.close()


def test_ends_stay_in_offset_order_with_appends_in_between(tmp_path):
    """Each END is written with its marker under one hold of the partition's lock: appends from other threads
    go before the marker or after the END, never between (the order loading relies on)."""
    import struct
    import threading

    eng = open_engine(tmp_path)
    plog = eng.create_topic("t", 1).partitions[0]
    stop = threading.Event()

    def others():
        n = 0
        while not stop.is_set():
            plog.append(batch(1), producer=(1000 + n % 7, 0))
            n += 1

    writer = threading.Thread(target=others)
    writer.start()
    try:
        for i in range(200):
            plog.append(batch(1), producer=(PID, i))
            plog.end_transaction(PID, i, committed=i % 2 == 0, marker=batch(1))
    finally:
        stop.set()
        writer.join()
    with open(index_path(plog), "rb") as f:
        data = f.read()
    firsts = [struct.unpack_from("<q", data, pos + 12)[0] for pos in range(0, len(data), ENTRY_SIZE)]
    assert firsts == sorted(firsts)
    eng.close()


def test_stable_bounds_are_one_instant_under_reads_need_sync(tmp_path):
    """With reads that wait for syncs, an ended transaction's marker becomes visible at the next sync, while the
    LSO leaves the transaction at once: read apart, the LSO before that sync and the high watermark after it
    would look like a transaction open at the marker's offset. `stable_bounds` reads both at one instant."""
    eng = LogEngine(tmp_path, FORMATS, TopicConfig(), clock=Clock(), reads_need_sync=True)
    plog = eng.create_topic("t", 1).partitions[0]
    plog.append(batch(3), producer=(PID, EPOCH))
    plog.sync()
    assert plog.stable_bounds() == (0, 3)
    plog.end_transaction(PID, EPOCH, committed=False, marker=batch(1))  # the marker at 3, not yet synced
    lso = plog.last_stable_offset
    assert plog.stable_bounds() == (3, 3)
    plog.sync()
    assert (lso, plog.high_watermark) == (3, 4)  # two reads straddling the sync: not a pair the log ever had
    assert plog.stable_bounds() == (4, 4)
    eng.close()


def test_a_failed_append_takes_its_entry_back(tmp_path):
    eng = open_engine(tmp_path, max_batch_bytes=200)
    plog = eng.create_topic("t", 1).partitions[0]
    plog.append(batch(1), producer=(PID, EPOCH))
    try:
        plog.append(batch(20, size=50), producer=(PID, EPOCH))
    except Exception:
        pass
    else:
        raise AssertionError("an oversized batch was accepted")
    assert os.path.getsize(index_path(plog)) == ENTRY_SIZE
    assert plog.txns.open_transactions() == {PID: (EPOCH, 0)}
    eng.close()


def test_tank_topics_record_ends_without_markers(tmp_path):
    eng = tank_engine(tmp_path)
    plog = eng.create_topic("t", 1, {"format": "tank"}).partitions[0]
    plog.append(bundle(b"a", b"b"), producer=(PID, EPOCH))
    plog.append(bundle(b"c"))
    assert plog.last_stable_offset == 0
    assert plog.end_transaction(PID, EPOCH, committed=False)
    assert plog.log_end_offset == 3  # no marker written
    [txn] = plog.aborted(0, 3)
    assert txn.ranges == ((0, 1),) and txn.end == 3
    assert plog.last_stable_offset == 3
    eng.close()
    eng = tank_engine(tmp_path)
    assert [t.ranges for t in eng.partition("t", 0).aborted(0, 3)] == [((0, 1),)]
    eng.close()


def test_sync_makes_an_end_durable_even_without_new_data(tmp_path):
    eng = tank_engine(tmp_path)
    plog = eng.create_topic("t", 1, {"format": "tank"}).partitions[0]
    plog.append(bundle(b"a"), producer=(PID, EPOCH))
    plog.sync()
    plog.end_transaction(PID, EPOCH, committed=True)
    assert plog.txns.dirty
    plog.sync()
    assert not plog.txns.dirty
    eng.close()


def test_lso_never_below_the_log_start(tmp_path):
    eng = LogEngine(tmp_path, FORMATS, TopicConfig(segment_bytes=1024, retention_bytes=0), clock=Clock())
    plog = eng.create_topic("t", 1).partitions[0]
    plog.append(batch(2), producer=(PID, EPOCH))  # an open transaction in a segment retention will delete
    for _ in range(10):
        plog.append(batch(3, size=200))
    plog.enforce_retention()
    assert plog.log_start_offset > 0
    assert plog.last_stable_offset == plog.log_start_offset
    eng.close()


def test_aborted_history_below_the_log_start_is_pruned(tmp_path):
    eng = LogEngine(tmp_path, FORMATS, TopicConfig(segment_bytes=1024, retention_bytes=0), clock=Clock())
    plog = eng.create_topic("t", 1).partitions[0]
    plog.append(batch(2), producer=(PID, EPOCH))
    plog.end_transaction(PID, EPOCH, committed=False, marker=batch(1))
    assert len(plog.aborted(0, 3)) == 1
    for _ in range(10):
        plog.append(batch(3, size=200))
    plog.enforce_retention()
    assert plog.aborted(0, plog.log_end_offset) == []
    eng.close()


def test_history_is_rewritten_away_keeping_open_and_aborted_transactions(tmp_path):
    eng = open_engine(tmp_path)
    plog = eng.create_topic("t", 1).partitions[0]
    for i in range(2100):  # finished, committed transactions: history only
        plog.append(batch(1), producer=(PID, EPOCH))
        plog.end_transaction(PID, EPOCH, committed=True)
    plog.append(batch(1), producer=(PID + 1, 0))
    plog.end_transaction(PID + 1, 0, committed=False)
    plog.append(batch(2), producer=(PID + 2, 0))  # still open
    aborted, lso = [t.ranges for t in plog.aborted(0, plog.log_end_offset)], plog.last_stable_offset
    plog.txns.prune(plog.log_start_offset)
    assert os.path.getsize(index_path(plog)) == 3 * ENTRY_SIZE  # the aborted DATA + END, the open DATA
    plog.sync()
    eng.close()
    eng = open_engine(tmp_path)
    plog = eng.partition("t", 0)
    assert [t.ranges for t in plog.aborted(0, plog.log_end_offset)] == aborted and plog.last_stable_offset == lso
    eng.close()
