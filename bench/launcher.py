"""Start `logway serve` as a child process on ephemeral 127.0.0.1 ports and wait until it listens.

Used by the benchmarks and by tests that must kill a real gateway process (`kill -9`). The child is
`python -m logway.cli serve` with the same interpreter, so it runs the code of this checkout — unless
`BENCH_GATEWAY_PYTHONPATH` names a directory holding another `logway` package: the child alone then runs that
one (before/after comparisons with the same benchmark clients; see BENCHMARKS.md).
"""

from __future__ import annotations

import json
import os
import resource
import signal
import subprocess
import sys
import time
from functools import partial

from .proc import child_pids, process_alive

__all__ = ["GatewayProcess"]


class GatewayProcess:
    """A running `logway serve` child. `addresses` maps protocol → (host, port)."""

    def __init__(self, data_dir: str, *overrides: str, run_dir: str | None = None, start_timeout: float = 30.0,
                 stderr=None, nofile: int | None = None) -> None:
        """`nofile`: the child's descriptor limit (RLIMIT_NOFILE, soft and hard, so it cannot raise it)."""
        self.data_dir = data_dir
        run_dir = run_dir or data_dir + ".run"
        os.makedirs(run_dir, exist_ok=True)
        self.ready_file = os.path.join(run_dir, f"ready-{time.monotonic_ns()}.json")
        cmd = [sys.executable, "-m", "logway.cli", "serve", "--data-dir", data_dir,
               "--ready-file", self.ready_file, "--set", "listeners.native.port=0",
               "--set", "listeners.kafka.port=0", "--set", "listeners.tank.port=0",
               "--set", "listeners.admin.port=0"]
        for item in overrides:
            cmd += ["--set", item]
        env = None
        other = os.environ.get("BENCH_GATEWAY_PYTHONPATH")
        if other:
            env = dict(os.environ, PYTHONPATH=other)
        limit = None if nofile is None else partial(resource.setrlimit, resource.RLIMIT_NOFILE, (nofile, nofile))
        self.proc = subprocess.Popen(cmd, stdin=subprocess.DEVNULL, stderr=stderr, env=env, preexec_fn=limit)
        deadline = time.monotonic() + start_timeout
        while not os.path.exists(self.ready_file):
            if self.proc.poll() is not None:
                raise RuntimeError(f"the gateway exited with status {self.proc.returncode} before listening")
            if time.monotonic() > deadline:
                self.kill()
                raise RuntimeError("the gateway did not start listening in time")
            time.sleep(0.01)
        with open(self.ready_file) as f:
            info = json.load(f)
        self.pid = info.pop("pid")
        self.addresses = {name: (addr[0], addr[1]) for name, addr in info.items()}

    @property
    def native(self) -> tuple[str, int]:
        return self.addresses["native"]

    def kill(self) -> None:
        """SIGKILL: no shutdown code runs, as in a crash. With `workers` > 1 the supervisor is stopped (SIGSTOP: it
        starts no worker again), its workers killed, then it: a worker that saw its supervisor go would shut down
        (and sync) on its own."""
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGSTOP)
            _sigkill(child_pids(self.proc.pid))
            self.proc.send_signal(signal.SIGKILL)
        self.proc.wait()

    def kill_supervisor(self, timeout: float = 30.0) -> list[int]:
        """SIGKILL the supervisor alone (as the OOM killer might): each worker sees its control socket close and
        shuts down on its own. Waits up to `timeout` seconds for them to exit; returns the pids of those that had
        not (SIGKILLed then). Without workers it is `kill()`."""
        if self.proc.poll() is not None:
            return []
        workers = child_pids(self.proc.pid)
        self.proc.send_signal(signal.SIGKILL)
        self.proc.wait()
        deadline = time.monotonic() + timeout
        left = [pid for pid in workers if process_alive(pid)]
        while left and time.monotonic() < deadline:
            time.sleep(0.02)
            left = [pid for pid in left if process_alive(pid)]
        _sigkill(left)
        return left

    def stop(self, timeout: float = 15.0) -> int:
        """SIGTERM and wait for the graceful shutdown; returns the exit status."""
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(timeout)
            except subprocess.TimeoutExpired:
                self.kill()
        return self.proc.returncode

    def __enter__(self) -> "GatewayProcess":
        return self

    def __exit__(self, *exc) -> None:
        self.stop()


def _sigkill(pids) -> None:
    """SIGKILL each process (one already gone is skipped)."""
    for pid in pids:
        try:
            os.kill(pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
