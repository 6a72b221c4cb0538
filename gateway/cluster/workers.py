"""Several worker processes over one data directory (`workers: N` > 1, a prototype): the supervisor that starts
them, and what a worker does beyond a single gateway. The design, and what is left out: docs/scaling.md.

Worker i is a whole gateway process (`logway serve` again) that owns partition p of topic t when
`Share.owner(t, p) == i` (`logway.storage.engine`): only it opens, recovers, appends to, reads and trims that
partition. Kafka clients see worker i as broker i (its own Kafka listener, on the configured port + i) and route
produce and fetch to each partition's leader themselves (`protocols/kafka/cluster.py`). Worker 0 is also the
group coordinator, the controller and the owner of the shared offset store. Native and TANK clients do not route:
every worker serves the configured native (and TANK) port — the supervisor binds one `SO_REUSEPORT` socket per
worker there, so the kernel spreads the connections — and relays a request for another worker's partitions to
that worker's relay socket (`relays.py`: a Unix-domain socket for the workers alone, outside the client limits,
never TLS; `forwarding.py`), and one on committed offsets or groups to worker 0 — or gives a connection whose
request is wholly another worker's to that worker, which serves it from then on (`handover.py`).

- `supervise(config, argv, ready_file)`: the `logway serve` process itself when `workers` > 1. It holds the data
  directory (a `LogEngine` with `Share(N, ...)`: `.lock`, the clean-shutdown marker, tmp/ and trash/, no partition),
  binds the shared native and TANK sockets (`entry_sockets`), starts the N workers — `python -m logway.cli serve` with
  the same arguments, plus `LOGWAY_WORKER=i/N/clean`, worker i's listeners, its shared sockets (`LOGWAY_WORKER_ENTRIES`)
  and its relay sockets and hand-over socket (`relay_sockets`, `LOGWAY_WORKER_RELAYS`: bound and held by the supervisor
  as the shared ones are) — each with a control socket (JSON lines). When every worker has bound its listeners and told
  its addresses, the supervisor sends all of them the list of Kafka brokers and of every worker's native and TANK relay
  sockets and hand-over socket, waits for each to acknowledge and writes the ready file: worker 0's Kafka address under
  the usual name ("kafka"), worker i's as "kafka.i", "admin.i", "native.i" and "tank.i" (its own listeners, also for
  worker 0), the shared native and TANK port as "native" and "tank", the supervisor's own admin listener as "admin" (the
  configured port: metrics, readiness and the console of every worker: `admin/supervisor.py`; worker i's is on the
  configured port + 1 + i) and the supervisor's pid. SIGTERM and SIGINT are passed on to every worker; once they have
  all stopped, the directory is marked cleanly shut down if each of them exited 0. A worker that dies is started again
  on its ports, as an unclean start (`MAX_RESTARTS` in `RESTART_WINDOW`; one more death stops the others and the
  supervisor exits 1); a worker that fails while the gateway starts stops the start (exit 2 or 1 as the worker: a port
  in use, a locked directory). A ready worker tells the supervisor it is alive from its event loop (`{"alive": true}`
  every sixth of `worker_watchdog_ms`); one silent for `worker_watchdog_ms` — its loop hung, or the process stopped — is
  killed (SIGKILL) and so started again like one that died: its partitions would otherwise stay unavailable, and every
  request relayed or handed to it wait, for as long as it hangs.
- `WorkerRole` (in each worker, from the environment): its index, the ownership (`share`), the Kafka brokers' addresses,
  the workers' native and TANK relay sockets and hand-over sockets, the control socket (when it closes — the supervisor
  died — the worker shuts down), and `refresh`: topics other workers created, deleted, grew or reconfigured — told at
  once (a worker that makes a change tells the supervisor, which tells the others: `topics_changed`, `refresh`; a worker
  looks at every topic once when it joins, for what was changed while it was starting), and looked for on demand and
  every `worker_refresh_ms` — or `look_up` for the topics a request named that this worker does not know.
"""

