"""`PgTxnIndex`: the transactions of one partition of the postgres backend (`txns` table, logway.storage.pg.schema).

The same state as the file backend's `TxnIndex` (`TxnState`: open transactions, aborted ones, the last stable
offset), kept as one row per transaction: written with the group commit that also writes the transaction's
batches (one database transaction: a batch is never committed without the row that says whose it is), deleted by
the commit that writes a committed transaction's end (nothing is left to know of it), kept with its end for an
aborted one until retention or DeleteRecords pass it. What changed since the last commit is `take`n by the commit
and given back when it fails.
"""

from __future__ import annotations

from ..txnindex import _COMMITTED, _MARKER, DATA, END, AbortedTxn, TxnState, _Open

__all__ = ["PgTxnIndex"]


class PgTxnIndex(TxnState):
    def __init__(self, rows=()) -> None:
        """`rows`: the partition's rows of `txns` (producer_id, first_offset, epoch, end_offset, ranges)."""
        super().__init__()
        #: (producer id, first offset) → the transaction's row as it is to be written (None: deleted), since the
        #: last commit
        self._changes: dict[tuple[int, int], tuple | None] = {}
        for pid, first, epoch, end, flat in sorted(rows, key=lambda r: r[1]):
            ranges = [(flat[i], flat[i + 1]) for i in range(0, len(flat), 2)]
            if end is None:
                self._open[pid] = _Open(epoch, first, ranges)
            else:
                self._aborted.append(AbortedTxn(pid, first, end, tuple(ranges)))

    def add_data(self, producer_id: int, epoch: int, first: int, last: int) -> None:
        """The producer's open transaction writes offsets first..last (with the batch, in the same commit)."""
        self._apply(DATA, 0, epoch, producer_id, first, last)
        txn = self._open[producer_id]
        self._changes[(producer_id, txn.first)] = (txn.epoch, None, _flat(txn.ranges))

    def end(self, producer_id: int, epoch: int, *, committed: bool, offset: int, marker: bool) -> bool:
        """The producer's transaction ended at `offset` (its marker, or the log end for a format without markers);
        False when it has none open here."""
        txn = self._open.get(producer_id)
        if txn is None:
            return False
        self._apply(END, (_COMMITTED if committed else 0) | (_MARKER if marker else 0), epoch, producer_id, offset,
                    offset)
        self._changes[(producer_id, txn.first)] = None if committed else (txn.epoch, offset, _flat(txn.ranges))
        return True

    def copy_from(self, source: TxnState) -> None:
        """Take another partition's transactions as they are (`logway migrate`): its open ones and those aborted,
        written with the next commit (a transaction here that `source` has too is replaced)."""
        for pid, txn in source._open.items():
            self._open[pid] = _Open(txn.epoch, txn.first, list(txn.ranges))
            self._changes[(pid, txn.first)] = (txn.epoch, None, _flat(txn.ranges))
        known = {(t.producer_id, t.first) for t in self._aborted}
        for txn in source._aborted:
            if (txn.producer_id, txn.first) not in known:
                self._aborted.append(txn)
            self._changes[(txn.producer_id, txn.first)] = (0, txn.end, _flat(txn.ranges))  # (no epoch kept)
        self._aborted.sort(key=lambda t: t.first)

    def prune(self, log_start: int) -> None:
        """Forget aborted transactions wholly below the log start (the commit that moved it deleted their rows)."""
        self._aborted = [t for t in self._aborted if t.end >= log_start]

    # -- the commit's side (under the partition's lock) --------------------------------------------------
    def take(self) -> dict[tuple[int, int], tuple | None]:
        """What to write with the next commit: rows by (producer id, first offset); forgotten here."""
        changes, self._changes = self._changes, {}
        return changes

    def give_back(self, changes: dict[tuple[int, int], tuple | None]) -> None:
        """A commit failed: write `changes` with the next one (unless changed again since)."""
        self._changes = {**changes, **self._changes}


def _flat(ranges) -> list[int]:
    return [n for r in ranges for n in r]
