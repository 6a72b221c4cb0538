"""Producer ids handed out in durable blocks: never the same id twice across reopens."""

from __future__ import annotations

from .helpers import open_engine


def test_producer_ids_never_repeat_across_reopen(tmp_path):
    from logway.storage import IdAllocator

    path = tmp_path / "ids"
    a = IdAllocator(path, block=10)
    first = [a.next_id() for _ in range(15)]
    assert first == list(range(15))
    b = IdAllocator(path, block=10)  # as after a crash: the rest of the second block is skipped
    assert b.next_id() == 20
    eng = open_engine(tmp_path / "data")
    x = eng.producer_ids.next_id()
    eng.close()
    eng = open_engine(tmp_path / "data")
    assert eng.producer_ids.next_id() > x
    eng.close()