from __future__ import annotations

import json
import logging
import os
import selectors
import signal
import socket
import subprocess
import sys
import time
from typing import Callable

import trio

from logway.storage import LogEngine
from logway.storage.engine import Share

from ..config import Config
from ..errors import ListenerError
from ..formats import STORAGE_FORMATS
from .membership import Member, Membership
from .ownership import leaders
from .relays import HANDOVER, RELAYS_SUPPORTED, SHARED, bind_relay, new_run, relay_address

log = logging.getLogger("logway.workers")

__all__ = ["WorkerRole", "supervise", "worker_overrides"]

_ENV, _ENV_FD, _ENV_ENTRIES = "LOGWAY_WORKER", "LOGWAY_WORKER_FD", "LOGWAY_WORKER_ENTRIES"
_ENV_RELAYS = "LOGWAY_WORKER_RELAYS"
#: The listener whose configured port the supervisor serves for every worker (`admin/supervisor.py`); worker i's
#: own is on the configured port + 1 + i.
ADMIN = "admin"
#: Beyond the shutdown timeout, how long the supervisor waits for workers to close storage before SIGKILL.
_STOP_GRACE = 60.0
#: A worker that dies is started again, at most this many times in RESTART_WINDOW seconds (the next death stops the
#: gateway, exit status 1: something a restart does not fix); the n-th restart in the window waits n - 1 delays.
MAX_RESTARTS = 3
RESTART_WINDOW = 60.0
RESTART_DELAY = 1.0


# -- in a worker -------------------------------------------------------------------------------------------------

