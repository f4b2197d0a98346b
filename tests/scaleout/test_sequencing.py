"""The decide role's per-partition order and the offset commits that name what it decided."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from consumer.records import Analyzed, Message, Source
from consumer.scaleout.sequencing import Sequencer
from consumer.scaleout.wire import Fingerprinted
from consumer.stream.offsets import MAX_DONE_CHARS, decode_done, encode_done


@given(st.integers(0, 10**9), st.sets(st.integers(0, 5000), max_size=300))
def test_done_offsets_survive_the_commit_metadata(base, deltas):
    offsets = {base + d for d in deltas}
    assert decode_done(base, encode_done(base, offsets)) == offsets


def test_foreign_or_broken_metadata_names_nothing():
    assert decode_done(10, "") == set()
    assert decode_done(10, "written by another tool") == set()
    assert decode_done(10, "done:1-x") == set()


def _record(offset: int, source: int, time_ms: int) -> tuple[Message, Fingerprinted]:
    item = Analyzed(f"a{offset}", time_ms, offset, bytes(16))
    return (
        Message(b"", b"", Source("internal", 0, offset), 0),
        Fingerprinted("", item, Source("feed", source, offset)),
    )


def test_interleaved_sources_leave_in_time_order_and_the_commit_names_what_is_done():
    seq = Sequencer(idle_ms=60_000, sources=2, clock=lambda: 0.0)
    seq.assign(0, committed=0, metadata=None)
    # Source 1 ran ahead of source 0 into the internal partition.
    for offset, (source, t) in enumerate([(1, 50), (1, 60), (0, 10), (0, 55), (1, 70)]):
        seq.add(*_record(offset, source, t))
    seq.progress(set(), {0: True})
    released = [r.item[0].source.offset for r in seq.release(limit=3)]
    assert released == [2, 0, 3]  # times 10, 50, 55
    commits = seq.commits()
    # Offset 1 (time 60) is the first still held: the commit stands there and names 2 and 3.
    assert commits == {0: (1, "done:1-2")}
    seq.committed(commits)
    # A restart from that commit skips what it names and decides the rest.
    again = Sequencer(idle_ms=0, sources=2, clock=lambda: 0.0)
    again.assign(0, *commits[0])
    for offset, (source, t) in enumerate([(1, 50), (1, 60), (0, 10), (0, 55), (1, 70)]):
        if offset >= 1:
            again.add(*_record(offset, source, t))
    again.progress(set(), {0: True})
    assert [r.item[0].source.offset for r in again.release(limit=10)] == [1, 4]
    assert again.commits() == {0: (5, "")}


def test_a_batch_spans_at_most_the_span_it_is_given():
    """The decide role's batches stay inside one window of event time, as `--role all`'s do
    (EventTimeOrder.release): the expiry after a batch never drops an article of it."""
    seq = Sequencer(idle_ms=60_000, sources=1, clock=lambda: 0.0, span_ms=100)
    seq.assign(0, committed=0, metadata=None)
    times = [0, 40, 90, 100, 150, 199, 200, 260, 300, 301]
    for offset, t in enumerate(times):
        seq.add(*_record(offset, 0, t))
    seq.progress(set(), {0: True})
    batches = []
    while batch := seq.release(limit=10):
        batches.append([r.item[1].item.event_time_ms for r in batch])
    # Each batch ends before the article that would take the stream time more than 100 past
    # the batch's earliest: 150 - 100 > 0, 260 - 100 > 150.
    assert batches == [[0, 40, 90, 100], [150, 199, 200], [260, 300, 301]]


def test_a_failed_batch_is_read_again_from_the_last_commit():
    seq = Sequencer(idle_ms=0, sources=1, clock=lambda: 0.0)
    seq.assign(0, committed=0, metadata=None)
    for offset in range(3):
        seq.add(*_record(offset, 0, offset))
    seq.progress(set(), {0: True})
    assert len(seq.release(limit=10)) == 3
    assert seq.restart() == {0: 0}
    for offset in range(3):
        seq.add(*_record(offset, 0, offset))
    seq.progress(set(), {0: True})
    assert [r.item[0].source.offset for r in seq.release(limit=10)] == [0, 1, 2]


def test_a_commit_that_would_name_too_much_lets_the_held_record_go():
    seq = Sequencer(idle_ms=60_000, sources=2, clock=lambda: 0.0)
    seq.assign(0, committed=0, metadata=None)
    # One late-dated record of source 0 ahead of thousands of source 1's, interleaved with
    # further source-0 records, so what is done above the held one makes many runs.
    seq.add(*_record(0, 0, 10**9))
    for offset in range(1, 6000):
        seq.add(*_record(offset, offset % 2, offset if offset % 2 else 10**9 + offset))
    seq.progress(set(), {0: True})
    released = seq.release(limit=10_000)
    assert released
    offset, metadata = seq.commits()[0]
    assert len(metadata) <= MAX_DONE_CHARS


def test_a_feed_partition_is_waited_for_while_the_internal_partition_has_unread_records():
    clock = [0.0]
    seq = Sequencer(idle_ms=100, sources=2, clock=lambda: clock[0])
    seq.assign(0, committed=0, metadata=None)
    # The fingerprint role has forwarded both feed partitions to their end, but only source
    # 1's records have been read yet: source 0's earlier ones are further on in the partition.
    for offset, t in enumerate([50, 60, 70]):
        seq.add(*_record(offset, 1, t))
    seq.progress(set(), {0: False})
    clock[0] = 60.0  # far past the idle bound: it never excuses a queue with unread records
    assert seq.release(limit=10) == []
    seq.add(*_record(3, 0, 10))
    seq.add(*_record(4, 0, 65))
    seq.progress(set(), {0: True})
    assert [r.item[0].source.offset for r in seq.release(limit=10)] == [3, 0, 1, 4, 2]


def test_a_feed_partition_the_fingerprint_role_has_not_finished_is_waited_for():
    clock = [0.0]
    seq = Sequencer(idle_ms=100, sources=2, clock=lambda: clock[0])
    seq.assign(0, committed=0, metadata=None)
    seq.add(*_record(0, 1, 50))
    seq.progress({0}, {0: True})
    clock[0] = 60.0
    assert seq.release(limit=10) == []
    seq.progress(set(), {0: True})
    assert [r.item[0].source.offset for r in seq.release(limit=10)] == [0]


def test_a_full_reorder_buffer_lets_the_earliest_go_and_counts_it():
    seq = Sequencer(idle_ms=60_000, sources=2, clock=lambda: 0.0, max_queued=3)
    seq.assign(0, committed=0, metadata=None)
    for offset, t in enumerate([50, 40, 60, 70, 80]):
        seq.add(*_record(offset, 1, t))
    seq.progress(set(), {0: False})
    released = [r.item[0].source.offset for r in seq.release(limit=10)]
    # Source 1's queue stands at its earliest time (40) until that record leaves.
    assert released == [0, 1]
    assert seq.overflowed == 2 and seq.queued(0) == 3
