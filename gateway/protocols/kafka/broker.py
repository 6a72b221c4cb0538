"""`KafkaBroker`: the Kafka API table and what every API handler works with — the storage steps, the group
coordinator, the idempotent producers' state and this node's advertised address. Each API lives in the module of
its family (`records`, `offsets`, `groups`, `admin`) as `async def api(broker, body, version, conn)`."""

from __future__ import annotations

from logway.codecs.kafka.api import admin as A
from logway.codecs.kafka.api import api_versions as V
from logway.codecs.kafka.api import fetch as F
from logway.codecs.kafka.api import groups as G
from logway.codecs.kafka.api import list_offsets as L
from logway.codecs.kafka.api import metadata as M
from logway.codecs.kafka.api import offsets as O
from logway.codecs.kafka.api import produce as P

from ...steps import Steps
from . import admin, groups, offsets, records
from .coordinator import GroupCoordinator
from .producers import ProducerStates

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
    A.INIT_PRODUCER_ID_KEY: admin.init_producer_id,
}


class KafkaBroker:
    #: This broker's node id: the controller, every partition's leader, every group's coordinator.
    node_id = 0

    def __init__(self, steps: Steps, config, coordinator: GroupCoordinator, advertised: tuple[str, int]) -> None:
        self.steps = steps
        self.engine = steps.engine
        self.config = config
        self.coordinator = coordinator
        self.advertised = advertised
        self.producers = ProducerStates()

    async def handle(self, request, conn):
        """The response body for a request (None: no response, a Produce with acks=0)."""
        return await HANDLERS[request.api_key](self, request.body, request.api_version, conn)