class WorkerRole(Membership):
    """What makes a gateway process worker `index` of `count` (see the module docstring): the cluster's membership
    source of `workers: N` — members 0..count-1, this one `index`, their addresses told by the supervisor."""

    def __init__(self, index: int, count: int, clean_start: bool, control_fd: int | None = None,
                 entries: dict[str, int] | None = None, relay_fds: dict[str, int] | None = None) -> None:
        super().__init__()
        self.index = self.me = index
        self.name = f"worker {index}"
        self.count = count
        #: Listener name -> the file descriptor of this worker's socket on the shared port (see `entry_sockets`).
        self.entries = dict(entries or {})
        #: Listener name -> the file descriptor of this worker's relay socket (see `relay_sockets`).
        self.relay_fds = dict(relay_fds or {})
        self.share = Share(count, leaders(count), index, clean_start)
        #: The Kafka brokers' advertised addresses by node id (= worker index); known once `join` returned.
        self.brokers: list[tuple[str, int]] = []
        #: Every worker's native and TANK relay socket by index (what the others relay to it), or None where it has
        #: none.
        self.natives: list[str | None] = []
        self.tanks: list[str | None] = []
        #: Every worker's hand-over socket by index (where the others give it connections: `handover.py`).
        self.handovers: list[str | None] = []
        self._fd = control_fd
        self._control: trio.SocketStream | None = None
        self._buffer = b""
        self._joined = trio.Event()
        self._changed: set[str] = set()  # topics this worker changed, not yet told to the supervisor
        self._changes = trio.Event()
        self._sending = trio.Lock()  # one message at a time on the control socket

    @classmethod
    def from_env(cls, env=None) -> "WorkerRole | None":
        """The role the supervisor gave this process (LOGWAY_WORKER=i/N/clean, LOGWAY_WORKER_FD), or None."""
        env = os.environ if env is None else env
        text = env.get(_ENV)
        if not text:
            return None
        try:
            index, count, clean = (int(x) for x in text.split("/"))
            fd = int(env[_ENV_FD]) if env.get(_ENV_FD) else None
            entries, relays = ({name: int(n) for name, _, n in (item.partition("=") for item in
                                                                env.get(key, "").split(",") if item)}
                               for key in (_ENV_ENTRIES, _ENV_RELAYS))
        except (ValueError, KeyError):
            raise ValueError(f"{_ENV}={text!r} is not i/N/clean, or {_ENV_ENTRIES} or {_ENV_RELAYS} not name=fd,… "
                             f"(they are set by a supervising logway serve)") from None
        if not 0 <= index < count:
            raise ValueError(f"{_ENV}={text!r}: worker index out of range")
        return cls(index, count, bool(clean), fd, entries, relays)

    # -- start-up --------------------------------------------------------------------------------------------
    async def join(self, gateway) -> None:
        """Tell the supervisor this worker's addresses; learn every Kafka broker's (called once the listeners are
        bound). If the supervisor goes away meanwhile, the gateway shuts down."""
        if self._fd is None:  # (a worker without a supervisor: tests) only itself
            kafka = gateway.protocols.get("kafka")
            self.brokers = [kafka.broker.advertised] if kafka is not None else []
            self.natives, self.tanks, self.handovers = [None], [None], [None]  # (nobody to relay to)
            self._joined.set()
            return
        sock = trio.socket.fromfd(self._fd, socket.AF_UNIX, socket.SOCK_STREAM)
        os.close(self._fd)
        self._control = trio.SocketStream(sock)
        kafka = gateway.protocols.get("kafka")
        await self._send({"listening": {name: list(addr) for name, addr in gateway.addresses.items()},
                          "kafka": list(kafka.broker.advertised) if kafka is not None else None,
                          "pid": os.getpid()})
        message = await self._receive()
        if message is None or "brokers" not in message:
            log.error("worker %d: the supervisor ended the start (another worker failed?) or died: shutting down",
                      self.index)
            gateway.request_shutdown()
            return
        self.brokers = [(host, port) for host, port in message["brokers"]]
        self.natives = message.get("native", [])
        self.tanks = message.get("tank", [])
        self.handovers = message.get(HANDOVER, [])
        # From now on the supervisor tells this worker of every change the others make; one look at every topic
        # catches those made between this worker's engine opening and now (a worker starting after the others, or
        # started again, while they serve).
        await self.refresh(gateway.engine, max_age=0)
        await self._send({"ready": True})
        self._joined.set()

    # -- while serving ---------------------------------------------------------------------------------------
    async def run(self, gateway) -> None:
        """Background work for the gateway's life: the supervisor's socket — the topic changes other workers made,
        told at once (`refresh` messages), and its end (the supervisor died, so this worker stops instead of
        serving on alone) —, telling the supervisor of the topic changes this worker makes, and every
        `worker_refresh_ms` a look at every topic (what a message could have missed)."""
        token = trio.lowlevel.current_trio_token()

        def changed(name: str) -> None:  # (from the thread that made the change)
            try:
                token.run_sync_soon(self._note_change, name)
            except trio.RunFinishedError:
                pass  # shutting down: the others see it at their next look

        gateway.engine.on_shared_change = changed
        async with trio.open_nursery() as nursery:
            nursery.start_soon(self._watch_supervisor, gateway)
            nursery.start_soon(self._tell_changes)
            if gateway.config.worker_watchdog_ms:
                nursery.start_soon(self._tell_alive, gateway.config.worker_watchdog_ms / 6000)
            while True:
                await trio.sleep(gateway.config.worker_refresh_ms / 1000)
                await self.refresh(gateway.engine)

    def _note_change(self, name: str) -> None:
        self._changed.add(name)
        self._changes.set()

    async def _tell_changes(self) -> None:
        """Send the supervisor the topics this worker created, deleted or changed (it tells the other workers)."""
        await self._joined.wait()
        while self._control is not None:
            await self._changes.wait()
            self._changes = trio.Event()
            names, self._changed = sorted(self._changed), set()
            try:
                await self._send({"topics_changed": names})
            except (trio.BrokenResourceError, trio.ClosedResourceError, OSError):
                return  # the supervisor is gone: _watch_supervisor shuts the worker down

    async def _tell_alive(self, interval: float) -> None:
        """Tell the supervisor every `interval` seconds that this worker's event loop runs (its watchdog)."""
        await self._joined.wait()
        while self._control is not None:
            try:
                await self._send({"alive": True})
            except (trio.BrokenResourceError, trio.ClosedResourceError, OSError):
                return  # the supervisor is gone: _watch_supervisor shuts the worker down
            await trio.sleep(interval)

    async def _watch_supervisor(self, gateway) -> None:
        await self._joined.wait()
        if self._control is None:
            return
        while (message := await self._receive()) is not None:
            if isinstance(message.get("refresh"), list):  # topics another worker changed just now
                await self.look_up(gateway.engine, [str(name) for name in message["refresh"]])
        if gateway.state not in ("stopping", "stopped"):
            log.error("worker %d: the supervisor went away: shutting down", self.index)
        gateway.request_shutdown()

    def members(self) -> list[Member]:
        """Every worker, once the supervisor told their addresses (`join`); before, none. (Each kind of address is
        told for every worker or for none: no Kafka listener, no brokers; no native listener, no native relays.)"""
        lists = (self.brokers, self.natives, self.tanks, self.handovers)
        return [Member(i, *(_at(addresses, i) for addresses in lists)) for i in range(max(map(len, lists)))]

    # -- the control socket ----------------------------------------------------------------------------------
    async def _send(self, message: dict) -> None:
        async with self._sending:
            await self._control.send_all(json.dumps(message).encode() + b"\n")

    async def _receive(self) -> dict | None:
        """The next JSON line from the supervisor; None once the socket is closed."""
        while b"\n" not in self._buffer:
            try:
                data = await self._control.receive_some(65536)
            except (trio.BrokenResourceError, trio.ClosedResourceError, OSError):
                data = b""
            if not data:
                return None
            self._buffer += data
        line, _, self._buffer = self._buffer.partition(b"\n")
        return json.loads(line)


