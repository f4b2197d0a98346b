"""Event time across partitions: in what order articles are decided, and the stream time that
lateness is judged against.

The broker returns each partition's records in offset order but interleaves partitions as its
fetches happen to complete: under a backlog one partition can run hours ahead of another. An
article must be decided after everything published before it, or an original is taken for a
copy of its own repost. So records wait here, one queue per partition, and leave in event-time
order: the next is always the head of the queue with the earliest time, and nothing leaves
while an assigned partition has nothing queued, unless that partition is known to be caught up
(the broker said it reached the end) or has been silent for `idle_ms`. This is how Kafka
Streams synchronizes a task's partitions (`max.task.idle.ms`); queues stay in offset order, so
what has been decided is always a prefix of each partition and offsets commit as before.

A queue's time is the earliest event time anywhere in it, not its head's: a record dated far
ahead of its neighbours (a wrong clock, a typo in a year) then waits for nothing and moves
nothing, and its neighbours keep their order. The stream time, the greatest time released so
far, is what the index's watermark follows, so neither one fast partition nor one odd date can
make the others' articles late. An undated article takes the stream time of its partition
(the time of the article before it), or, before the partition has one, the time of the first
dated article queued behind it.
"""

from __future__ import annotations

import heapq
import time
from collections import deque
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from typing import Generic, TypeVar

from consumer.config import Config
from consumer.records import Analyzed, Invalid

Item = TypeVar("Item")


def time_of(result: Analyzed | Invalid) -> int | None:
    """What orders a fingerprinted message: a dated article's event time; else nothing."""
    return result.event_time_ms if isinstance(result, Analyzed) and result.dated else None


def wall_clock_ms() -> int:
    return int(time.time() * 1000)


@dataclass(frozen=True, slots=True)
class ReorderWindow:
    """How each partition puts records that arrive behind later-dated ones back in order."""

    records: int = 0
    """While the broker holds more of the partition, a record waits until this many are
    queued behind it; those waiting leave earliest first. 0: offset order."""
    hold_ms: int = 0
    """At the partition's end, a record older than `recent_ms` waits this long for others
    still to come (a producer's retried batch lands moments after the batches sent after
    it): in a backfill read as fast as it is produced, such a batch would otherwise come
    after weeks of event time had been decided."""
    recent_ms: int | None = None
    """Records dated within this of the wall clock wait for nothing, at the partition's end
    or behind it: the stream cannot have passed them by more than this, so they cannot go
    late (the index's retention). None: the window applies to every record."""
    wall_clock_ms: Callable[[], int] = wall_clock_ms


# Each partition in offset order, as a file is read.
NO_REORDER = ReorderWindow()


def reorder_window(config: Config) -> ReorderWindow:
    """The service's window, from its options."""
    return ReorderWindow(
        config.service.reorder_window,
        config.service.reorder_hold.ms,
        config.index.retention.ms,
    )


@dataclass(frozen=True, slots=True)
class Timed(Generic[Item]):
    """An item in decision order, and the time the stream stands at with it: what an
    `EventTimeOrder` releases, and what the deciding takes (consumer/stream/pipeline.py)."""

    item: Item
    time_ms: int | None
    """Where the stream stands with this item (its partition's time): the index's watermark
    follows it, and an undated article takes it as its event time. None while the partition
    has seen no dated article; such an item moves no watermark."""


