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

import time
from collections import deque
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from typing import Generic, TypeVar

from consumer.deciding.article import Analyzed
from consumer.stream.parsing import Invalid

Item = TypeVar("Item")


def time_of(result: Analyzed | Invalid) -> int | None:
    """What orders a fingerprinted message: a dated article's event time; else nothing."""
    return result.event_time_ms if isinstance(result, Analyzed) and result.dated else None


@dataclass(slots=True)
class Released(Generic[Item]):
    """An item leaving in decision order, and the time it stands at."""

    partition: int
    item: Item
    time_ms: int | None
    """Where the stream stands with this item (its partition's time); None while the partition
    has seen no dated article. An undated item takes this as its event time."""


@dataclass(slots=True)
class _Queue(Generic[Item]):
    # seq, item, time, and what orders items of equal time (their Kafka timestamps)
    items: deque[tuple[int, Item, int | None, int]] = field(default_factory=deque)
    # The queue's dated times as a sliding minimum: each entry is earlier than all after it,
    # so the first is the earliest time queued (amortized O(1) per push and pop).
    minima: deque[tuple[int, int]] = field(default_factory=deque)  # (time, seq)
    next_seq: int = 0
    time_ms: int | None = None  # the partition's stream time: the greatest time released
    caught_up: bool = False  # the broker reached its end after the last record queued
    behind: bool = False  # the broker holds more for it than was fetched: always waited for
    expecting: bool = False  # fetched records are still being fingerprinted: waited for
    empty_since: float = 0.0

    def push(self, item: Item, time_ms: int | None, tiebreak: int) -> None:
        seq = self.next_seq
        self.next_seq += 1
        self.items.append((seq, item, time_ms, tiebreak))
        if time_ms is not None:
            while self.minima and self.minima[-1][0] >= time_ms:
                self.minima.pop()
            self.minima.append((time_ms, seq))
        self.caught_up = False

    def earliest(self) -> int | None:
        """The time the queue's head stands at: the earliest dated time queued; for an undated
        head, the partition's time (or, before it has one, that earliest time)."""
        if self.items and self.items[0][2] is None and self.time_ms is not None:
            return self.time_ms
        return self.minima[0][0] if self.minima else self.time_ms

    def pop(self) -> tuple[Item, int | None]:
        at = self.earliest()
        seq, item, _, _ = self.items.popleft()
        if self.minima and self.minima[0][1] == seq:
            self.minima.popleft()
        if at is not None and (self.time_ms is None or at > self.time_ms):
            self.time_ms = at
        return item, self.time_ms


class EventTimeOrder(Generic[Item]):
    """Per-partition queues released in event-time order (see the module's docstring)."""

    def __init__(self, idle_ms: int, clock: Callable[[], float] = time.monotonic) -> None:
        self.idle_s = idle_ms / 1000
        self._clock = clock
        self._queues: dict[int, _Queue[Item]] = {}
        self.stream_time_ms: int | None = None

    # -- partitions ---------------------------------------------------------------------------

    def assign(self, partitions: Iterable[int], start_ms: int | None = None) -> None:
        """Start queues for `partitions`; `start_ms` is where a partition without a time of its
        own stands (the index's watermark after a restart)."""
        now = self._clock()
        for p in partitions:
            self._queues.setdefault(p, _Queue(time_ms=start_ms, empty_since=now))
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
            queue.items.clear()
            queue.minima.clear()
            queue.caught_up = False
            queue.expecting = False
            queue.empty_since = now

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
        queue.push(item, time_ms, tiebreak)

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
        return 0 if queue is None else len(queue.items)

    def __len__(self) -> int:
        return sum(len(q.items) for q in self._queues.values())

    def first_queued(self) -> dict[int, Item]:
        """Each partition's head, so a caller can seek back to it."""
        return {p: q.items[0][1] for p, q in self._queues.items() if q.items}

    # -- output -------------------------------------------------------------------------------

    def pop_partition(self, partition: int) -> Item:
        """The head of `partition`'s queue, out of order (the caller has a reason)."""
        item, time_ms = self._queues[partition].pop()
        if time_ms is not None and (self.stream_time_ms is None or time_ms > self.stream_time_ms):
            self.stream_time_ms = time_ms
        return item

    def release(self, limit: int | None = None) -> Iterator[Released[Item]]:
        """Items in decision order, for as long as no assigned partition must be waited for;
        at most `limit`."""
        now = self._clock()
        count = 0
        while limit is None or count < limit:
            partition = self._earliest(now)
            if partition is None:
                return
            count += 1
            yield self._pop(partition, now)

    def release_earliest(self) -> Released[Item] | None:
        """The earliest queued item, whatever empty partition it would have waited for (the
        caller can hold no more); None when nothing is queued."""
        partition = self._earliest(None)
        return None if partition is None else self._pop(partition, self._clock())

    def _earliest(self, now: float | None) -> int | None:
        """The partition whose head leaves next; None when nothing is queued or (`now` given)
        an empty partition must still be waited for."""
        best: tuple[int | float, int, int] | None = None
        for p, queue in self._queues.items():
            if not queue.items:
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

    def _pop(self, partition: int, now: float) -> Released[Item]:
        queue = self._queues[partition]
        item, time_ms = queue.pop()
        if not queue.items:
            queue.empty_since = now
        if time_ms is not None and (self.stream_time_ms is None or time_ms > self.stream_time_ms):
            self.stream_time_ms = time_ms
        return Released(partition, item, time_ms)