def _at(addresses: list, index: int):
    return addresses[index] if index < len(addresses) else None


# -- the supervisor ----------------------------------------------------------------------------------------------

def worker_overrides(config: Config, index: int, ports: dict[str, int] | None = None) -> list[str]:
    """The `--set` flags of worker `index`: each listener's own port (`_own_port`; 0 stays 0: the worker picks one and
    tells), but 0 for its own native and TANK listeners (the configured port is the shared one) — or, for a worker
    started again, the ports it had (`ports`: listener name -> port) —, and the advertised Kafka port likewise."""
    out = []
    for name, lc in config.listeners.items():
        if not lc.enabled:
            continue
        if ports is not None and name in ports:
            out.append(f"listeners.{name}.port={ports[name]}")
        elif name in SHARED:
            out.append(f"listeners.{name}.port=0")
        elif lc.port:
            out.append(f"listeners.{name}.port={_own_port(name, lc.port, index)}")
    if config.kafka.advertised_port:
        out.append(f"kafka.advertised_port={config.kafka.advertised_port + index}")
    return out


def _own_port(name: str, port: int, index: int) -> int:
    """Worker `index`'s own port for listener `name` configured on `port`: port + index — but port + 1 + index for
    the admin listener, whose configured port the supervisor serves."""
    return port + index + (name == ADMIN)


def _port_problem(config: Config) -> str | None:
    last = config.workers - 1
    for name, lc in config.listeners.items():
        top = _own_port(name, lc.port, last)
        if lc.enabled and lc.port and top > 65535 and name not in SHARED:
            return (f"listeners.{name}.port {lc.port} + {top - lc.port} (worker {last}'s port) is beyond 65535: "
                    f"lower the port or workers")
    if config.kafka.advertised_port and config.kafka.advertised_port + last > 65535:
        return f"kafka.advertised_port {config.kafka.advertised_port} + {last} is beyond 65535"
    return None


