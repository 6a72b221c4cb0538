"""The transaction store (logway.storage.transactions): durable states per transactional id, replay, torn tails,
compaction, and the engine opening it (or setting a damaged one aside)."""

from __future__ import annotations

import os

import pytest
from logway.storage import StorageError, TransactionStore
from logway.storage.share_state import ShareStateStore
from logway.storage.transactions import COMPACT_NAME, LOG_NAME

from .helpers import open_engine


def test_put_get_forget_and_replay(tmp_path):
    store = TransactionStore(tmp_path)
    store.put("a", {"pid": 1, "epoch": 0, "status": "Empty"})
    store.put("b", {"pid": 2, "epoch": 5, "status": "Ongoing", "partitions": [["t", 0]]})
    store.put("a", {"pid": 1, "epoch": 1, "status": "CompleteCommit"})
    store.put("b", None)
    assert store.get("a")["epoch"] == 1 and store.get("b") is None
    store.close()
    store = TransactionStore(tmp_path)
    assert dict(store.items()) == {"a": {"pid": 1, "epoch": 1, "status": "CompleteCommit"}}
    assert store.dropped_bytes == 0
    store.close()


def test_a_torn_tail_is_cut_and_the_rest_kept(tmp_path):
    store = TransactionStore(tmp_path)
    store.put("a", {"epoch": 0})
    store.put("a", {"epoch": 1})
    store.close()
    path = os.path.join(tmp_path, LOG_NAME)
    size = os.path.getsize(path)
    with open(path, "r+b") as f:
        f.truncate(size - 3)  # half of the last record
    store = TransactionStore(tmp_path)
    assert store.get("a") == {"epoch": 0} and store.dropped_bytes > 0
    store.put("a", {"epoch": 2})  # written after the cut, not after the garbage
    store.close()
    assert TransactionStore(tmp_path).get("a") == {"epoch": 2}


def test_compaction_keeps_one_record_per_live_id(tmp_path):
    store = TransactionStore(tmp_path, compact_after=20)
    for i in range(60):
        store.put(f"id{i % 3}", {"n": i})
    size = os.path.getsize(os.path.join(tmp_path, LOG_NAME))
    assert size < 60 * 20 and not os.path.exists(os.path.join(tmp_path, COMPACT_NAME))
    store.close()
    store = TransactionStore(tmp_path)
    assert dict(store.items()) == {"id0": {"n": 57}, "id1": {"n": 58}, "id2": {"n": 59}}
    store.close()


def test_an_interrupted_compaction_is_discarded(tmp_path):
    store = TransactionStore(tmp_path)
    store.put("a", {"n": 1})
    store.close()
    with open(os.path.join(tmp_path, COMPACT_NAME), "wb") as f:
        f.write(b"half a compaction")
    store = TransactionStore(tmp_path)
    assert store.get("a") == {"n": 1} and not os.path.exists(os.path.join(tmp_path, COMPACT_NAME))
    store.close()


def test_not_a_transaction_log_is_refused(tmp_path):
    with open(os.path.join(tmp_path, LOG_NAME), "wb") as f:
        f.write(b"something else entirely")
    with pytest.raises(StorageError):
        TransactionStore(tmp_path)


def test_an_oversized_state_is_refused_without_writing(tmp_path):
    store = TransactionStore(tmp_path)
    size = os.path.getsize(os.path.join(tmp_path, LOG_NAME))
    with pytest.raises(ValueError):
        store.put("a", {"partitions": ["x" * 1000] * 20_000})
    assert os.path.getsize(os.path.join(tmp_path, LOG_NAME)) == size
    store.close()


def test_the_engine_keeps_states_across_restarts_and_sets_damage_aside(tmp_path):
    eng = open_engine(tmp_path)
    eng.transactions.put("tx", {"epoch": 4})
    eng.close()
    eng = open_engine(tmp_path)
    assert eng.transactions.get("tx") == {"epoch": 4}
    eng.close()
    with open(os.path.join(tmp_path, "transactions", LOG_NAME), "wb") as f:
        f.write(b"garbage garbage")
    eng = open_engine(tmp_path)
    assert eng.transactions.items() == []
    assert any(name.startswith("transactions") for name in os.listdir(os.path.join(tmp_path, "quarantine")))
    eng.close()


def test_the_share_state_store_is_its_own_log_of_the_same_kind(tmp_path):
    """Share groups' state (logway.storage.share_state): the same durable map, in its own file with its own magic;
    the engine opens it under <data>/share_groups and sets a damaged one aside."""
    store = ShareStateStore(tmp_path / "s")
    store.put("p\0g\0abc\0" + "0", {"start": 3, "end": 5, "batches": []}, sync=False)
    store.put("g\0g", {"share.auto.offset.reset": "earliest"})  # synced: the write before it too
    store.close()
    assert os.listdir(tmp_path / "s") == ["share_groups.log"]
    store = ShareStateStore(tmp_path / "s")
    assert store.get("g\0g") == {"share.auto.offset.reset": "earliest"} and len(store.items()) == 2
    store.close()
    with pytest.raises(StorageError, match="not a share group state store log"):
        ShareStateStore(_copy_as(tmp_path, LOG_NAME, "share_groups.log"))
    eng = open_engine(tmp_path / "eng")
    eng.share_state.put("k", {"v": 1})
    eng.close()
    with open(os.path.join(tmp_path, "eng", "share_groups", "share_groups.log"), "wb") as f:
        f.write(b"garbage")
    eng = open_engine(tmp_path / "eng")
    assert eng.share_state.items() == []
    assert any(name.startswith("share_groups") for name in os.listdir(os.path.join(tmp_path, "eng", "quarantine")))
    eng.close()


def _copy_as(tmp_path, source_name, name):
    """A directory holding a transaction log under the share store's file name."""
    store = TransactionStore(tmp_path / "t")
    store.put("a", {"n": 1})
    store.close()
    os.makedirs(tmp_path / "x", exist_ok=True)
    os.replace(tmp_path / "t" / source_name, tmp_path / "x" / name)
    return tmp_path / "x"