@dataclass(slots=True)
class _Queue(Generic[Item]):
    hold: int = 0  # the reorder window: records a record waits for behind it (0: none)
    # Records ready to leave, in the order they leave: seq, item, time, and what orders
    # items of equal time (their Kafka timestamps).
    items: deque[tuple[int, Item, int | None, int]] = field(default_factory=deque)
    # The ready records' dated times as a sliding minimum: each entry is earlier than all
    # after it, so the first is the earliest time queued (amortized O(1) per push and pop).
    minima: deque[tuple[int, int]] = field(default_factory=deque)  # (time, seq)
    # The reorder window: records held until `hold` later ones are queued behind them (or
    # nothing more is coming), leaving it earliest first. A heap of (time, tiebreak, seq);
    # an undated record sorts at the time of the dated one before it, so it stays behind it.
    held: list[tuple[float, int, int]] = field(default_factory=list)
    # seq -> item, time, tiebreak, and when it was queued (the clock's seconds)
    held_items: dict[int, tuple[Item, int | None, int, float]] = field(default_factory=dict)
    held_order: deque[int] = field(default_factory=deque)  # held seqs, oldest first (lazily)
    last_dated: int | None = None  # the last dated time queued, in offset order
    latest_dated: int | None = None  # the greatest dated time queued
    next_seq: int = 0
    time_ms: int | None = None  # the partition's stream time: the greatest time released
    caught_up: bool = False  # the broker reached its end after the last record queued
    behind: bool = False  # the broker holds more for it than was fetched: always waited for
    expecting: bool = False  # fetched records are still being fingerprinted: waited for
    empty_since: float = 0.0
    pushed_at: float = 0.0

    def __len__(self) -> int:
        return len(self.items) + len(self.held_items)

    def push(self, item: Item, time_ms: int | None, tiebreak: int, now: float) -> int:
        """Queue `item`; returns how out of order it came: 0 in order, 1 behind a record
        dated later (the window puts it back in order), 2 after its partition's time had
        passed it (too late for that)."""
        disorder = 0
        seq = self.next_seq
        self.next_seq += 1
        self.caught_up = False
        self.pushed_at = now
        if time_ms is not None:
            if self.latest_dated is not None and time_ms < self.latest_dated:
                disorder = 2 if self.time_ms is not None and time_ms < self.time_ms else 1
            if self.latest_dated is None or time_ms > self.latest_dated:
                self.latest_dated = time_ms
        if not self.hold:
            self._ready(seq, item, time_ms, tiebreak)
            return disorder
        sort_time = time_ms if time_ms is not None else self.last_dated
        if time_ms is not None:
            self.last_dated = time_ms
        heapq.heappush(
            self.held, (float("-inf") if sort_time is None else sort_time, tiebreak, seq)
        )
        self.held_items[seq] = (item, time_ms, tiebreak, now)
        self.held_order.append(seq)
        while self.held_order and self.held_order[0] + self.hold <= seq:
            self._promote()
        return disorder

    def flush(self) -> None:
        """Nothing more is coming for now: every held record becomes ready, earliest first."""
        while self.held_items:
            self._promote()

    def release_aged(self, queued_before: float) -> None:
        """Held records queued before `queued_before` become ready, and with them, earliest
        first, every held record dated before them."""
        while self.held_order and self.held_items[self.held_order[0]][3] <= queued_before:
            self._promote()

    def _promote(self) -> None:
        """The earliest held record becomes ready."""
        while True:
            _, _, seq = heapq.heappop(self.held)
            entry = self.held_items.pop(seq, None)
            if entry is not None:  # else it left by `remove_first`
                break
        item, time_ms, tiebreak, _ = entry
        self._ready(seq, item, time_ms, tiebreak)
        while self.held_order and self.held_order[0] not in self.held_items:
            self.held_order.popleft()

    def _ready(self, seq: int, item: Item, time_ms: int | None, tiebreak: int) -> None:
        self.items.append((seq, item, time_ms, tiebreak))
        if time_ms is not None:
            while self.minima and self.minima[-1][0] >= time_ms:
                self.minima.pop()
            self.minima.append((time_ms, seq))

    def earliest(self) -> int | None:
        """The time the queue's head stands at: the earliest dated time queued; for an undated
        head, the partition's time (or, before it has one, that earliest time)."""
        if self.items and self.items[0][2] is None and self.time_ms is not None:
            return self.time_ms
        at = self.minima[0][0] if self.minima else self.time_ms
        if self.held_items:  # held records come later but may be dated earlier
            while self.held[0][2] not in self.held_items:
                heapq.heappop(self.held)
            first_held = self.held[0][0]
            if first_held != float("-inf") and (at is None or first_held < at):
                return int(first_held)
        return at

    def pop(self) -> tuple[Item, int | None, int | None]:
        """The head, its own time (None: undated) and the partition's time after it."""
        self.time_ms = self.time_after_pop()
        seq, item, own_time, _ = self.items.popleft()
        if self.minima and self.minima[0][1] == seq:
            self.minima.popleft()
        return item, own_time, self.time_ms

    def time_after_pop(self) -> int | None:
        """The partition's time once its head has left."""
        at = self.earliest()
        if at is not None and (self.time_ms is None or at > self.time_ms):
            return at
        return self.time_ms

    def first(self) -> Item | None:
        """The record queued first (lowest offset), wherever it waits."""
        seq = self._first_seq()
        if seq is None:
            return None
        entry = self.held_items.get(seq)
        return entry[0] if entry is not None else next(e[1] for e in self.items if e[0] == seq)

    def remove_first(self) -> Item:
        """Take the record queued first out of the queue, out of its order."""
        seq = self._first_seq()
        assert seq is not None
        entry = self.held_items.pop(seq, None)
        if entry is not None:
            while self.held_order and self.held_order[0] not in self.held_items:
                self.held_order.popleft()
            return entry[0]
        kept = [e for e in self.items if e[0] != seq]
        item = next(e[1] for e in self.items if e[0] == seq)
        self.items.clear()
        self.minima.clear()
        for entry in kept:  # rare (a commit that grew too long): rebuilt in linear time
            self._ready(*entry)
        return item

    def _first_seq(self) -> int | None:
        seqs = [e[0] for e in self.items]
        if self.held_order:
            seqs.append(self.held_order[0])
        return min(seqs, default=None)

    def clear(self, now: float) -> None:
        self.items.clear()
        self.minima.clear()
        self.held.clear()
        self.held_items.clear()
        self.held_order.clear()
        # What is read again was counted as in or out of order when first read: only its
        # order among itself counts again, not the order against what was queued before.
        self.last_dated = self.latest_dated = None
        self.caught_up = False
        self.expecting = False
        self.empty_since = now


