"""The decide role's event-time order inside each internal partition, and what its offset
commits must then say.

An internal partition interleaves the records of every fingerprint instance, each forwarding
its own feed partitions at its own pace, so offset order is not publish order. Each internal
partition therefore gets an `EventTimeOrder` with one queue per feed partition (a record
carries its feed source): records leave in event-time order, as in `--role all`.

What has been decided is then no longer a prefix of the internal partition. The committed
offset is the first record still queued, and the records above it that were decided already
travel with that commit, in its metadata (`encode_done`/`decode_done`): the commit is part of
the same transaction as their decisions (exactly_once) or follows their delivery
(at_least_once), so after a restart or a move exactly those are skipped and every other record
above the offset is decided (or, if its batch's index write outlived an aborted transaction,
answered again from the article table). The metadata has a size limit
(`offset.metadata.max.bytes`, 4 KiB by default); past `MAX_DONE_CHARS` the record holding the
commit back is decided out of order instead (`Sequencer.release`).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass, field

from consumer.scaleout.wire import Fingerprinted
from consumer.stream.eventtime import EventTimeOrder
from consumer.stream.pipeline import Message

# Metadata characters a commit may carry: well under the broker's 4,096-byte default.
MAX_DONE_CHARS = 3_000
_PREFIX = "done:"

Entry = tuple[Message, Fingerprinted]
# An entry released, with its stream time (None: it moves no watermark).
Timed = tuple[Message, Fingerprinted, int | None]


def encode_done(base: int, offsets: Iterable[int]) -> str:
    """Offsets above `base` as runs relative to it: "done:3-5,9" (empty when none)."""
    runs: list[list[int]] = []
    for offset in sorted(offsets):
        delta = offset - base
        if runs and delta == runs[-1][1] + 1:
            runs[-1][1] = delta
        else:
            runs.append([delta, delta])
    if not runs:
        return ""
    return _PREFIX + ",".join(f"{a}-{b}" if a != b else f"{a}" for a, b in runs)


def decode_done(base: int, metadata: str | None) -> set[int]:
    """What `encode_done` wrote; anything else (another writer's metadata) means none."""
    if not metadata or not metadata.startswith(_PREFIX):
        return set()
    done: set[int] = set()
    try:
        for run in metadata[len(_PREFIX) :].split(","):
            first, _, last = run.partition("-")
            done.update(range(base + int(first), base + int(last or first) + 1))
    except ValueError:
        return set()
    return done


@dataclass(slots=True)
class _Partition:
    order: EventTimeOrder[Entry]
    committed: int  # the offset of the last commit: where a re-read starts
    committed_done: set[int]  # what that commit named as decided above it
    done: set[int]  # offsets >= committed already decided (in the commit or since)
    next_offset: int  # after the last record read
    read_to_end: bool = False  # as of the last look at the broker
    queued_offsets: dict[int, int] = field(default_factory=dict)  # offset -> feed partition


class Sequencer:
    """Event-time order for the internal partitions one decide instance owns."""

    def __init__(
        self,
        idle_ms: int,
        sources: int,
        clock: Callable[[], float] | None = None,
        max_queued: int = 50_000,
    ) -> None:
        self.idle_ms = idle_ms
        self.sources = sources  # feed partitions: a queue each
        self.max_queued = max_queued  # records held, over every owned partition
        self.overflowed = 0  # records let go without a waited-for queue (the buffer was full)
        self._clock = clock
        self._partitions: dict[int, _Partition] = {}
        self._behind: set[int] = set()

    def assign(self, partition: int, committed: int, metadata: str | None) -> None:
        order: EventTimeOrder[Entry] = (
            EventTimeOrder(self.idle_ms)
            if self._clock is None
            else EventTimeOrder(self.idle_ms, self._clock)
        )
        order.assign(range(self.sources))
        for source in range(self.sources):
            order.behind(source, True)  # until the broker is asked (`progress`)
        done = decode_done(committed, metadata)
        self._partitions[partition] = _Partition(order, committed, done, set(done), committed)

    def revoke(self, partition: int) -> None:
        self._partitions.pop(partition, None)

    def owned(self) -> list[int]:
        return list(self._partitions)

    def restart(self) -> dict[int, int]:
        """Forget what was read past each partition's last commit (a failed batch is read
        again from there); returns those offsets to seek to."""
        for p in self._partitions.values():
            p.order.clear()
            p.queued_offsets.clear()
            p.done = set(p.committed_done)
            p.next_offset = p.committed
        return {partition: p.committed for partition, p in self._partitions.items()}

    def add(self, message: Message, fingerprinted: Fingerprinted | None) -> None:
        """A record read from an owned partition; None for one that cannot be decided (it is
        skipped, as decided)."""
        p = self._partitions.get(message.source.partition)
        offset = message.source.offset
        if p is None or offset < p.next_offset:
            return  # not ours any more, or read twice
        p.next_offset = offset + 1
        if offset in p.done:
            return  # decided and published before a restart or a move
        if fingerprinted is None:
            p.done.add(offset)
            return
        source = fingerprinted.source.partition
        if source >= self.sources:  # the feed grew partitions since we started
            self.sources = source + 1
            for q in self._partitions.values():
                q.order.assign(range(self.sources))
        item = fingerprinted.item
        p.order.add(
            source,
            (message, fingerprinted),
            item.event_time_ms if item.dated else None,  # an undated one takes the stream's
            message.timestamp_ms,  # the feed record's, as the fingerprint role forwards it
        )
        p.queued_offsets[offset] = source

    def next_offset(self, partition: int) -> int | None:
        """Where reading `partition` goes on (after the last record read)."""
        p = self._partitions.get(partition)
        return None if p is None else p.next_offset

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
        return 0 if p is None else len(p.queued_offsets)

    def release(self, limit: int) -> list[Timed]:
        """Entries to decide now, in each partition's event-time order, each with the stream
        time its domain's watermark may move to."""
        out: list[Timed] = []
        share = max(self.max_queued // max(len(self._partitions), 1), 1)
        for p in self._partitions.values():
            for r in p.order.release(max(limit - len(out), 0)):
                self._mark_done(p, r.item)
                out.append((*r.item, r.time_ms))
            # A full reorder buffer lets its earliest record go without the queues it waits for.
            while len(p.queued_offsets) > share and len(out) < limit:
                forced = p.order.release_earliest()
                if forced is None:
                    break
                self.overflowed += 1
                self._mark_done(p, forced.item)
                out.append((*forced.item, forced.time_ms))
            # A commit that could no longer name what it has done decides the record holding
            # it back now, out of order, rather than stop.
            while p.queued_offsets and self._done_chars(p) > MAX_DONE_CHARS:
                lowest = min(p.queued_offsets)
                entry = p.order.pop_partition(p.queued_offsets[lowest])
                self._mark_done(p, entry)
                out.append((*entry, None))
        return out

    def commits(self) -> dict[int, tuple[int, str]]:
        """(offset, metadata) to commit for every owned partition, once the entries released
        so far are durable; `committed()` must be called when they are."""
        out = {}
        for partition, p in self._partitions.items():
            offset = min(p.queued_offsets, default=p.next_offset)
            out[partition] = (offset, encode_done(offset, (o for o in p.done if o >= offset)))
        return out

    def committed(self, commits: dict[int, tuple[int, str]]) -> None:
        for partition, (offset, _) in commits.items():
            p = self._partitions.get(partition)
            if p is not None:
                p.committed = offset
                p.done = {o for o in p.done if o >= offset}
                p.committed_done = set(p.done)

    def _mark_done(self, p: _Partition, entry: Entry) -> None:
        offset = entry[0].source.offset
        p.queued_offsets.pop(offset, None)
        p.done.add(offset)

    def _done_chars(self, p: _Partition) -> int:
        offset = min(p.queued_offsets, default=p.next_offset)
        return len(encode_done(offset, (o for o in p.done if o >= offset)))
