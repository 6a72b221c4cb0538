"""The security store (logway.storage.security): ACL bindings, SCRAM credentials and client quotas, durable on
return, replayed at open, a batch written at once (one sync), a torn tail cut, compaction; and the engine opening
it in the data directory (or setting a damaged one aside, starting empty)."""

from __future__ import annotations

import os

import pytest

from logway.storage import StorageError
from logway.storage.security import AclRecord, SecurityStore, StoredCredential

from .helpers import open_engine

READ = AclRecord("TOPIC", "orders", "LITERAL", "User:alice", "*", "READ", "ALLOW")
WRITE = AclRecord("TOPIC", "ord", "PREFIXED", "User:bob", "10.0.0.1", "WRITE", "DENY")
CREDENTIAL = StoredCredential(b"salt" * 4, 4096, b"s" * 32, b"k" * 32)


def test_acls_credentials_and_quotas_survive_a_reopen(tmp_path):
    store = SecurityStore(tmp_path)
    before = store.version
    store.change_acls([READ, WRITE], [])
    store.change_acls([], [WRITE])
    store.change_credentials({("alice", "SCRAM-SHA-256"): CREDENTIAL, ("bob", "SCRAM-SHA-512"): CREDENTIAL}, [])
    store.change_credentials({}, [("bob", "SCRAM-SHA-512")])
    store.set_quotas((("user", "alice"),), {"producer_byte_rate": 1024.0})
    store.set_quotas((("user", None), ("client-id", "c")), {"request_percentage": 50.0})
    store.set_quotas((("user", "alice"),), {})  # no quotas left: the entity is gone
    assert store.version > before
    store.close()
    store = SecurityStore(tmp_path)
    assert store.acls() == [READ]
    assert store.credentials() == {("alice", "SCRAM-SHA-256"): CREDENTIAL}
    assert store.quotas() == {(("user", None), ("client-id", "c")): {"request_percentage": 50.0}}
    store.close()


def test_a_batch_torn_by_a_crash_keeps_what_was_whole(tmp_path):
    store = SecurityStore(tmp_path)
    store.change_acls([READ], [])
    store.change_acls([WRITE, READ._replace(name="other")], [])
    store.close()
    path = os.path.join(tmp_path, SecurityStore.log_name)
    with open(path, "r+b") as f:
        f.truncate(os.path.getsize(path) - 5)  # the last record of the batch, half written
    store = SecurityStore(tmp_path)
    assert sorted(store.acls()) == sorted([READ, WRITE]) and store.dropped_bytes > 0
    store.close()


def test_compaction_keeps_the_live_state(tmp_path):
    store = SecurityStore(tmp_path, compact_after=10)
    for i in range(40):
        store.change_acls([READ._replace(name=f"t{i % 2}")], [READ._replace(name=f"t{(i + 1) % 2}")])
    store.close()
    store = SecurityStore(tmp_path)
    assert store.acls() == [READ._replace(name="t1")]
    store.close()


def test_the_engine_keeps_it_in_the_data_directory(tmp_path):
    engine = open_engine(tmp_path)
    engine.security.change_acls([READ], [])
    engine.close()
    assert os.path.isfile(tmp_path / "security" / SecurityStore.log_name)
    engine = open_engine(tmp_path)
    assert engine.security.acls() == [READ]
    engine.close()


def test_a_damaged_store_is_set_aside_and_starts_empty(tmp_path, caplog):
    engine = open_engine(tmp_path)
    engine.security.change_acls([READ], [])
    engine.close()
    with open(tmp_path / "security" / SecurityStore.log_name, "r+b") as f:
        f.write(b"NOTASTORE")
    engine = open_engine(tmp_path)
    assert engine.security.acls() == []
    assert "ACLs, SCRAM credentials and client quotas start empty" in caplog.text
    assert os.listdir(tmp_path / "quarantine")
    engine.close()


def test_another_process_reads_what_the_writer_wrote(tmp_path):
    writer = SecurityStore(tmp_path)
    reader = SecurityStore(tmp_path, read_only=True)
    assert reader.acls() == [] and not reader.reload()
    writer.change_acls([READ], [])
    assert reader.reload() and reader.acls() == [READ]
    with open(os.path.join(tmp_path, SecurityStore.log_name), "ab") as f:
        f.write(b"\x00\x00\x00\x40half")  # a record its writer has not finished: left for the next reload
    writer_size = os.path.getsize(os.path.join(tmp_path, SecurityStore.log_name))
    assert reader.reload() and reader.acls() == [READ]
    assert os.path.getsize(os.path.join(tmp_path, SecurityStore.log_name)) == writer_size  # nothing cut by a reader
    with pytest.raises(StorageError, match="read-only"):
        reader.change_acls([WRITE], [])
    writer.close()
    reader.close()


def test_a_reader_opened_before_the_writer_made_the_store_finds_it_later(tmp_path):
    reader = SecurityStore(tmp_path / "security", read_only=True)
    assert reader.acls() == [] and not reader.reload()
    writer = SecurityStore(tmp_path / "security")
    writer.change_credentials({("alice", "SCRAM-SHA-256"): CREDENTIAL}, [])
    assert reader.reload() and reader.credentials() == {("alice", "SCRAM-SHA-256"): CREDENTIAL}
    writer.close()
