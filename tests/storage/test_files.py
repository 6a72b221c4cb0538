"""The durable-file helpers every name change goes through: what they create, rename and sync. (That the syncs make
the names survive a power cut is shown on the power-loss file system: tests/e2e/test_powerloss.py.)"""

from __future__ import annotations

import os

import pytest

from logway.storage.files import makedirs_durably, quarantine, rename_durably, sync_names, write_synced


def test_makedirs_durably_creates_what_is_missing_and_says_so(tmp_path):
    target = tmp_path / "a" / "b" / "c"
    assert makedirs_durably(target) is True
    assert target.is_dir()
    assert makedirs_durably(target) is False  # nothing to create: nothing synced


def test_rename_durably_replaces_across_directories(tmp_path):
    (tmp_path / "src").mkdir()
    (tmp_path / "dst").mkdir()
    write_synced(str(tmp_path / "src" / "f"), b"new")
    write_synced(str(tmp_path / "dst" / "f"), b"old")
    rename_durably(tmp_path / "src" / "f", tmp_path / "dst" / "f")
    assert not (tmp_path / "src" / "f").exists() and (tmp_path / "dst" / "f").read_bytes() == b"new"


def test_sync_names_needs_the_directories_to_exist(tmp_path):
    sync_names(tmp_path / "a-name-that-was-removed", tmp_path / "another")  # one directory, synced once
    with pytest.raises(FileNotFoundError):
        sync_names(tmp_path / "no-such-dir" / "x")


def test_quarantine_moves_damage_aside_even_when_its_directory_is_a_file(tmp_path):
    (tmp_path / "quarantine").write_bytes(b"not a directory")
    (tmp_path / "bad").write_bytes(b"damaged")
    dest = quarantine(str(tmp_path / "bad"), str(tmp_path / "quarantine"), "bad")
    assert os.path.basename(dest).startswith("bad.") and open(dest, "rb").read() == b"damaged"
    assert any(p.name.startswith("quarantine.") for p in tmp_path.iterdir())  # the file in its way, set aside
