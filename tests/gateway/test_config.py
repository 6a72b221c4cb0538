"""Configuration layering (embedded defaults ← file ← environment ← --set), its errors, and the schema declared
once: the embedded YAML and the table of docs/configuration.md are generated from the dataclasses of
gateway/config.py."""

from __future__ import annotations

import ast
import dataclasses
import re
from pathlib import Path

import pytest
import yaml

from logway.gateway.config import (DEFAULT_YAML, Config, ConfigError, StorageSettings, defaults, hints,
                                   load_config)
from logway.gateway.config_doc import BEGIN, DOC, table, table_in
from logway.gateway.flush import Flush
from logway.storage import TopicConfig


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


# ---- the schema is declared once: the embedded YAML, the checks and the docs' table all come from it ---------------

def schema_classes(cls=Config):
    """Every dataclass of the schema, `Config` first."""
    found = [cls]
    for f in dataclasses.fields(cls):
        kind = f.metadata["kind"]
        if kind == "section":
            found += schema_classes(hints(cls)[f.name])
        elif kind == "keyed":
            found += schema_classes(f.metadata["of"])
    return found


def test_the_embedded_yaml_loads_into_exactly_the_dataclass_defaults():
    cfg = load_config(None, env={})
    assert dataclasses.replace(cfg, raw={}) == Config()
    assert cfg.raw == yaml.safe_load(DEFAULT_YAML) == defaults()
    assert load_config(None, env={}, overrides=["storage.flush=always"]).storage.flush is Flush.ALWAYS


def test_every_setting_has_a_doc_and_every_yaml_key_a_comment():
    for cls in schema_classes():
        for f in dataclasses.fields(cls):
            assert f.metadata.get("doc", "").strip(), f"{cls.__name__}.{f.name} has no doc"
            assert f.metadata["kind"] in ("value", "section", "keyed", "flat", "key", "derived"), \
                f"{cls.__name__}.{f.name} is not declared with a helper of gateway/config.py"
            if f.metadata["kind"] == "keyed":
                assert all(doc.strip() for doc in f.metadata["keys"].values()), f"{cls.__name__}.{f.name}"
            if f.metadata["kind"] == "flat":
                inner = {g.name for g in dataclasses.fields(hints(cls)[f.name])}
                assert set(f.metadata["docs"]) <= inner, f"{cls.__name__}.{f.name} names unknown fields"
                assert all(doc.strip() for doc in f.metadata["docs"].values())
    # A storage field added to TopicConfig must be documented here (or deliberately left out, like format).
    flat = next(f for f in dataclasses.fields(StorageSettings) if f.metadata["kind"] == "flat")
    assert {f.name for f in dataclasses.fields(TopicConfig)} - set(flat.metadata["docs"]) == {"format"}
    for line in DEFAULT_YAML.splitlines():
        if line.strip() and not line.lstrip().startswith("#"):
            assert "  # " in line, f"DEFAULT_YAML line without a comment: {line!r}"


def test_the_configuration_table_in_the_docs_is_the_generated_one():
    doc = (Path(__file__).resolve().parent.parent.parent / DOC).read_text(encoding="utf-8")
    assert table_in(doc) == table(), (
        f"{DOC}'s configuration table differs from the schema in gateway/config.py; regenerate it with\n"
        f"    python -m logway.gateway.config_doc --update {DOC}\n"
        "(or print it with: python -m logway.gateway.config_doc --print)")
    section = doc[doc.index("## Every key\n"):]
    assert BEGIN in section and "\n## " not in section[:section.index(BEGIN)], "the table belongs to ## Every key"


def test_flush_is_an_enum_of_its_own_shared_by_durability_and_the_configuration():
    assert [m.value for m in Flush] == ["none", "interval", "always"]
    assert Flush.ALWAYS == "always" and Flush("interval") is Flush.INTERVAL
    assert Config().storage.flush is Flush.INTERVAL
    source = (Path(__file__).resolve().parent.parent.parent / "gateway" / "durability.py").read_text()
    imported = {n.module for n in ast.walk(ast.parse(source)) if isinstance(n, ast.ImportFrom)}
    imported |= {a.name for n in ast.walk(ast.parse(source)) if isinstance(n, ast.Import) for a in n.names}
    assert not any(name and name.endswith("config") for name in imported), imported


