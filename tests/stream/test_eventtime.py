"""The event-time order of partitions' records, against plain sorting and by its rules."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from consumer.stream.eventtime import EventTimeOrder


class Clock:
    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


def _order(partitions: list[list[int | None]], idle_ms: int = 1000) -> EventTimeOrder:
    order: EventTimeOrder = EventTimeOrder(idle_ms, clock=Clock())
    order.assign(range(len(partitions)))
    for p, times in enumerate(partitions):
        for offset, t in enumerate(times):
            order.add(p, (p, offset), t)
        order.caught_up(p)
    return order


sorted_partitions = st.lists(
    st.lists(st.integers(0, 50), max_size=20).map(sorted), min_size=1, max_size=5
)


@given(sorted_partitions)
def test_partitions_each_in_time_order_come_out_as_one_sorted_stream(partitions):
    released = list(_order(partitions).release())
    times = [r.time_ms for r in released]
    assert times == sorted(t for ts in partitions for t in ts)
    # Ties go to the lower partition, and each partition leaves in offset order.
    expected = sorted((t, p, o) for p, ts in enumerate(partitions) for o, t in enumerate(ts))
    assert [r.item for r in released] == [(p, o) for _, p, o in expected]


@given(st.lists(st.lists(st.one_of(st.none(), st.integers(0, 50)), max_size=20), max_size=5))
def test_offsets_leave_in_order_and_the_stream_time_never_goes_back(partitions):
    released = list(_order(partitions).release())
    assert len(released) == sum(map(len, partitions))
    next_offset = [0] * len(partitions)
    stream = []
    for r in released:
        p, offset = r.item
        assert offset == next_offset[p]
        next_offset[p] += 1
        if r.time_ms is not None:
            stream.append(r.time_ms)
    for p, times in enumerate(partitions):
        partition_times = [r.time_ms for r in released if r.item[0] == p and r.time_ms]
        assert partition_times == sorted(partition_times)
        # A partition stands no later than the earliest dated record still ahead of it.
        for i, r in enumerate(r for r in released if r.item[0] == p):
            ahead = [t for t in times[i:] if t is not None]
            if ahead and r.time_ms is not None:
                assert r.time_ms <= min(ahead) or r.time_ms == max(
                    t for t in times[:i] if t is not None
                )


def test_a_record_dated_far_ahead_neither_waits_nor_moves_the_stream():
    order = _order([[10, 10_000, 11, 12], [10, 11, 12, 13]])
    released = list(order.release())
    at = {r.item: r.time_ms for r in released}
    assert at[(0, 1)] == 11  # it stands where its neighbours do
    assert [r.item for r in released][:4] == [(0, 0), (1, 0), (0, 1), (0, 2)]
    assert order.stream_time_ms == 13


def test_undated_records_take_the_time_of_their_partition():
    order = _order([[None, 5, None, 7, None]])
    assert [r.time_ms for r in order.release()] == [5, 5, 5, 7, 7]


def test_an_empty_partition_is_waited_for_until_it_is_caught_up_or_idle():
    clock = Clock()
    order: EventTimeOrder = EventTimeOrder(500, clock=clock)
    order.assign([0, 1])
    order.add(0, "a", 1)
    assert list(order.release()) == []  # partition 1 may still bring something earlier
    clock.now = 0.4
    assert list(order.release()) == []
    clock.now = 0.5
    assert [r.item for r in order.release()] == ["a"]
    # Once it brings records and empties again, it is waited for again...
    order.add(1, "b", 2)
    order.add(0, "c", 3)
    assert [r.item for r in order.release()] == ["b"]
    assert list(order.release()) == []
    # ...unless the broker says it is at its end.
    order.caught_up(1)
    assert [r.item for r in order.release()] == ["c"]


def test_a_partition_caught_up_after_its_last_record_is_not_waited_for():
    order: EventTimeOrder = EventTimeOrder(10_000, clock=Clock())
    order.assign([0, 1])
    order.caught_up(1)
    order.add(0, "a", 5)
    order.caught_up(0)
    order.add(1, "b", 4)
    order.caught_up(1)
    assert [r.item for r in order.release()] == ["b", "a"]


def test_a_restart_stands_at_the_index_watermark():
    order: EventTimeOrder = EventTimeOrder(0, clock=Clock())
    order.assign([0], start_ms=100)
    order.add(0, "undated", None)
    (released,) = order.release()
    assert released.time_ms == 100
    assert order.stream_time_ms == 100


def test_heads_of_equal_time_leave_in_the_order_they_were_produced():
    order: EventTimeOrder = EventTimeOrder(0, clock=Clock())
    order.assign([0, 1])
    # Dates given to the day: the copy on partition 0 was produced after the original on 1.
    order.add(0, "copy", 100, tiebreak=20)
    order.add(1, "original", 100, tiebreak=10)
    order.caught_up(0)
    order.caught_up(1)
    assert [r.item for r in order.release()] == ["original", "copy"]


def test_a_partition_known_to_be_behind_is_waited_for_past_the_idle_bound():
    clock = Clock()
    order: EventTimeOrder = EventTimeOrder(500, clock=clock)
    order.assign([0, 1])
    order.add(0, "a", 1)
    order.behind(1, True)  # the broker holds records of partition 1 not fetched yet
    clock.now = 60.0
    assert list(order.release()) == []
    order.behind(1, False)
    assert [r.item for r in order.release()] == ["a"]


def test_a_partition_with_records_still_being_fingerprinted_is_waited_for():
    clock = Clock()
    order: EventTimeOrder = EventTimeOrder(500, clock=clock)
    order.assign([0, 1])
    order.caught_up(1)  # at its end before the last poll...
    order.add(0, "later", 5)
    order.expect([1], True)  # ...which fetched more of it, not fingerprinted yet
    clock.now = 60.0
    assert list(order.release()) == []
    order.add(1, "earlier", 3)
    order.expect([1], False)
    order.caught_up(1)
    order.caught_up(0)
    assert [r.item for r in order.release()] == ["earlier", "later"]


def test_clearing_the_queues_forgets_what_was_expected():
    order: EventTimeOrder = EventTimeOrder(0, clock=Clock())
    order.assign([0, 1])
    order.expect([1], True)
    order.clear()
    order.add(0, "a", 1)
    order.caught_up(0)
    assert [r.item for r in order.release()] == ["a"]