def entry_sockets(config: Config, count: int) -> dict[str, list[socket.socket]]:
    """For each enabled listener of `SHARED`: `count` listening sockets on its configured host and port, one per
    worker, bound with SO_REUSEPORT so the kernel spreads new connections over them (port 0: the first picks the
    port, the others join it). The supervisor holds them for its life, so a worker started again serves the same
    socket — the connections that arrived meanwhile wait in its backlog. Raises `ListenerError`."""
    out: dict[str, list[socket.socket]] = {}
    try:
        for name in SHARED:
            lc = config.listeners.get(name)
            if lc is None or not lc.enabled:
                continue
            port, socks = lc.port, out.setdefault(name, [])
            try:
                family, kind, proto, _, address = socket.getaddrinfo(lc.host, port, type=socket.SOCK_STREAM,
                                                                     flags=socket.AI_PASSIVE)[0]
                for _ in range(count):
                    sock = socket.socket(family, kind, proto)
                    socks.append(sock)
                    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
                    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEPORT, 1)
                    sock.bind(address[:1] + (port,) + address[2:])
                    sock.listen(socket.SOMAXCONN)
                    port = sock.getsockname()[1]
            except OSError as exc:
                raise ListenerError(name, lc.host, port, exc) from exc
    except BaseException:
        _close_entries(out)
        raise
    return out


def relay_sockets(config: Config, count: int) -> tuple[dict[str, list[socket.socket]], dict[str, list[str]]]:
    """For each enabled listener of `SHARED`: one relay socket per worker (`relays.py`), named for a new run — and
    when there is one, a hand-over socket per worker (`HANDOVER`, `handover.py`); and their names. The supervisor
    holds them for its life, so a worker started again serves the same socket (the relays that arrived meanwhile
    wait in its backlog) and no other process can take the name meanwhile. Raises OSError naming the socket when
    one cannot be bound."""
    run = new_run()
    names = {name: [relay_address(run, i, name) for i in range(count)] for name in SHARED
             if (lc := config.listeners.get(name)) is not None and lc.enabled}
    if names:
        names[HANDOVER] = [relay_address(run, i, HANDOVER) for i in range(count)]
    out: dict[str, list[socket.socket]] = {}
    try:
        for name, addresses in names.items():
            out[name] = []
            for address in addresses:
                out[name].append(bind_relay(address))
    except BaseException:
        _close_entries(out)
        raise
    return out, names


def _close_entries(entries: dict[str, list[socket.socket]]) -> None:
    for socks in entries.values():
        for sock in socks:
            sock.close()


class _Worker:
    """The supervisor's view of one worker process."""

    def __init__(self, index: int, proc: subprocess.Popen, control: socket.socket) -> None:
        self.index = index
        self.proc = proc
        self.control = control
        self.buffer = b""
        self.listening: dict | None = None
        self.kafka: list | None = None
        self.ready = False
        self.told = False  # it was sent the other workers' addresses
        self.ports: dict[str, int] | None = None  # the ports it was told to listen on (a worker started again)
        self.closed = False
        self.stopped = False
        self.reported = False  # its exit was logged
        self.restarts = 0  # times its index was started again before this process
        self.heard = time.monotonic()  # when it last sent a message (the watchdog counts from its readiness)

    def stop(self) -> None:
        """SIGTERM, once: a graceful stop."""
        if not self.stopped and self.proc.poll() is None:
            self.stopped = True
            self.proc.send_signal(signal.SIGTERM)

    def messages(self) -> list[dict]:
        """The whole lines read so far (call when the socket is readable); `closed` once it is at its end."""
        try:
            data = self.control.recv(65536)
        except OSError:
            data = b""
        if not data:
            self.closed = True
            return []
        self.buffer += data
        self.heard = time.monotonic()
        *lines, self.buffer = self.buffer.split(b"\n")
        return [json.loads(line) for line in lines if line.strip()]

    def send(self, message: dict) -> None:
        try:
            self.control.sendall(json.dumps(message).encode() + b"\n")
        except OSError:
            pass  # it died: noticed by its exit