class EventTimeOrder(Generic[Item]):
    """Per-partition queues released in event-time order (see the module's docstring)."""

    def __init__(
        self,
        idle_ms: int,
        clock: Callable[[], float] = time.monotonic,
        window: ReorderWindow = NO_REORDER,
    ) -> None:
        self.idle_s = idle_ms / 1000
        self.window = window
        self._clock = clock
        self._queues: dict[int, _Queue[Item]] = {}
        self.stream_time_ms: int | None = None
        # Dated records queued behind a later-dated one of their partition, and those of them
        # that came after their partition's time had passed them (beyond the window).
        self.out_of_order = 0
        self.beyond_window = 0

    # -- partitions ---------------------------------------------------------------------------

    def assign(self, partitions: Iterable[int], start_ms: int | None = None) -> None:
        """Start queues for `partitions`; `start_ms` is where a partition without a time of its
        own stands (the index's watermark after a restart)."""
        now = self._clock()
        for p in partitions:
            self._queues.setdefault(
                p, _Queue(hold=self.window.records, time_ms=start_ms, empty_since=now)
            )
        if start_ms is not None and (self.stream_time_ms is None or start_ms > self.stream_time_ms):
            self.stream_time_ms = start_ms

    def revoke(self, partitions: Iterable[int]) -> None:
        for p in partitions:
            self._queues.pop(p, None)

    def clear(self) -> None:
        """Drop every queued item (they are read again from the broker): each partition keeps
        its time and waits afresh."""
        now = self._clock()
        for queue in self._queues.values():
            queue.clear(now)

    def partitions(self) -> list[int]:
        return list(self._queues)

    # -- input --------------------------------------------------------------------------------

    def add(self, partition: int, item: Item, time_ms: int | None, tiebreak: int = 0) -> None:
        """Queue `item` behind the ones already queued for `partition` (offset order); a None
        time for an undated item. Of heads at the same time, the one with the smaller
        `tiebreak` (its Kafka timestamp: when it was produced) leaves first, then the lower
        partition: dates given to the day tie often, and the order they were produced in is
        the best guess of the order they were published in."""
        queue = self._queues.get(partition)
        if queue is None:  # not assigned (a record fetched before a revocation): dropped
            return
        disorder = queue.push(item, time_ms, tiebreak, self._clock())
        if disorder:
            self.out_of_order += 1
            self.beyond_window += disorder == 2

    def behind(self, partition: int, behind: bool) -> None:
        """Whether the broker is known to hold records of `partition` not fetched yet: such a
        partition is waited for whatever `idle_ms` says, since time spent deciding the others
        is no sign that it has gone quiet (how Kafka Streams treats a partition with known
        lag)."""
        queue = self._queues.get(partition)
        if queue is not None:
            queue.behind = behind

    def expect(self, partitions: Iterable[int], expecting: bool) -> None:
        """Whether records of `partitions` were fetched but are not queued yet (the workers
        still fingerprint them): such a partition is waited for, as one the broker holds more
        of, so what is decided meanwhile comes before them."""
        for p in partitions:
            queue = self._queues.get(p)
            if queue is not None:
                queue.expecting = expecting
                if expecting:
                    queue.caught_up = False  # its end was before these records

    def caught_up(self, partition: int) -> None:
        """The broker said `partition` has nothing beyond what is queued, for now: once its
        queue is empty it is not waited for (until it brings a record again)."""
        queue = self._queues.get(partition)
        if queue is not None:
            queue.caught_up = True

    def queued(self, partition: int) -> int:
        queue = self._queues.get(partition)
        return 0 if queue is None else len(queue)

    def ready(self, partition: int) -> int:
        """Records of `partition` free to leave (not held in its reorder window)."""
        queue = self._queues.get(partition)
        return 0 if queue is None else len(queue.items)

    def __len__(self) -> int:
        return sum(len(q) for q in self._queues.values())

    def first_queued(self) -> dict[int, Item]:
        """Each partition's record queued first (its lowest offset), so a caller can seek back
        to it."""
        firsts = {p: q.first() for p, q in self._queues.items() if len(q)}
        return {p: item for p, item in firsts.items() if item is not None}

    # -- output -------------------------------------------------------------------------------

    def pop_first(self, partition: int) -> Item:
        """The record of `partition` queued first (its lowest offset), out of order (the caller
        has a reason); it moves no time."""
        return self._queues[partition].remove_first()

    def release(
        self, limit: int | None = None, span_ms: int | None = None
    ) -> Iterator[Timed[Item]]:
        """Items in decision order, for as long as no assigned partition must be waited for;
        at most `limit`.

        With `span_ms` (the index's retention), the items released stop before one that would
        move the stream time so far that an item released before it, not late then, would be
        out of the window: what one call releases is decided and committed as one batch, and
        the index's expiry follows its watermark, so a batch that spans more event time than
        the window would drop its own oldest articles at the next expiry. If its outputs then
        failed (or the process was killed before its commit), the batch read again would find
        them gone and decide them afresh, late, instead of answering them as they were."""
        now = self._clock()
        count = 0
        oldest: int | None = None  # the earliest time released, of the items not late then
        while limit is None or count < limit:
            partition = self._earliest(now)
            if partition is None:
                return
            if span_ms is not None and oldest is not None:
                after = self._stream_time_after(self._queues[partition])
                if after is not None and after - span_ms > oldest:
                    return
            count += 1
            timed, own_time = self._pop(partition, now)
            if span_ms is not None:
                at = timed.time_ms if own_time is None else own_time
                stream = self.stream_time_ms
                if at is not None and (stream is None or at >= stream - span_ms):
                    oldest = at if oldest is None else min(oldest, at)
            yield timed

    def _stream_time_after(self, queue: _Queue[Item]) -> int | None:
        """The stream time once `queue`'s head has left."""
        after = queue.time_after_pop()
        if after is None or (self.stream_time_ms is not None and self.stream_time_ms > after):
            return self.stream_time_ms
        return after

    def release_earliest(self) -> Timed[Item] | None:
        """The earliest queued item, whatever empty partition it would have waited for (the
        caller can hold no more); None when nothing is queued."""
        partition = self._earliest(None)
        return None if partition is None else self._pop(partition, self._clock())[0]

    def _earliest(self, now: float | None) -> int | None:
        """The partition whose head leaves next; None when nothing is queued or (`now` given)
        an empty partition must still be waited for."""
        best: tuple[int | float, int, int] | None = None
        for p, queue in self._queues.items():
            if queue.held_items:
                self._release_held(queue, now)
            if not queue.items:
                if queue.held_items:
                    return None  # its window waits for more records, which are coming
                if now is None or queue.caught_up:
                    continue
                if queue.behind or queue.expecting or now - queue.empty_since < self.idle_s:
                    return None  # this partition may still bring something earlier
                continue
            at = queue.earliest()
            key = (float("-inf") if at is None else at, queue.items[0][3], p)
            if best is None or key < best:
                best = key
        return None if best is None else best[2]

    def _release_held(self, queue: _Queue[Item], now: float | None) -> None:
        """What a partition's reorder window lets go when nothing more is coming for now."""
        if now is None:  # the caller can hold no more
            queue.flush()
            return
        window = self.window
        if (
            window.recent_ms is not None
            and queue.latest_dated is not None
            and queue.latest_dated >= window.wall_clock_ms() - window.recent_ms
        ):
            # A live feed: nothing held could go late, so nothing waits, behind or not (a
            # consumer a little behind a live feed would otherwise hold every article for a
            # window's worth of records); corrections settle what comes out of order.
            queue.flush()
            return
        at_end = queue.caught_up or (
            not queue.behind and not queue.expecting and now - queue.pushed_at >= self.idle_s
        )
        if not at_end:
            return
        if window.recent_ms is None or queue.latest_dated is None:
            queue.flush()
        else:
            queue.release_aged(now - window.hold_ms / 1000)

    def _pop(self, partition: int, now: float) -> tuple[Timed[Item], int | None]:
        """The head of `partition`, and its own time (None: undated)."""
        queue = self._queues[partition]
        item, own_time, time_ms = queue.pop()
        if not queue.items:
            queue.empty_since = now
        if time_ms is not None and (self.stream_time_ms is None or time_ms > self.stream_time_ms):
            self.stream_time_ms = time_ms
        return Timed(item, time_ms), own_time
