"""`KafkaBroker`: the Kafka API table and what every API handler works with — the storage steps, the group
coordinator, the transaction coordinator, the idempotent producers' state, the gateway's security (whose
authorization layer, `authz.KafkaAuthz`, every request goes through first) and this node's advertised address.
Each API lives in the module of its family (`records`, `offsets`, `groups`, `admin`, `transactions`) as
`async def api(broker, body, version, conn)`.

As one member of a cluster (`workers: N`), `cluster` (`routing.KafkaRouting`) makes this broker node i of N:
it routes each request before the API modules see it. With one, `cluster` is None and nothing changes."""

from __future__ import annotations

from logway.codecs.kafka.api import admin as A
from logway.codecs.kafka.api import api_versions as V
from logway.codecs.kafka.api import cluster as K
from logway.codecs.kafka.api import configs as C
from logway.codecs.kafka.api import consumer_groups as CG
from logway.codecs.kafka.api import fetch as F
from logway.codecs.kafka.api import groups as G
from logway.codecs.kafka.api import list_offsets as L
from logway.codecs.kafka.api import metadata as M
from logway.codecs.kafka.api import offsets as O
from logway.codecs.kafka.api import produce as P
from logway.codecs.kafka.api import share_groups as S
from logway.codecs.kafka.api.registry import advertised
from logway.codecs.kafka.api.sasl import SASL_AUTHENTICATE_KEY, SASL_HANDSHAKE_KEY
from logway.codecs.kafka.api import transactions as X

from . import (admin, configs, consumer_groups, group_admin, groups, offsets, records, security, share_groups,
               transactions)
from .state import BrokerState
from .topic_ids import name_topics

#: api key -> handler, for every API but the two SASL ones (the session answers those).
HANDLERS = {
    P.API_KEY: records.produce,
    F.API_KEY: records.fetch,
    L.API_KEY: records.list_offsets,
    M.API_KEY: admin.metadata,
    O.OFFSET_COMMIT_KEY: offsets.offset_commit,
    O.OFFSET_FETCH_KEY: offsets.offset_fetch,
    G.FIND_COORDINATOR_KEY: groups.find_coordinator,
    G.JOIN_GROUP_KEY: groups.join_group,
    G.HEARTBEAT_KEY: groups.heartbeat,
    G.LEAVE_GROUP_KEY: groups.leave_group,
    G.SYNC_GROUP_KEY: groups.sync_group,
    G.DESCRIBE_GROUPS_KEY: groups.describe_groups,
    G.LIST_GROUPS_KEY: groups.list_groups,
    V.API_KEY: admin.api_versions,
    A.CREATE_TOPICS_KEY: admin.create_topics,
    A.DELETE_TOPICS_KEY: admin.delete_topics,
    A.INIT_PRODUCER_ID_KEY: transactions.init_producer_id,
    X.ADD_PARTITIONS_TO_TXN_KEY: transactions.add_partitions_to_txn,
    X.ADD_OFFSETS_TO_TXN_KEY: transactions.add_offsets_to_txn,
    X.END_TXN_KEY: transactions.end_txn,
    X.TXN_OFFSET_COMMIT_KEY: transactions.txn_offset_commit,
    A.DELETE_RECORDS_KEY: admin.delete_records,
    C.DESCRIBE_CONFIGS_KEY: configs.describe_configs,
    C.ALTER_CONFIGS_KEY: configs.alter_configs,
    K.DESCRIBE_LOG_DIRS_KEY: admin.describe_log_dirs,
    A.CREATE_PARTITIONS_KEY: admin.create_partitions,
    G.DELETE_GROUPS_KEY: group_admin.delete_groups,
    C.INCREMENTAL_ALTER_CONFIGS_KEY: configs.incremental_alter_configs,
    O.OFFSET_DELETE_KEY: group_admin.offset_delete,
    K.DESCRIBE_CLUSTER_KEY: admin.describe_cluster,
    CG.CONSUMER_GROUP_HEARTBEAT_KEY: consumer_groups.consumer_group_heartbeat,
    CG.CONSUMER_GROUP_DESCRIBE_KEY: consumer_groups.consumer_group_describe,
    S.SHARE_GROUP_HEARTBEAT_KEY: share_groups.share_group_heartbeat,
    S.SHARE_GROUP_DESCRIBE_KEY: share_groups.share_group_describe,
    S.SHARE_FETCH_KEY: share_groups.share_fetch,
    S.SHARE_ACKNOWLEDGE_KEY: share_groups.share_acknowledge,
    S.DESCRIBE_SHARE_GROUP_OFFSETS_KEY: share_groups.describe_share_group_offsets,
    S.ALTER_SHARE_GROUP_OFFSETS_KEY: share_groups.alter_share_group_offsets,
    S.DELETE_SHARE_GROUP_OFFSETS_KEY: share_groups.delete_share_group_offsets,
    **security.HANDLERS,
}

#: What this broker advertises and its codec accepts: the codec's versions of the keys it answers — its handlers,
#: and SASL, which the session answers (the codec knows more keys than the broker serves).
SERVED = advertised(set(HANDLERS) | {SASL_HANDSHAKE_KEY, SASL_AUTHENTICATE_KEY})
#: What a broker that is one of several workers serves: share groups need one worker (their state is one store).
SERVED_BY_WORKERS = advertised(set(SERVED) - share_groups.SHARE_KEYS)


class KafkaBroker(BrokerState):
    """A Kafka broker: its state (`state.BrokerState`) and the dispatch of each request to its API module."""

    #: The api keys and versions it advertises (`SERVED_BY_WORKERS` once it is one of several workers).
    served = SERVED

    async def handle(self, request, conn):
        """The response body for a request (None: no response, a Produce with acks=0): what the connection's
        principal may do of it (`authz.py`: topics named, not by id, by then), served."""
        name_topics(self.steps.topics, request.api_key, request.api_version, request.body)  # (Produce, Fetch v13+)
        return await self.authz.handle(request, conn, self._serve)

    async def _serve(self, request, conn):
        if self.cluster is not None:
            return await self.cluster.handle(self, request, conn, HANDLERS)
        return await HANDLERS[request.api_key](self, request.body, request.api_version, conn)
