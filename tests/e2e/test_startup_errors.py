"""`logway serve` that cannot start: one line on stderr naming what to fix, exit status 2, no traceback (issues 13,
39).

Real processes: a port taken by a socket bound first (every listener, the admin one too), a data directory that is a
file (or lies under one) or is not writable, TLS files that cannot be read, a configuration file that is not YAML,
empty values where a path is needed; and a data directory that does not exist, created with a log line.
"""

from __future__ import annotations

import os
import socket
import subprocess
import sys

import pytest

from logway.gateway import load_config

LISTENERS = list(load_config().listeners)


def serve(data_dir, *args: str, **kwargs) -> subprocess.CompletedProcess:
    """`logway serve` with every listener on an ephemeral port unless `args` say otherwise, warnings only."""
    ports = [a for name in LISTENERS for a in ("--set", f"listeners.{name}.port=0")]
    return subprocess.run([sys.executable, "-m", "logway.cli", "serve", "--data-dir", str(data_dir), *ports,
                           "--set", "log_level=WARNING", *args], capture_output=True, text=True, timeout=60, **kwargs)


def assert_one_line(r: subprocess.CompletedProcess, *fragments: str) -> str:
    assert r.returncode == 2, (r.returncode, r.stderr)
    assert "Traceback" not in r.stderr and len(r.stderr.splitlines()) == 1, r.stderr
    line = r.stderr.strip()
    assert line.startswith("logway: "), line
    for fragment in fragments:
        assert fragment in line, (fragment, line)
    return line


@pytest.fixture
def taken_port():
    """A port on 127.0.0.1 that another socket listens on."""
    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    sock.listen()
    yield sock.getsockname()[1]
    sock.close()


@pytest.mark.parametrize("listener", ["native", "kafka", "tank", "admin"])
def test_port_in_use_names_the_listener_and_the_address(tmp_path, taken_port, listener):
    r = serve(tmp_path / "data", "--set", f"listeners.{listener}.host=127.0.0.1",
              "--set", f"listeners.{listener}.port={taken_port}")
    line = assert_one_line(r, f"{listener} listener", f"127.0.0.1:{taken_port}", "address already in use",
                           f"listeners.{listener}.port")
    assert line == (f"logway: {listener} listener cannot listen on 127.0.0.1:{taken_port}: address already in use "
                    f"(another process listens there): stop it or set listeners.{listener}.port")


@pytest.mark.parametrize("listener", ["native", "tank", "admin"])
def test_shared_port_in_use_with_workers_names_the_listener_and_the_address(tmp_path, taken_port, listener):
    """With `workers: N` the supervisor binds the native and TANK ports every worker serves, and the admin port it
    serves for all of them: the same one line."""
    r = serve(tmp_path / "data", "--set", "workers=2", "--set", f"listeners.{listener}.host=127.0.0.1",
              "--set", f"listeners.{listener}.port={taken_port}", "--set", "listeners.tank.enabled=true")
    assert_one_line(r, f"{listener} listener cannot listen on 127.0.0.1:{taken_port}: address already in use")


def test_port_in_use_at_info_level_still_ends_in_one_error_line(tmp_path, taken_port):
    r = serve(tmp_path / "data", "--set", f"listeners.kafka.port={taken_port}", "--set", "log_level=INFO")
    assert r.returncode == 2 and "Traceback" not in r.stderr, r.stderr
    errors = [line for line in r.stderr.splitlines() if line.startswith("logway: ")]
    assert errors == [r.stderr.splitlines()[-1]] and f"kafka listener cannot listen on 127.0.0.1:{taken_port}" in \
        errors[0], r.stderr


def test_unresolvable_listener_host(tmp_path):
    r = serve(tmp_path / "data", "--set", "listeners.tank.host=no-such-host.invalid")
    assert_one_line(r, "tank listener cannot listen on no-such-host.invalid:0", "set listeners.tank.host")


def test_data_dir_that_is_a_file(tmp_path):
    path = tmp_path / "data"
    path.write_text("not a directory")
    assert_one_line(serve(path), f"data_dir {path} is not a directory", "--data-dir")
    assert path.read_text() == "not a directory"


def test_data_dir_under_a_file(tmp_path):
    (tmp_path / "file").write_text("")
    assert_one_line(serve(tmp_path / "file" / "data"),
                    f"data_dir {tmp_path}/file/data cannot be created: {tmp_path}/file is not a directory")


def test_data_dir_that_is_not_writable(tmp_path):
    path = tmp_path / "data"
    path.mkdir()
    path.chmod(0o500)
    try:
        if os.access(path, os.W_OK):
            pytest.skip("running as root: permissions do not stop this user (see the in-process check below)")
        assert_one_line(serve(path), f"data_dir {path} is not writable by this user")
        assert_one_line(serve(path / "sub"), f"data_dir {path}/sub cannot be created: {path} is not writable")
    finally:
        path.chmod(0o700)


