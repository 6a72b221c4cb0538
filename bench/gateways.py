"""Gateways for the Kafka benchmarks that compare backends and gateway counts (issue 36): the database a postgres run
uses (`Database`), the gateway processes over it (`Gateways`) and what Kafka's metadata says about who leads
(`metadata`, `Gateways.settle`).

- `Database(backend, dsn, server, run_no)`: the gateway settings of a run — none for local files; for postgres a
  fresh database of the throwaway `PostgresServer` (dropped after the run, its server's CPU seconds readable), or a
  fresh schema of `dsn` (dropped after).
- `Gateways(root, count, *settings)`: `count` `logway serve` processes (`GatewayProcess`). One gateway runs as a
  single gateway does (`storage.postgres.cluster` off); two or more run in cluster mode over one database, each
  leading the partitions of its slots. `settle(topic, partitions)` waits until every gateway's Kafka metadata lists
  all of them as brokers and every partition has a live leader, each gateway leading some when there are enough
  partitions — librdkafka routes each partition to its leader by itself, so a client given every gateway as its
  bootstrap spreads over them.
"""

from __future__ import annotations

import os
import time
from contextlib import contextmanager

from .launcher import GatewayProcess

__all__ = ["Database", "Gateways", "kafka_address", "metadata", "postgres_server"]

#: How long the gateways of a run may take to agree on who leads what (a member's first share of the slots comes
#: within a tick or two of its lease, a third of `storage.postgres.lease_ms` each).
SETTLE_SECONDS = 30.0


@contextmanager
def postgres_server(needed: bool):
    """A throwaway PostgreSQL server of its own (`PostgresServer`), started, when `needed` — destroyed after;
    else None."""
    if not needed:
        yield None
        return
    from .postgres import PostgresServer

    server = PostgresServer()
    try:
        server.start()
        yield server
    finally:
        server.destroy()


class Database:
    """The gateway settings of a run on `backend`, and a function giving the database server's CPU seconds (None
    without one): postgres on a fresh database of the throwaway `server`, or a fresh schema of `dsn` (dropped
    after the run)."""

    def __init__(self, backend: str, dsn: str, server, run_no: int) -> None:
        self.backend, self.dsn, self.server = backend, dsn, server
        self.schema = f"bench_{os.getpid()}_{run_no}"
        self.database = None

    def __enter__(self):
        if self.backend == "local":
            return (), None
        if self.server is not None:
            self.database = self.server.create_database()
            return ("storage.backend=postgres", f"storage.postgres.dsn={self.server.dsn(self.database)}"), \
                self.server.cpu_seconds
        return ("storage.backend=postgres", f"storage.postgres.dsn={self.dsn}",
                f"storage.postgres.schema={self.schema}"), None

    def __exit__(self, *exc) -> None:
        if self.database is not None:
            self.server.drop_database(self.database)
        elif self.backend == "postgres":
            import psycopg

            with psycopg.connect(self.dsn, autocommit=True) as conn:
                conn.execute(f"DROP SCHEMA IF EXISTS {self.schema} CASCADE")


