"""Configuration layering (embedded defaults ← file ← environment ← --set) and its errors."""

from __future__ import annotations

import pytest

from logway.gateway.config import ConfigError, load_config


def test_embedded_defaults():
    cfg = load_config(None, env={})
    assert cfg.data_dir == "./data"
    assert cfg.listeners["native"].port == 9898 and cfg.listeners["native"].host == "127.0.0.1"
    assert cfg.listeners["native"].enabled
    assert cfg.listeners["kafka"].port == 9092 and cfg.listeners["tank"].port == 11011
    assert cfg.storage.flush == "interval"
    assert cfg.storage.topic_defaults.index_interval_bytes == 4096
    assert cfg.limits.max_frame_bytes == 10 * 1024 * 1024


def test_file_then_env_then_flags(tmp_path):
    path = tmp_path / "logway.yaml"
    path.write_text("data_dir: /srv/logway\nstorage:\n  flush: none\n  segment_bytes: 65536\n"
                    "listeners:\n  native:\n    port: 7000\n")
    cfg = load_config(str(path), env={})
    assert (cfg.data_dir, cfg.storage.flush, cfg.listeners["native"].port) == ("/srv/logway", "none", 7000)
    assert cfg.storage.topic_defaults.segment_bytes == 65536
    env = {"LOGWAY_STORAGE__FLUSH": "always", "LOGWAY_LISTENERS__NATIVE__PORT": "7001", "UNRELATED": "x"}
    cfg = load_config(str(path), env=env)
    assert (cfg.storage.flush, cfg.listeners["native"].port) == ("always", 7001)
    cfg = load_config(str(path), env=env, overrides=["listeners.native.port=7002", "storage.retention_ms=-1"])
    assert cfg.listeners["native"].port == 7002 and cfg.storage.topic_defaults.retention_ms == -1


@pytest.mark.parametrize("overrides, message", [
    (["storage.flsh=always"], "unknown config key 'storage.flsh'"),
    (["storage.flush=sometimes"], "storage.flush must be one of"),
    (["listeners.native.port=70000"], "port must be <= 65535"),
    (["listeners.native.port=abc"], "port must be an integer"),
    (["limits.max_connections=0"], "max_connections must be >= 1"),
    (["storage=1"], "is a section"),
    (["nokey"], "expects key.path=value"),
    (["storage.segment_bytes=10"], "segment_bytes must be between"),
])
def test_bad_overrides_name_the_key(overrides, message):
    with pytest.raises(ConfigError, match=message.replace(".", r"\.").replace("(", r"\(")):
        load_config(None, env={}, overrides=overrides)


def test_bad_file(tmp_path):
    bad = tmp_path / "bad.yaml"
    bad.write_text("storage: [1, 2\n")
    with pytest.raises(ConfigError, match="not valid YAML"):
        load_config(str(bad), env={})
    bad.write_text("listeners:\n  native:\n    prot: 1\n")
    with pytest.raises(ConfigError, match="listeners.native.prot"):
        load_config(str(bad), env={})
    with pytest.raises(ConfigError, match="cannot read"):
        load_config(str(tmp_path / "missing.yaml"), env={})
    with pytest.raises(ConfigError, match="unknown config key"):
        load_config(None, env={"LOGWAY_NOPE": "1"})