def supervise(config: Config, argv: list[str], ready_file: str | None) -> int:
    """Run `config.workers` worker processes until SIGTERM/SIGINT or until one of them dies; the exit status.
    `argv` are the `logway serve` arguments the workers get (configuration file, data directory, --set flags).
    StorageError when the data directory is locked (another gateway runs on it)."""
    count = config.workers
    problem = _port_problem(config)
    if problem is None and not RELAYS_SUPPORTED:
        problem = f"workers: {count} needs Linux (the workers relay requests over abstract Unix sockets)"
    if problem is not None:
        print(f"logway: configuration error: {problem}", file=sys.stderr)
        return 2
    engine = LogEngine(config.data_dir, STORAGE_FORMATS, config.storage.topic_defaults,
                       share=Share(count, leaders(count)))
    try:
        entries = entry_sockets(config, count)
        try:
            relays, relay_names = relay_sockets(config, count)
        except BaseException:
            _close_entries(entries)
            raise
    except BaseException:
        engine.close(clean=engine.clean_start)
        raise
    shared = {name: socks[0].getsockname()[:2] for name, socks in entries.items()}
    workers: list[_Worker] = []
    try:
        admin = _start_admin(config, workers)
    except BaseException:
        _close_entries(entries)
        _close_entries(relays)
        engine.close(clean=engine.clean_start)
        raise
    if admin is not None:
        shared[ADMIN] = admin.address
    stopping = False

    def on_signal(signum, frame) -> None:
        nonlocal stopping
        if not stopping:
            log.info("received %s: stopping %d workers", signal.Signals(signum).name, count)
        stopping = True
        for w in workers:
            w.stop()

    previous = {s: signal.signal(s, on_signal) for s in (signal.SIGTERM, signal.SIGINT)}
    selector = selectors.DefaultSelector()
    status: int | None = 1

    def spawn(i: int, clean: bool, ports: dict[str, int] | None = None) -> _Worker:
        ours, theirs = socket.socketpair()
        mine = {name: socks[i].fileno() for name, socks in entries.items()}
        relay = {name: socks[i].fileno() for name, socks in relays.items()}
        env = dict(os.environ, **{_ENV: f"{i}/{count}/{int(clean)}", _ENV_FD: str(theirs.fileno()),
                                  _ENV_ENTRIES: ",".join(f"{name}={fd}" for name, fd in mine.items()),
                                  _ENV_RELAYS: ",".join(f"{name}={fd}" for name, fd in relay.items())})
        cmd = [sys.executable, "-m", "logway.cli", "serve", *argv]
        for item in worker_overrides(config, i, ports):
            cmd += ["--set", item]
        # Its own session: a terminal's ^C reaches the supervisor only, which passes on one SIGTERM (a second
        # signal could arrive after the worker's gateway stopped listening for signals, and kill it).
        proc = subprocess.Popen(cmd, env=env, pass_fds=[theirs.fileno(), *mine.values(), *relay.values()],
                                stdin=subprocess.DEVNULL, start_new_session=True)
        theirs.close()
        w = _Worker(i, proc, ours)
        w.ports = ports
        selector.register(ours, selectors.EVENT_READ, w)
        return w

    try:
        workers.extend(spawn(i, engine.clean_start) for i in range(count))
        log.info("started %d workers (pids %s) over %s", count, ", ".join(str(w.proc.pid) for w in workers),
                 engine.data_dir)
        status = _run(workers, selector, ready_file, lambda: stopping, spawn, shared, relay_names,
                      config.worker_watchdog_ms / 1000)
    finally:
        for w in workers:
            w.stop()
            if not w.ready:  # still waiting for the brokers' addresses: the closed socket ends its wait
                w.control.close()
        _wait_all(workers, config.shutdown_timeout_ms / 1000 + _STOP_GRACE)
        for w in workers:
            w.control.close()
        selector.close()
        for s, handler in previous.items():
            signal.signal(s, handler)
        for w in workers:
            if w.proc.returncode and not w.reported:
                log.error("worker %d (pid %d) exited with status %d", w.index, w.proc.pid, w.proc.returncode)
        clean = bool(workers) and all(w.proc.returncode == 0 for w in workers)
        if admin is not None:
            admin.close()
        _close_entries(entries)
        _close_entries(relays)
        engine.close(clean=clean)
    if status is None:  # asked to stop: 0 if every worker stopped cleanly
        status = 0 if clean else 1
    return status