def test_text_settings_stay_text_whatever_an_earlier_layer_wrote(tmp_path):
    path = tmp_path / "logway.yaml"
    path.write_text("auth:\n  native_token: 7\n")  # unquoted: a number in the file ...
    with pytest.raises(ConfigError, match="auth.native_token must be text"):
        load_config(str(path), env={})
    cfg = load_config(str(path), env={"LOGWAY_AUTH__NATIVE_TOKEN": "007"}, overrides=["log_level=debug"])
    assert cfg.auth.native_token == "007" and cfg.log_level == "DEBUG"  # ... but the environment's text stays text


@pytest.mark.parametrize("overrides, message", [
    (["log_level=loud"], "log_level must be one of DEBUG, INFO, WARNING, ERROR, got 'loud'"),
    (["listeners.kafka.enabled=maybe"], "listeners.kafka.enabled must be true or false"),
    (["listeners.tank.host="], "listeners.tank.host must be a host name or address"),
    (["kafka.max_request_bytes=100"], "kafka.max_request_bytes must be >= 1024, got 100"),
    (["tls.cert_file=1"], None),  # text stays text: "1" is a path
    (["data_dir="], "data_dir must be a path"),
    (["auth.kafka_sasl_plain=true"], "auth.users is empty"),
    (["listeners.native.tls=true"], "listeners native have tls: true but tls.cert_file"),
])
def test_checks_come_from_the_declarations(overrides, message):
    if message is None:
        load_config(None, env={}, overrides=overrides)
        return
    with pytest.raises(ConfigError, match=re.escape(message)):
        load_config(None, env={}, overrides=overrides)


def test_bad_values_in_a_file_name_the_key(tmp_path):
    path = tmp_path / "logway.yaml"
    for text, message in [("storage:\n  flush: [always]\n", "storage.flush must be one of none, interval, always"),
                          ("auth:\n  users: [alice]\n", "config key 'auth.users' must be a mapping"),
                          ("auth:\n  users:\n    alice: 1234\n", "auth.users.alice must be a non-empty password"),
                          ("listeners: 3\n", "config key 'listeners' must be a mapping"),
                          ("storage:\n  segment_ms: 0\n", "storage: segment_ms must be between 1 and")]:
        path.write_text(text)
        with pytest.raises(ConfigError, match=re.escape(message)):
            load_config(str(path), env={})


def test_sources_say_where_each_value_that_is_not_a_default_came_from(tmp_path):
    """What `logway config` shows: the last layer that set a key wins, as for the value."""
    path = tmp_path / "logway.yaml"
    path.write_text("storage:\n  flush: none\n  segment_bytes: 65536\nauth:\n  users:\n    alice: pw\n")
    sources: dict[str, str] = {}
    cfg = load_config(str(path), env={"LOGWAY_STORAGE__FLUSH": "always", "LOGWAY_AUTH__USERS__Bob": "pw2"},
                      overrides=["storage.segment_bytes=131072", "listeners.native.port=7000"], sources=sources)
    assert (cfg.storage.flush, cfg.storage.topic_defaults.segment_bytes) == ("always", 131072)
    assert sources == {"storage.flush": "environment LOGWAY_STORAGE__FLUSH",
                       "storage.segment_bytes": "flag --set storage.segment_bytes",
                       "listeners.native.port": "flag --set listeners.native.port",
                       "auth.users.alice": f"file {path}", "auth.users.Bob": "environment LOGWAY_AUTH__USERS__Bob"}


@pytest.mark.parametrize("overrides, message", [
    (["data_dir="], "data_dir must be a path (it is empty)"),
    (["data_dir=  "], "data_dir must be a path (it is empty)"),
    (["listeners.native.host="], "listeners.native.host must be a host name or address (it is empty)"),
])
def test_empty_values_are_refused_where_something_is_needed(overrides, message):
    with pytest.raises(ConfigError) as caught:
        load_config(None, env={}, overrides=overrides)
    assert str(caught.value) == message


def test_an_empty_config_file_path_is_refused():
    with pytest.raises(ConfigError, match="--config must name a YAML file, got an empty path"):
        load_config("", env={})