def test_data_dir_check_without_write_permission(tmp_path, monkeypatch):
    """The same check in-process, with `os.access` saying no (a root test run cannot be refused for real)."""
    from logway.cli.serve import data_dir_problem

    (tmp_path / "data").mkdir()
    assert data_dir_problem(str(tmp_path / "data")) is None and data_dir_problem(str(tmp_path / "new/x")) is None
    monkeypatch.setattr(os, "access", lambda path, mode: False)
    assert data_dir_problem(str(tmp_path / "data")).startswith(f"data_dir {tmp_path}/data is not writable")
    assert data_dir_problem(str(tmp_path / "new/x")).startswith(
        f"data_dir {tmp_path}/new/x cannot be created: {tmp_path} is not writable")


def test_tls_files_that_cannot_be_read(tmp_path):
    tls = ("--set", "listeners.native.tls=true")
    missing = serve(tmp_path / "data", *tls, "--set", f"tls.cert_file={tmp_path}/nope.pem",
                    "--set", f"tls.key_file={tmp_path}/nope.key")
    assert_one_line(missing, "configuration error: tls: no such file:", f"{tmp_path}/nope.pem")
    (tmp_path / "certs").mkdir()  # a directory where the certificate should be
    unreadable = serve(tmp_path / "data", *tls, "--set", f"tls.cert_file={tmp_path}/certs",
                       "--set", f"tls.key_file={tmp_path}/certs")
    assert_one_line(unreadable, f"configuration error: tls: cannot load the certificate {tmp_path}/certs")
    (tmp_path / "junk.pem").write_text("-----BEGIN CERTIFICATE-----\nnot base64\n")
    junk = serve(tmp_path / "data", *tls, "--set", f"tls.cert_file={tmp_path}/junk.pem",
                 "--set", f"tls.key_file={tmp_path}/junk.pem")
    assert_one_line(junk, f"configuration error: tls: cannot load the certificate {tmp_path}/junk.pem")
    assert not (tmp_path / "data").exists() or not any((tmp_path / "data").iterdir())  # refused before storage


def test_a_workers_own_port_beyond_65535_is_a_configuration_error(tmp_path):
    r = serve(tmp_path / "data", "--set", "workers=2", "--set", "listeners.admin.port=65534")
    assert_one_line(r, "listeners.admin.port 65534 + 2 (worker 1's port) is beyond 65535")


def test_tls_files_that_cannot_be_read_by_the_supervisors_admin_listener(tmp_path):
    r = serve(tmp_path / "data", "--set", "workers=2", "--set", "listeners.admin.tls=true",
              "--set", f"tls.cert_file={tmp_path}/nope.pem", "--set", f"tls.key_file={tmp_path}/nope.key")
    assert_one_line(r, "configuration error: tls: no such file:", f"{tmp_path}/nope.pem")


def test_config_file_that_is_not_yaml(tmp_path):
    (tmp_path / "bad.yaml").write_text("listeners: [\n")
    r = serve(tmp_path / "data", "--config", str(tmp_path / "bad.yaml"))
    assert_one_line(r, "configuration error: config file", "is not valid YAML")


@pytest.mark.parametrize("args, line", [
    (("--data-dir", ""), "logway serve: argument --data-dir: expected a directory, got an empty value "
                         "(see logway serve --help)"),
    (("--data-dir", " "), "logway serve: argument --data-dir: expected a directory, got an empty value "
                          "(see logway serve --help)"),
    (("--config", ""), "logway serve: argument --config: expected a YAML file, got an empty value "
                       "(see logway serve --help)"),
    (("--set", "data_dir="), "logway: configuration error: data_dir must be a path (it is empty)"),
    (("--set", "listeners.kafka.host="), "logway: configuration error: listeners.kafka.host must be a host name or "
                                         "address (it is empty)"),
])
def test_empty_values_are_refused_not_taken_as_the_default(tmp_path, args, line):
    ports = [a for name in LISTENERS for a in ("--set", f"listeners.{name}.port=0")]
    r = subprocess.run([sys.executable, "-m", "logway.cli", "serve", *ports, *args], capture_output=True, text=True,
                       timeout=60, cwd=tmp_path)
    assert (r.returncode, r.stderr) == (2, line + "\n")
    assert not (tmp_path / "data").exists()  # refused before anything was created (./data neither)


def test_a_data_dir_that_does_not_exist_is_created_and_logged(tmp_path):
    """Deep paths too, naming the parents created with it; the gateway then starts (and stops at once here: its
    native port is taken, which also shows the creation happens before the gateway starts)."""
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        path = tmp_path / "a" / "b" / "data"
        r = serve(path, "--set", "log_level=INFO", "--set", f"listeners.native.port={taken.getsockname()[1]}")
    assert r.returncode == 2 and "Traceback" not in r.stderr, r.stderr
    created = [line for line in r.stderr.splitlines() if "does not exist: creating it" in line]
    assert len(created) == 1 and created[0].endswith(
        f"INFO logway: data_dir {path} does not exist: creating it and its parent directories {tmp_path}/a, "
        f"{tmp_path}/a/b (a new, empty log)"), r.stderr
    assert path.is_dir()
    r = serve(path, "--set", "log_level=INFO", "--set", "listeners.native.port=1",  # (a port it may not bind)
              "--set", "listeners.native.host=256.0.0.1")  # existing now: not logged again
    assert "does not exist" not in r.stderr, r.stderr