def _run(workers: list[_Worker], selector: selectors.BaseSelector, ready_file: str | None,
         stopping: Callable[[], bool], spawn: Callable[..., _Worker], shared: dict,
         relay_names: dict[str, list[str]], watchdog: float = 0.0) -> int | None:
    """Start-up (addresses in, brokers out, acknowledgements, the ready file), then watch the workers: one that dies
    — or, once ready, says nothing for `watchdog` seconds (0: never), and is killed — is started again on its ports
    (`spawn(index, clean, ports)`), at most `MAX_RESTARTS` times in `RESTART_WINDOW` seconds. None when asked to
    stop; the exit status when a worker failed to start, or died once too often."""
    started = False
    told: dict | None = None  # what every worker is told: the Kafka brokers, the native and TANK listeners
    restarts: dict[int, list[float]] = {w.index: [] for w in workers}
    due: dict[int, tuple[float, dict]] = {}  # index -> (when to start it again, its ports)
    while True:
        for key, _ in selector.select(timeout=0.2):
            w = key.data
            for message in w.messages():
                if "listening" in message:
                    w.listening, w.kafka = message["listening"], message["kafka"]
                elif message.get("ready"):
                    w.ready = True
                elif "topics_changed" in message:  # tell the others now (they also look every worker_refresh_ms)
                    for other in workers:
                        if other is not w and other.told:
                            other.send({"refresh": message["topics_changed"]})
            if w.closed:
                selector.unregister(w.control)
        if stopping():
            return None
        now = time.monotonic()
        if watchdog:
            for hung in [w for w in workers if w.ready and not w.reported and not w.stopped
                         and now - w.heard > watchdog]:
                log.error("worker %d (pid %d) said nothing for %.1f s (worker_watchdog_ms): killing it", hung.index,
                          hung.proc.pid, now - hung.heard)
                hung.proc.kill()
                hung.proc.wait()  # (reported as dead below, in this pass: never looked at again)
        for dead in [w for w in workers if not w.reported and w.proc.poll() is not None]:
            code = dead.proc.returncode
            dead.reported = True
            if not started:
                log.error("worker %d exited with status %d while starting: stopping the others", dead.index, code)
                return code if code in (1, 2) else 1
            recent = restarts[dead.index] = [t for t in restarts[dead.index] if now - t < RESTART_WINDOW]
            if len(recent) >= MAX_RESTARTS:
                log.error("worker %d (pid %d) exited with status %d after %d restarts in %d s: stopping the others",
                          dead.index, dead.proc.pid, code, len(recent), RESTART_WINDOW)
                return 1
            log.error("worker %d (pid %d) exited with status %d: starting it again on its ports (its partitions "
                      "are unavailable meanwhile)", dead.index, dead.proc.pid, code)
            if not dead.closed:
                selector.unregister(dead.control)
            dead.control.close()
            # the ports it listened on (or was to listen on, when it died again before telling them)
            ports = {name: addr[1] for name, addr in dead.listening.items()} if dead.listening else dead.ports
            due[dead.index] = (now + RESTART_DELAY * len(recent), ports)
        for index, (when, ports) in list(due.items()):
            if now >= when:
                del due[index]
                restarts[index].append(now)
                before = workers[index].restarts
                workers[index] = spawn(index, False, ports)
                workers[index].restarts = before + 1
                log.info("worker %d started again (pid %d)", index, workers[index].proc.pid)
        if told is None and all(w.listening is not None for w in workers):
            brokers = [w.kafka for w in workers]
            if any(b is None for b in brokers):
                brokers = []  # no Kafka listener: nothing to route
            told = {"brokers": brokers, **{name: relay_names.get(name, [None] * len(workers))
                                           for name in (*SHARED, HANDOVER)}}
        if told is not None:
            for w in workers:
                if w.listening is not None and not w.told:  # it acknowledges with {"ready": true}
                    w.send(told)  # (a worker started again is on the same ports: the same addresses)
                    w.told = True
        if not started and all(w.ready for w in workers):
            started = True
            _write_ready(ready_file, workers, shared)
            kafka = ", ".join("%s:%d" % tuple(w.kafka) for w in workers if w.kafka)
            log.info("%d workers ready%s", len(workers), f"; Kafka brokers {kafka}" if kafka else "")