class Gateways:
    """`count` gateway processes, data directories `<root>/gateway-<i>`, with `settings` (`--set` items); two or
    more in cluster mode (`storage.postgres.cluster`, `lease_ms` when given). Started one after the other, so the
    first is member 0 (the coordinator and controller: it holds slot 0)."""

    def __init__(self, root: str, count: int, *settings: str, lease_ms: int | None = None, stderr=None) -> None:
        """`stderr`: where the gateways' logs go (a file; None: this process's stderr)."""
        cluster = ()
        if count > 1:
            cluster = ("storage.postgres.cluster=true",
                       *((f"storage.postgres.lease_ms={lease_ms}",) if lease_ms else ()))
        self.members: list[GatewayProcess] = []
        self._admins: dict[int, object] = {}  # AdminClient by member index, made when first asked through
        try:
            for i in range(count):
                self.members.append(GatewayProcess(os.path.join(root, f"gateway-{i}"), *settings, *cluster,
                                                   stderr=stderr))
        except BaseException:
            self.stop()
            raise

    @property
    def bootstrap(self) -> str:
        """Every gateway's Kafka listener, as a client's bootstrap.servers."""
        return ",".join(kafka_address(gw) for gw in self.members)

    @property
    def pids(self) -> list[int]:
        return [gw.pid for gw in self.members]

    @property
    def admins(self) -> list[tuple[str, int]]:
        return [gw.addresses["admin"] for gw in self.members if "admin" in gw.addresses]

    def settle(self, topic: str, partitions: int, timeout: float = SETTLE_SECONDS) -> list[int]:
        """Wait until each gateway's Kafka metadata lists every gateway as a broker and a leader among them for
        every partition of `topic`, each leading some when `partitions` ≥ the gateways; each partition's leader
        (node id)."""
        want = len(self.members)
        deadline = time.monotonic() + timeout
        for i in range(want):
            while True:
                brokers, found = metadata(self.admin(i), topic, partitions)
                if (len(brokers) == want and set(found) <= set(brokers)
                        and (partitions < want or set(found) == set(brokers))):
                    break
                if time.monotonic() > deadline:
                    raise RuntimeError(f"the {want} gateways did not settle within {timeout:g} s: brokers "
                                       f"{sorted(brokers)}, leaders of {topic!r} {found}")
                time.sleep(0.1)
        return found

    def node_id(self, i: int) -> int:
        """The node id (member id) Kafka clients know gateway `i` by."""
        brokers, _ = metadata(self.admin(i))
        return next(node for node, address in brokers.items() if address == kafka_address(self.members[i]))

    def admin(self, i: int):
        """A librdkafka AdminClient bootstrapped with gateway `i` alone, kept for the run."""
        if i not in self._admins:
            from confluent_kafka.admin import AdminClient

            # log_level 2: a dead gateway's refused connections are expected here, not worth a line each
            self._admins[i] = AdminClient({"bootstrap.servers": kafka_address(self.members[i]), "log_level": 2,
                                           "log.connection.close": False})
        return self._admins[i]

    def routes(self, topic: str, partitions: int) -> dict[int, tuple[str, int]]:
        """Each partition of `topic`'s leader's Kafka address, once settled — where a Kafka client sends its
        requests."""
        leaders = self.settle(topic, partitions)
        brokers, _ = metadata(self.admin(0))
        return {p: _host_port(brokers[node]) for p, node in enumerate(leaders)}

    def stop(self) -> int:
        """Stop every gateway (SIGTERM, a graceful shutdown); the first non-zero exit status, else 0 (one killed
        earlier does not count)."""
        self._admins.clear()  # (destroyed before the gateways stop: no reconnect attempts logged)
        statuses = [gw.stop() for gw in self.members if gw.proc.poll() is None]
        return next((status for status in statuses if status), 0)


def kafka_address(gw: GatewayProcess) -> str:
    return "%s:%d" % gw.addresses["kafka"]


def _host_port(address: str) -> tuple[str, int]:
    host, _, port = address.rpartition(":")
    return host, int(port)


def metadata(admin, topic: str | None = None, partitions: int = 0,
             timeout: float = 5.0) -> tuple[dict[int, str], list[int]]:
    """({node id: "host:port"} of the brokers, the leader of each of the first `partitions` partitions of `topic`
    (-1: none, or the topic unknown)) from one Metadata request through librdkafka's AdminClient `admin`."""
    md = admin.list_topics(topic, timeout=timeout)
    brokers = {node: f"{b.host}:{b.port}" for node, b in md.brokers.items()}
    parts = {}
    if topic is not None and topic in md.topics and md.topics[topic].error is None:
        parts = md.topics[topic].partitions
    return brokers, [parts[p].leader if p in parts else -1 for p in range(partitions)]
