"""logway.storage.pg — the postgres storage backend: every topic, partition, batch, committed offset, producer id
and transaction state of a gateway in one PostgreSQL database, behind the interface of the file backend
(`PgEngine` for `LogEngine`, `PgPartitionLog` for `PartitionLog`). Imported only when configured (it needs psycopg).

Modules: `engine` (opening, the topic catalogue, the group commit's transaction and what a lost connection leaves
unknown), `partition` (appends, reads, retention of one partition), `rows` (rows in memory, the readers' cache),
`txns` (transactions of a partition), `offsets` (committed offsets), `states` (coordinators' states, producer ids),
`schema` (the tables and their migrations), `db` (connections, the pool, errors), `migrate` (a data
directory copied into the database and verified: `logway migrate`).
"""

from .db import conninfo
from .engine import PgEngine
from .partition import PgPartitionLog
from .schema import SCHEMA_VERSION

__all__ = ["PgEngine", "PgPartitionLog", "SCHEMA_VERSION", "conninfo"]
