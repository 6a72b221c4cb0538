"""The Kafka APIs of transactional producers: InitProducerId, AddPartitionsToTxn, AddOffsetsToTxn, EndTxn and
TxnOffsetCommit — thin mappings onto the gateway's transaction coordinator (`logway.gateway.transactions`), which
owns the state, its durability, fencing and timeouts. This broker is every transactional id's coordinator.

Errors as Kafka answers them: a fenced producer gets PRODUCER_FENCED from the versions that know it (EndTxn and
AddPartitionsToTxn v2+, Kafka 2.7's KIP-588 mapping) and INVALID_PRODUCER_EPOCH before; a producer id that is not
the transactional id's gets INVALID_PRODUCER_ID_MAPPING; a request out of order INVALID_TXN_STATE; a request while
the previous transaction completes CONCURRENT_TRANSACTIONS (the client retries).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from logway.codecs.kafka.api import admin as A
from logway.codecs.kafka.api import transactions as X
from logway.codecs.kafka.error_codes import ErrorCode as E

from ...errors import FAILURES
from ...steps import MAX_METADATA_BYTES
from ...transactions import (ConcurrentTransactions, Fenced, InvalidTimeout, InvalidTxnState, PeerUnavailable,
                             ProducerIdMismatch, TxnError)
from .errors import error_code

if TYPE_CHECKING:  # pragma: no cover
    from .state import BrokerState

__all__ = ["init_producer_id", "add_partitions_to_txn", "add_offsets_to_txn", "end_txn", "txn_offset_commit",
           "txn_error_code"]

_CODES = {
    ConcurrentTransactions: E.CONCURRENT_TRANSACTIONS,
    PeerUnavailable: E.CONCURRENT_TRANSACTIONS,  # (workers: N) another worker did not answer: retried
    InvalidTxnState: E.INVALID_TXN_STATE,
    ProducerIdMismatch: E.INVALID_PRODUCER_ID_MAPPING,
    InvalidTimeout: E.INVALID_TRANSACTION_TIMEOUT,
}


def txn_error_code(exc: TxnError, *, knows_fenced: bool = True) -> int:
    """The Kafka error code of a coordinator refusal (`knows_fenced`: the request version has PRODUCER_FENCED)."""
    if isinstance(exc, Fenced):
        return E.PRODUCER_FENCED if knows_fenced else E.INVALID_PRODUCER_EPOCH
    return _CODES[type(exc)]


async def init_producer_id(broker: "BrokerState", body, version, conn):
    def answer(code, pid=-1, epoch=-1):
        return A.InitProducerIdResponse(throttle_time_ms=0, error_code=code, producer_id=pid, producer_epoch=epoch)

    if body.transactional_id is None:
        # An idempotent producer: a fresh id, epoch 0 — also when it names its current one (v3+): such a producer
        # bumps its epoch itself (KIP-360), and asks for a new id only to start afresh, as Kafka answers it.
        pid = await broker.steps.new_producer_id()
        return answer(E.NONE, pid, 0)
    if not body.transactional_id:
        return answer(E.INVALID_REQUEST)
    current = None
    if version >= 3 and (body.producer_id, body.producer_epoch) != (-1, -1):  # KIP-360: bump this producer
        current = (body.producer_id, body.producer_epoch)
    try:
        pid, epoch = await broker.transactions.init_producer_id(body.transactional_id, body.transaction_timeout_ms,
                                                                current)
    except TxnError as exc:  # (v4+ knows PRODUCER_FENCED)
        return answer(txn_error_code(exc, knows_fenced=version >= 4 or current is None))
    except FAILURES as exc:
        return answer(error_code(exc))
    return answer(E.NONE, pid, epoch)


async def add_partitions_to_txn(broker: "BrokerState", body, version, conn):
    if version < 4:
        results = await _add_partitions(broker, body.transactional_id, body.producer_id, body.producer_epoch,
                                        body.topics, version, verify_only=False)
        return X.AddPartitionsToTxnResponse(throttle_time_ms=0, results=results)
    # v4+ (KIP-890 part 1: how brokers ask the coordinator): several transactions, each maybe only verified.
    return X.AddPartitionsToTxnResponse(throttle_time_ms=0, error_code=E.NONE, results_by_transaction=[
        X.AddPartitionsToTxnResult(transactional_id=txn.transactional_id, topic_results=await _add_partitions(
            broker, txn.transactional_id, txn.producer_id, txn.producer_epoch, txn.topics, version,
            verify_only=txn.verify_only))
        for txn in body.transactions])


async def _add_partitions(broker: "BrokerState", tid: str, producer_id: int, epoch: int, topics_asked, version: int,
                          *, verify_only: bool) -> list:
    """One transaction's AddPartitionsToTxn: the results per topic. `verify_only`: answer whether each partition
    is in the open transaction (INVALID_TXN_STATE if not) without adding anything."""
    topics = broker.steps.topics.names
    missing = {(t.name, p) for t in topics_asked for p in t.partitions
               if t.name not in topics or not 0 <= p < len(topics[t.name].partitions)}
    wanted = [(t.name, p) for t in topics_asked for p in t.partitions]
    codes: dict[tuple[str, int], int] = {}
    code = E.NONE
    if missing:  # nothing is added: the unknown ones say why, the others were not attempted
        code = E.OPERATION_NOT_ATTEMPTED
    elif verify_only:
        for topic, partition in wanted:
            try:
                broker.transactions.check_produce(producer_id, epoch, topic, partition)
            except TxnError as exc:
                codes[(topic, partition)] = txn_error_code(exc)
    else:
        try:
            await broker.transactions.add_partitions(tid, producer_id, epoch, wanted)
        except TxnError as exc:
            code = txn_error_code(exc, knows_fenced=version >= 2)
        except FAILURES as exc:
            code = error_code(exc)
    return [X.AddPartitionsToTxnTopicResult(name=t.name, results=[
        X.AddPartitionsToTxnPartitionResult(
            partition_index=p, error_code=E.UNKNOWN_TOPIC_OR_PARTITION if (t.name, p) in missing
            else codes.get((t.name, p), code))
        for p in t.partitions])
        for t in topics_asked]


async def add_offsets_to_txn(broker: "BrokerState", body, version, conn):
    code = E.NONE
    if not body.group_id:
        code = E.INVALID_GROUP_ID
    else:
        try:
            await broker.transactions.add_offsets(body.transactional_id, body.producer_id, body.producer_epoch,
                                                  body.group_id)
        except TxnError as exc:
            code = txn_error_code(exc, knows_fenced=version >= 2)
        except FAILURES as exc:
            code = error_code(exc)
    return X.AddOffsetsToTxnResponse(throttle_time_ms=0, error_code=code)


async def end_txn(broker: "BrokerState", body, version, conn):
    code = E.NONE
    try:
        await broker.transactions.end_txn(body.transactional_id, body.producer_id, body.producer_epoch,
                                          bool(body.committed))
    except TxnError as exc:
        code = txn_error_code(exc, knows_fenced=version >= 2)
    except FAILURES as exc:
        code = error_code(exc)
    # v5 answers the producer's id and epoch for the next transaction: unchanged here (transactions v2, which bumps
    # the epoch at every end, is not offered: no feature flags are advertised).
    ok = code == E.NONE
    return X.EndTxnResponse(throttle_time_ms=0, error_code=code, producer_id=body.producer_id if ok else -1,
                            producer_epoch=body.producer_epoch if ok else -1)


async def txn_offset_commit(broker: "BrokerState", body, version, conn):
    topics = broker.steps.topics.names
    offsets = {}
    codes: dict[tuple[str, int], int] = {}
    for t in body.topics:
        for p in t.partitions:
            key = (t.name, p.partition_index)
            if p.committed_offset < 0:
                codes[key] = E.INVALID_REQUEST
            elif len((p.committed_metadata or "").encode("utf-8", "replace")) > MAX_METADATA_BYTES:
                codes[key] = E.OFFSET_METADATA_TOO_LARGE
            elif t.name not in topics or not 0 <= p.partition_index < len(topics[t.name].partitions):
                codes[key] = E.UNKNOWN_TOPIC_OR_PARTITION
            else:
                offsets[key] = (p.committed_offset, p.committed_metadata or "")
    code = E.NONE
    if not body.group_id:
        code = E.INVALID_GROUP_ID
    elif version >= 3 and (body.generation_id >= 0 or body.member_id or body.group_instance_id):
        # KIP-447: the consumer committing must still be a member of its generation (a zombie is fenced)
        code = broker.groups.validate_commit(body.group_id, body.generation_id, body.member_id,
                                             body.group_instance_id, version, transactional=True)
    if code == E.NONE and offsets:
        try:
            await broker.transactions.offset_commit(body.transactional_id, body.producer_id, body.producer_epoch,
                                                    body.group_id, offsets)
        except TxnError as exc:  # (Kafka's group coordinator answers a fenced producer with the old code)
            code = txn_error_code(exc, knows_fenced=False)
        except FAILURES as exc:
            code = error_code(exc)
    return X.TxnOffsetCommitResponse(throttle_time_ms=0, topics=[
        X.TxnOffsetCommitResponseTopic(name=t.name, partitions=[
            X.TxnOffsetCommitResponsePartition(partition_index=p.partition_index,
                                               error_code=codes.get((t.name, p.partition_index), code))
            for p in t.partitions])
        for t in body.topics])
