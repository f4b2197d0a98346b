"""Rebuilding a partition's domain indexes from its changelog partition, before deciding.

Every decided article's current record is on the changelog (key domain + id, compacted), so
replaying a partition in offset order leaves each domain's index with the same live records,
in the same relative order (compaction keeps a key's last record at its own offset), as the
writer that produced it. Replay starts at the lowest position the local stores already cover
(0 when the state directory is gone), skips records a store already holds identically, and
reads up to the end visible to a read_committed consumer: aborted records are never applied.
"""

from __future__ import annotations

import bisect
import gc
import logging
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, fields

from confluent_kafka import OFFSET_BEGINNING, Consumer, KafkaError, KafkaException, TopicPartition

from consumer.ops.logs import log_event
from consumer.scaleout.domains import CHANGELOG_POSITION, DomainStores, changelog_position
from consumer.scaleout.wire import decode_changes
from indexstore import RecordColumns

log = logging.getLogger(__name__)

# Records per index WriteBatch: the batch's fixed costs (multi-get, write, table append) fall
# per record up to about this size; beyond it the batch's own dicts grow slower to use.
_CHUNK = 50_000
_PROGRESS_LOG_S = 5.0


@dataclass(frozen=True, slots=True)
class RestoreResult:
    partition: int
    start_offset: int
    end_offset: int
    read: int  # records read from the changelog
    applied: int  # of which written to an index (the rest were already there)
    seconds: float

    @property
    def per_second(self) -> float:
        return self.read / self.seconds if self.seconds > 0 else 0.0


# (partition, records read so far, records left to read) after every chunk
Progress = Callable[[int, int, int], None]


def restore_config(base: dict) -> dict:
    """A plain reader of the changelog: no group, read_committed, told when it reaches the end."""
    settings = {k: v for k, v in base.items() if k not in ("group.id", "statistics.interval.ms")}
    settings.update(
        {
            "group.id": "newsdedup-restore",  # required by librdkafka; never joined or committed
            "enable.auto.commit": False,
            "enable.partition.eof": True,
            "isolation.level": "read_committed",
            "fetch.max.bytes": 52_428_800,
            # The restore reads one partition: at the default 1 MiB per partition and fetch,
            # it waited on fetches for half of its time.
            "max.partition.fetch.bytes": 52_428_800,
        }
    )
    return settings


@contextmanager
def _cycle_collection_paused() -> Iterator[None]:
    """A restore allocates millions of short-lived objects and no reference cycles, so
    reference counting frees everything; the cyclic collector's full passes over each chunk's
    records cost about a fifth of its CPU (benchmarks/history/2026-11-24.md,
    "Restore from the changelog").
    Process-wide while it lasts: another thread's cycles wait until the restore ends."""
    enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if enabled:
            gc.enable()


@_cycle_collection_paused()
def restore_partition(
    consumer_settings: dict,
    topic: str,
    partition: int,
    stores: DomainStores,
    progress: Progress | None = None,
) -> RestoreResult:
    """Bring every domain index of `partition` up to the end of its changelog partition."""
    t0 = time.perf_counter()
    local = dict(stores.open_partition(partition))  # as it was before the restore
    positions = {domain: changelog_position(s) for domain, s in local.items()}
    # Domains whose index held nothing when the restore began: nothing to compare against.
    empty = {domain for domain, s in local.items() if s.watermark_ms() is None}
    start = min(positions.values(), default=0)
    consumer = Consumer(restore_config(consumer_settings))
    try:
        low, high = consumer.get_watermark_offsets(
            TopicPartition(topic, partition), timeout=30.0, cached=False
        )
        start = max(start, low)
        first = start if start > 0 else OFFSET_BEGINNING
        consumer.assign([TopicPartition(topic, partition, first)])
        read = applied = 0
        last_log = time.monotonic()
        next_offset = start
        while next_offset < high:
            messages = consumer.consume(_CHUNK, 0.2)
            records = [m for m in messages if m.error() is None]
            at_end = False
            if len(records) < len(messages):
                for m in messages:
                    error = m.error()
                    if error is not None and error.code() != KafkaError._PARTITION_EOF:
                        raise KafkaException(error)
                at_end = True
            offsets = [m.offset() for m in records]
            if offsets:
                next_offset = offsets[-1] + 1
                read += len(offsets)
            changes = decode_changes([m.key() for m in records], [m.value() for m in records])
            for domain, (at, columns) in changes.items():
                fresh = domain in empty or domain not in local
                domain_offsets = [offsets[i] for i in at]
                applied += _apply(
                    stores, partition, domain, domain_offsets, columns, positions, fresh
                )
            if progress is not None:
                progress(partition, read, max(0, high - next_offset))
            if time.monotonic() - last_log >= _PROGRESS_LOG_S:
                last_log = time.monotonic()
                log_event(
                    log,
                    logging.INFO,
                    "restoring from the changelog",
                    partition=partition,
                    read=read,
                    left=max(0, high - next_offset),
                )
            if at_end:
                # read_committed ends at the last stable offset; transaction markers and
                # aborted records between it and `high` are never delivered.
                break
    finally:
        consumer.close()
    for store in stores.stores(partition).values():
        store.expire()
        # The restore is done when the indexes can answer: sorting the rows is part of it.
        store.prepare_search()
    return RestoreResult(partition, start, high, read, applied, time.perf_counter() - t0)


def _apply(
    stores: DomainStores,
    partition: int,
    domain: str,
    offsets: list[int],
    columns: RecordColumns,
    positions: dict[str, int],
    fresh: bool,
) -> int:
    """Write one domain's share of a chunk in one bulk index write; returns the records
    written. An index that held nothing when the restore began needs no comparison; in any
    other, records it already holds identically are left out."""
    store = stores.store(partition, domain)
    first = bisect.bisect_left(offsets, positions.get(domain, 0))
    if first == len(offsets):
        return 0
    if first:
        columns = RecordColumns(*(getattr(columns, f.name)[first:] for f in fields(columns)))
    return store.bulk_put(columns, {CHANGELOG_POSITION: offsets[-1] + 1}, skip_unchanged=not fresh)
