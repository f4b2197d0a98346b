"""The event-time order of partitions' records, against plain sorting and by its rules."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from consumer.stream.eventtime import EventTimeOrder, ReorderWindow


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


def test_records_read_again_after_clearing_are_not_counted_out_of_order():
    """A batch whose outputs failed is read again from the commit: its records come behind the
    later ones queued before, which is no disorder of the feed (and no warning to give)."""
    order: EventTimeOrder = EventTimeOrder(0, clock=Clock(), window=ReorderWindow(4))
    order.assign([0])
    for offset, t in enumerate([10, 20, 30, 40]):
        order.add(0, offset, t)
    order.caught_up(0)
    assert [r.item for r in order.release(limit=2)] == [0, 1]
    order.clear()
    for offset, t in [(2, 30), (3, 40), (4, 35)]:
        order.add(0, offset, t)
    assert (order.out_of_order, order.beyond_window) == (1, 0)  # 35 behind 40, and only that


# -- the reorder window: disorder inside a partition ------------------------------------------


def _windowed(times: list[int | None], window: int, idle_ms: int = 1000) -> EventTimeOrder:
    """One partition read from a backlog: the broker holds more until the last record."""
    order: EventTimeOrder = EventTimeOrder(idle_ms, clock=Clock(), window=ReorderWindow(window))
    order.assign([0])
    order.behind(0, True)
    return order


@given(
    st.lists(st.lists(st.one_of(st.none(), st.integers(0, 200)), max_size=20), max_size=4),
    st.integers(1, 60),
    st.integers(1, 30),
)
def test_a_batch_never_outlives_its_own_articles_in_the_window(partitions, span, limit):
    """Released in calls of at most `limit` with a window of `span`, the records leave in the
    order one call gives them, and each call (a batch) stops before the stream time leaves
    behind a record it released that was in the window then: the index's expiry after the
    batch keeps all of them, so a batch read again can be answered as it was decided."""
    whole = [r.item for r in _order(partitions).release()]
    order = _order(partitions)
    batches = []
    while batch := list(order.release(limit, span)):
        batches.append((batch, order.stream_time_ms))
    assert [r.item for batch, _ in batches for r in batch] == whole
    stream = None
    for batch, end in batches:
        assert len(batch) <= limit
        for r in batch:
            p, offset = r.item
            own = partitions[p][offset]
            at = r.time_ms if own is None else own
            if r.time_ms is not None:
                stream = r.time_ms if stream is None else max(stream, r.time_ms)
            if at is not None and stream is not None and at >= stream - span:
                assert end is None or at >= end - span, (batch, end)


@st.composite
def displaced(draw, window: int = 8):
    """A partition in time order with some records moved later by fewer than `window`
    places, as a retried batch lands behind the ones sent after it."""
    times = sorted(draw(st.lists(st.integers(0, 1000), max_size=60)))
    arrival = list(range(len(times)))
    for _ in range(draw(st.integers(0, 5))):
        if len(arrival) < 2:
            break
        i = draw(st.integers(0, len(arrival) - 1))
        j = draw(st.integers(i, min(i + window - 1, len(arrival) - 1)))
        arrival.insert(j, arrival.pop(i))
    # Moves can add up: at most 5 x 7 places, within the window of 64 the test gives.
    return [times[k] for k in arrival]


@given(displaced())
def test_records_displaced_within_the_window_leave_in_time_order(times):
    order = _windowed(times, window=64)
    released = []
    for offset, t in enumerate(times):
        order.add(0, offset, t)
        released += order.release()
    order.behind(0, False)
    order.caught_up(0)
    released += order.release()
    assert [r.time_ms for r in released] == sorted(times)
    assert sorted(r.item for r in released) == list(range(len(times)))
    assert order.beyond_window == 0


def test_a_retried_batch_behind_later_records_is_decided_in_time_order():
    # 600 records of days 10-40, then a retried batch of 200 from days 1-10, then the rest.
    day = 86_400_000
    later = [10 * day + i * (30 * day // 600) for i in range(600)]
    retried = [day + i * (9 * day // 200) for i in range(200)]
    rest = [40 * day + i for i in range(300)]
    times = later + retried + rest
    for window, beyond in ((1000, 0), (0, 200)):
        order = _windowed(times, window)
        released = []
        for offset, t in enumerate(times):
            order.add(0, offset, t)
            released += order.release()
        order.behind(0, False)
        order.caught_up(0)
        released += order.release()
        stream = [r.time_ms for r in released]
        assert (order.out_of_order, order.beyond_window) == (200, beyond)
        if window:
            assert stream == sorted(times)
            assert [r.item for r in released[:200]] == list(range(600, 800))
        else:
            assert [r.item for r in released] == list(range(len(times)))


def test_a_record_is_overtaken_by_at_most_the_window_and_moves_no_time():
    order = _windowed([], window=3)
    for offset, t in enumerate([10_000, 1, 2, 3, 4, 5]):
        order.add(0, offset, t)
    released = list(order.release())
    # It waited for three records behind it, let the earlier ones go, then went itself.
    assert [r.item for r in released] == [1, 2, 3, 0]
    assert [r.time_ms for r in released] == [1, 2, 3, 4]  # it stands where the next one does
    assert order.queued(0) == 2


def test_a_window_waits_for_nothing_on_a_partition_at_its_end():
    order: EventTimeOrder = EventTimeOrder(10_000, clock=Clock(), window=ReorderWindow(1000))
    order.assign([0, 1])
    order.add(0, "b", 2)
    order.add(0, "a", 1)
    assert list(order.release()) == []  # the broker may hold more of partition 0
    order.caught_up(0)
    order.caught_up(1)
    assert [r.item for r in order.release()] == ["a", "b"]


def test_a_window_waits_no_longer_than_the_idle_bound_for_a_quiet_partition():
    clock = Clock()
    order: EventTimeOrder = EventTimeOrder(500, clock=clock, window=ReorderWindow(1000))
    order.assign([0])
    order.add(0, "b", 2)
    order.add(0, "a", 1)
    clock.now = 0.4
    assert list(order.release()) == []
    clock.now = 0.5
    assert [r.item for r in order.release()] == ["a", "b"]


def test_undated_records_stay_behind_the_record_before_them_in_the_window():
    order = _windowed([], window=10)
    for offset, t in enumerate([5, None, 3, None, 7]):
        order.add(0, offset, t)
    order.behind(0, False)
    order.caught_up(0)
    released = list(order.release())
    assert [r.item for r in released] == [2, 3, 0, 1, 4]
    assert [r.time_ms for r in released] == [3, 3, 5, 5, 7]


def test_the_first_queued_record_is_the_lowest_offset_wherever_it_waits():
    order = _windowed([], window=10)
    for offset, t in enumerate([5, 3, 4]):
        order.add(0, offset, t)
    assert order.first_queued() == {0: 0}
    assert order.pop_first(0) == 0
    assert order.first_queued() == {0: 1}
    order.caught_up(0)
    assert [r.item for r in order.release()] == [1, 2]


def test_at_its_end_a_backfill_partition_holds_records_for_stragglers_a_live_one_does_not():
    clock = Clock()
    now_ms = 100 * 86_400_000
    window = ReorderWindow(
        1000, hold_ms=2000, recent_ms=72 * 3_600_000, wall_clock_ms=lambda: now_ms
    )
    for dated, waits in ((1_000, True), (now_ms - 1_000, False)):
        order: EventTimeOrder = EventTimeOrder(10_000, clock=clock, window=window)
        order.assign([0])
        order.add(0, "later", dated + 10)
        order.caught_up(0)
        if waits:
            # A backfill: the retried batch with the earlier record lands moments later.
            assert list(order.release()) == []
            clock.now += 1.5
            order.add(0, "earlier", dated)
            order.caught_up(0)
            assert list(order.release()) == []
            clock.now += 0.5  # the first record has waited out the hold: both may go
            assert [r.item for r in order.release()] == ["earlier", "later"]
        else:
            assert [r.item for r in order.release()] == ["later"]


def test_a_live_partition_holds_nothing_even_behind_its_end():
    # A consumer a little behind a live feed: articles dated now cannot go late, so they are
    # not held for a window's worth of records (corrections settle their order).
    now_ms = 100 * 86_400_000
    window = ReorderWindow(
        1000, hold_ms=2000, recent_ms=72 * 3_600_000, wall_clock_ms=lambda: now_ms
    )
    order: EventTimeOrder = EventTimeOrder(10_000, clock=Clock(), window=window)
    order.assign([0])
    order.behind(0, True)
    order.add(0, "later", now_ms - 10)
    order.add(0, "earlier", now_ms - 20)
    assert [r.item for r in order.release()] == ["earlier", "later"]