def _start_admin(config: Config, workers: list[_Worker]):
    """The supervisor's admin listener (`admin/supervisor.py`) on the configured admin address, started; None when
    the admin listener is disabled. Raises `ListenerError` when it cannot listen."""
    lc = config.listeners.get(ADMIN)
    if lc is None or not lc.enabled:
        return None
    from ..admin.supervisor import SupervisorAdmin, WorkerView
    from ..listeners import warn_if_exposed
    from ..security import authentication_required
    from ..tls import server_ssl_context

    def addresses() -> list:
        return [w.listening.get(ADMIN) if w.listening else None for w in list(workers)]

    view = WorkerView(config.workers, addresses, lambda i: i < len(workers) and workers[i].ready,
                      lambda i: workers[i].restarts if i < len(workers) else 0)
    context = server_ssl_context(config.tls) if lc.tls else None
    admin = SupervisorAdmin(lc.host, lc.port, view, config.limits.request_timeout_ms / 1000, context,
                            config.tls.cert_file)
    try:
        admin.start()
    except ListenerError:
        raise
    except OSError as exc:
        raise ListenerError(ADMIN, lc.host, lc.port, OSError(exc.errno, os.strerror(exc.errno)) if exc.errno
                            else exc) from None
    log.info("admin listening on http%s://%s:%d for every worker (/metrics, /ready, /health)", "s" if lc.tls else "",
             *admin.address)
    warn_if_exposed(ADMIN, lc.host, logins=authentication_required(config), tls=lc.tls)
    return admin


def _write_ready(ready_file: str | None, workers: list[_Worker], shared: dict) -> None:
    """Worker 0's listeners under their names, worker i's with ".i" — but the shared ports (and the supervisor's
    admin listener) under the listeners' names, and worker 0's own native, TANK and admin listeners as "native.0",
    "tank.0" and "admin.0"."""
    if not ready_file:
        return
    info: dict = {}
    for w in workers:
        suffix = f".{w.index}" if w.index else ""
        info.update({name + (f".{w.index}" if name in shared else suffix): addr
                     for name, addr in w.listening.items()})
    info.update({name: list(addr) for name, addr in shared.items()})
    info["pid"] = os.getpid()
    tmp = ready_file + ".tmp"
    with open(tmp, "w") as f:
        json.dump(info, f)
    os.replace(tmp, ready_file)


def _wait_all(workers: list[_Worker], timeout: float) -> None:
    deadline = time.monotonic() + timeout
    for w in workers:
        try:
            w.proc.wait(max(deadline - time.monotonic(), 0.01))
        except subprocess.TimeoutExpired:
            log.error("worker %d did not stop in time: killed", w.index)
            w.proc.kill()
            w.proc.wait()
