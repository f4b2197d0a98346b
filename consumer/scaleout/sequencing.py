"""The decide role's event-time order inside each internal partition, and what its offset
commits must then say.

An internal partition interleaves the records of every fingerprint instance, each forwarding
its own feed partitions at its own pace, so offset order is not publish order. Each internal
partition therefore gets an `EventTimeOrder` with one queue per feed partition (a record
carries its feed source): records leave in event-time order, as in `--role all`.

What has been decided is then no longer a prefix of the internal partition: its commits name
what was decided above the committed offset (consumer/stream/offsets.py).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from consumer.records import Message
from consumer.scaleout.wire import Fingerprinted
from consumer.stream.eventtime import NO_REORDER, EventTimeOrder, ReorderWindow, Timed
from consumer.stream.offsets import PartitionReads

# An internal record and the article it carries; released as `Timed[Entry]`, with the stream
# time its domain's watermark may move to (None: it moves none).
Entry = tuple[Message, Fingerprinted]


@dataclass(slots=True)
class _Partition:
    order: EventTimeOrder[Entry]
    reads: PartitionReads  # queued offsets wait in the queue of their feed partition
    read_to_end: bool = False  # as of the last look at the broker


class Sequencer:
    """Event-time order for the internal partitions one decide instance owns."""

    def __init__(
        self,
        idle_ms: int,
        sources: int,
        clock: Callable[[], float] | None = None,
        max_queued: int = 50_000,
        window: ReorderWindow = NO_REORDER,
        span_ms: int | None = None,
    ) -> None:
        self.idle_ms = idle_ms
        self.sources = sources  # feed partitions: a queue each
        self.max_queued = max_queued  # records held, over every owned partition
        self.window = window  # each feed partition's reorder window (stream/eventtime.py)
        # The event time one batch may span: the index's retention (EventTimeOrder.release).
        self.span_ms = span_ms
        self.overflowed = 0  # records let go without a waited-for queue (the buffer was full)
        # Totals of the partitions' event-time orders (EventTimeOrder.out_of_order, ...).
        self.out_of_order = 0
        self.beyond_window = 0
        self._clock = clock
        self._partitions: dict[int, _Partition] = {}
        self._behind: set[int] = set()

    def assign(self, partition: int, committed: int, metadata: str | None) -> None:
        order: EventTimeOrder[Entry] = (
            EventTimeOrder(self.idle_ms, window=self.window)
            if self._clock is None
            else EventTimeOrder(self.idle_ms, self._clock, self.window)
        )
        order.assign(range(self.sources))
        for source in range(self.sources):
            order.behind(source, True)  # until the broker is asked (`progress`)
        self._partitions[partition] = _Partition(
            order, PartitionReads.from_commit(committed, metadata)
        )

    def revoke(self, partition: int) -> None:
        self._partitions.pop(partition, None)

    def owned(self) -> list[int]:
        return list(self._partitions)

    def restart(self) -> dict[int, int]:
        """Forget what was read past each partition's last commit (a failed batch is read
        again from there); returns those offsets to seek to."""
        offsets = {}
        for partition, p in self._partitions.items():
            p.order.clear()
            offsets[partition] = p.reads.restart()
        return offsets

    def add(self, message: Message, fingerprinted: Fingerprinted | None) -> None:
        """A record read from an owned partition; None for one that cannot be decided (it is
        skipped, as decided)."""
        p = self._partitions.get(message.source.partition)
        offset = message.source.offset
        if p is None or not p.reads.read(offset):
            return  # not ours any more, read twice, or decided before a restart or a move
        if fingerprinted is None:
            p.reads.decided(offset)
            return
        source = fingerprinted.source.partition
        if source >= self.sources:  # the feed grew partitions since we started
            self.sources = source + 1
            for q in self._partitions.values():
                q.order.assign(range(self.sources))
        item = fingerprinted.item
        before = p.order.out_of_order, p.order.beyond_window
        p.order.add(
            source,
            (message, fingerprinted),
            item.event_time_ms if item.dated else None,  # an undated one takes the stream's
            message.timestamp_ms,  # the feed record's, as the fingerprint role forwards it
        )
        p.reads.queued[offset] = source
        self.out_of_order += p.order.out_of_order - before[0]
        self.beyond_window += p.order.beyond_window - before[1]

    def next_offset(self, partition: int) -> int | None:
        """Where reading `partition` goes on (after the last record read)."""
        p = self._partitions.get(partition)
        return None if p is None else p.reads.next_offset

    def progress(self, behind: set[int], read_to_end: dict[int, bool]) -> None:
        """What the broker said at one moment: the feed partitions the fingerprint role has not
        forwarded to their end, then which owned internal partitions are read to their end.
        A feed partition's queue in an internal partition is waited for unless both say it is
        complete; when they do, it is not waited for until it queues a record again."""
        self._behind = behind
        for partition, p in self._partitions.items():
            p.read_to_end = read_to_end.get(partition, False)
            for source in p.order.partitions():
                complete = p.read_to_end and source not in behind
                p.order.behind(source, not complete)
                if complete:
                    p.order.caught_up(source)

    def queued(self, partition: int) -> int:
        p = self._partitions.get(partition)
        return 0 if p is None else len(p.reads.queued)

    def release(self, limit: int) -> list[Timed[Entry]]:
        """Entries to decide now, in each partition's event-time order, each with the stream
        time its domain's watermark may move to."""
        out: list[Timed[Entry]] = []
        share = max(self.max_queued // max(len(self._partitions), 1), 1)
        for p in self._partitions.values():
            for r in p.order.release(max(limit - len(out), 0), self.span_ms):
                self._mark_done(p, r.item)
                out.append(r)
            # A full reorder buffer lets its earliest record go without the queues it waits for.
            while len(p.reads.queued) > share and len(out) < limit:
                forced = p.order.release_earliest()
                if forced is None:
                    break
                self.overflowed += 1
                self._mark_done(p, forced.item)
                out.append(forced)
            # A commit that could no longer name what it has done decides the record holding
            # it back now, out of order, rather than stop.
            while p.reads.commit_held_back():
                lowest = min(p.reads.queued)
                entry = p.order.pop_first(p.reads.queued[lowest])
                self._mark_done(p, entry)
                out.append(Timed(entry, None))
        return out

    def commits(self) -> dict[int, tuple[int, str]]:
        """(offset, metadata) to commit for every owned partition, once the entries released
        so far are durable; `committed()` must be called when they are."""
        out = {}
        for partition, p in self._partitions.items():
            commit = p.reads.commit()
            if commit is not None:
                out[partition] = commit
        return out

    def committed(self, commits: dict[int, tuple[int, str]]) -> None:
        for partition, (offset, _) in commits.items():
            p = self._partitions.get(partition)
            if p is not None:
                p.reads.committed_at(offset)

    def _mark_done(self, p: _Partition, entry: Entry) -> None:
        p.reads.decided(entry[0].source.offset)
