"""`newsdedup run --role decide`: internal topic → check + insert → decisions and changelog.

Each internal partition carries whole dedup domains, and the consumer group gives a partition
to one instance at a time, so every domain has exactly one writer, which sees all of the
domain's articles in one order. Before an instance decides anything from a partition it was
just given, it brings that partition's indexes up to the end of the changelog (changelog.py);
/readyz answers 503 meanwhile.

The commit protocol is checkpoint.py's, with the changelog as one more output: index batch →
decisions + changelog records (one transaction under exactly_once; flushed before the offsets
under at_least_once) → input offsets. Every decided article, also one answered again from the
article table, writes its current record to the changelog, so an offset is never committed
for an article whose record is missing there.
"""

from __future__ import annotations

import dataclasses
import logging
import time
from collections.abc import Iterable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from functools import partial

from confluent_kafka import Consumer, IsolationLevel, KafkaError, KafkaException, TopicPartition
from confluent_kafka import Message as KafkaMessage
from confluent_kafka.admin import AdminClient, OffsetSpec

from consumer.config import Config, parse_duration_ms
from consumer.deciding.decision import Decision
from consumer.deciding.rules import DEFAULT_RULES, MatchRules, decide, match_rules
from consumer.ops.logs import log_event
from consumer.ops.memory import release_free_memory
from consumer.ops.metrics import Metrics
from consumer.scaleout.changelog import restore_partition
from consumer.scaleout.common import RoleService, role_config
from consumer.scaleout.domains import CHANGELOG_POSITION, DomainStores
from consumer.scaleout.sequencing import Sequencer, Timed
from consumer.scaleout.wire import (
    Fingerprinted,
    WireError,
    change_key,
    decode_fingerprinted,
    encode_change,
)
from consumer.stream.checkpoint import Checkpoint
from consumer.stream.clients import consumer_config, topic_partitions
from consumer.stream.pipeline import Message, wall_clock_ms
from consumer.stream.service import _MAX_BACKOFF_S
from indexstore import Batch

log = logging.getLogger("newsdedup.roles.decide")

# How often the broker is asked how far the fingerprint role and this instance have read: a
# queue that waits for nothing more is let go at the next look.
_PROGRESS_LOOK_S = 0.1


@dataclass(frozen=True, slots=True)
class Change:
    partition: int
    key: bytes
    value: bytes


class _Batches:
    """The index batches of one Kafka batch, one per (partition, domain) it touched."""

    def __init__(self, batches: list[Batch]) -> None:
        self.batches = batches

    def commit(self) -> None:
        # Separate stores cannot share a WriteBatch. A crash between two commits leaves some
        # domains written and no outputs: the re-delivery answers those from the article table.
        for batch in self.batches:
            batch.commit()


@dataclass(slots=True)
class DecideBatch:
    outcomes: list[Decision]
    changes: list[Change]
    index_batch: _Batches
    stage_seconds: dict[str, float] = field(default_factory=dict)
    corrections: list[Decision] = field(default_factory=list)


class DecideStage:
    def __init__(self, stores: DomainStores, rules: MatchRules = DEFAULT_RULES) -> None:
        self.stores = stores
        self.rules = rules
        # Changelog partition -> the offset after our last record known to be in the log:
        # written into the partition's stores with their next batch, so a later restore of
        # those stores starts after their own records instead of replaying them.
        self.delivered: dict[int, int] = {}

    def decode(self, m: Message) -> Fingerprinted | None:
        try:
            return decode_fingerprinted(m.key, m.value or b"")
        except (WireError, UnicodeDecodeError) as e:
            # Only another version's records can be unreadable; skipping keeps the feed
            # moving and the log line names the record.
            log_event(
                log,
                logging.ERROR,
                "unreadable internal record skipped",
                error=str(e),
                partition=m.source.partition,
                offset=m.source.offset,
            )
            return None

    def decide(self, messages: Sequence[Message]) -> DecideBatch:
        """`messages` decided in the order given, each at its own time (tests and tools)."""
        entries = [
            (m, f, f.item.event_time_ms) for m in messages if (f := self.decode(m)) is not None
        ]
        return self.decide_entries(entries)

    def decide_entries(self, timed: Sequence[Timed]) -> DecideBatch:
        """Decide in the order given; each domain's watermark follows the entries' stream
        times, never a record's own date (scaleout/sequencing.py)."""
        t0 = time.perf_counter()
        items = [(m, _dated(f, t)) for m, f, t in timed]
        stream_times = [t for _, _, t in timed]
        grouped: dict[tuple[int, str], list] = {}
        for m, f in items:
            grouped.setdefault((m.source.partition, f.domain), []).append(f.item)
        batches: dict[tuple[int, str], Batch] = {}
        for (partition, domain), mine in grouped.items():
            store = self.stores.store(partition, domain)
            batch = batches[(partition, domain)] = store.begin(watermark_follows_puts=False)
            batch.prefetch([(a.simhash, a.content_hash, a.event_time_ms) for a in mine])
            batch.prefetch_records([a.id for a in mine])
            if partition in self.delivered:
                batch.set_position(CHANGELOG_POSITION, self.delivered[partition])
        now_ms = wall_clock_ms()
        outcomes: list[Decision] = []
        changes: list[Change] = []
        corrections: list[Decision] = []
        for (m, f), stream_time in zip(items, stream_times, strict=True):
            batch = batches[(m.source.partition, f.domain)]
            if stream_time is not None:
                batch.advance_watermark(stream_time)
            decision, corrected = decide(batch, f.item, f.source, now_ms, self.rules)
            outcomes.append(decision)
            corrections += corrected
            # decide() answered from these records or just put them
            for article_id in [f.item.id, *(c.id for c in corrected)]:
                record = batch.lookup(article_id)
                assert record is not None
                key = change_key(f.domain, article_id)
                changes.append(Change(m.source.partition, key, encode_change(record)))
        return DecideBatch(
            outcomes,
            changes,
            _Batches(list(batches.values())),
            {"index": time.perf_counter() - t0},
            corrections,
        )


def _dated(f: Fingerprinted, stream_time_ms: int | None) -> Fingerprinted:
    """An undated article stands at the stream's time, as in `--role all`."""
    if f.item.dated or stream_time_ms is None:
        return f
    return dataclasses.replace(f, item=dataclasses.replace(f.item, event_time_ms=stream_time_ms))


class DecideCheckpoint(Checkpoint):
    """The service's commit protocol with the changelog as a second output."""

    def __init__(self, *args: object, changelog_topic: str, stage: DecideStage) -> None:
        self.changelog_topic = changelog_topic
        self.stage = stage
        self._delivered: dict[int, int] = {}
        super().__init__(*args)

    def complete(self, decided: DecideBatch, offsets: Sequence[TopicPartition]) -> None:  # type: ignore[override]
        self._delivered.clear()
        super().complete(decided, offsets)
        self.producer.poll(0)  # serve the delivery reports of the committed batch
        for partition, offset in self._delivered.items():
            self.stage.delivered[partition] = offset + 1

    def _produce(self, decided: DecideBatch) -> None:  # type: ignore[override]
        super()._produce(decided)
        for change in decided.changes:
            self._send(
                self.changelog_topic,
                change.key,
                change.value,
                partition=change.partition,
                on_delivery=self._on_change_delivery,
            )

    def _on_change_delivery(self, error: KafkaError | None, message: KafkaMessage) -> None:
        if error is not None:
            self._on_delivery(error, message)
            return
        partition, offset = message.partition(), message.offset()
        if offset > self._delivered.get(partition, -1):
            self._delivered[partition] = offset


class DecideService(RoleService):
    role = "decide"

    def __init__(self, config: Config, metrics: Metrics | None = None) -> None:
        super().__init__(config, metrics)
        self.stores = DomainStores(config.index)
        self.stage = DecideStage(self.stores, match_rules(config.match))
        # Event-time order inside each owned internal partition (scaleout/sequencing.py); one
        # queue per feed partition, whose count is learnt at start.
        self.sequencer = Sequencer(
            parse_duration_ms(config.service.partition_idle),
            1,
            max_queued=self.full_config.scaleout.reorder_buffer,
        )
        self._last_commits: dict[int, tuple[int, str]] = {}
        # Reads the fingerprint role's committed offsets; assign()-free, it never joins.
        self._feed_watch: Consumer | None = None
        self._last_progress_look = float("-inf")
        self._overflow_seen = 0
        self._overflow_logged_at = float("-inf")

    @contextmanager
    def resources(self) -> Iterator[None]:
        try:
            self.health.index_open = True
            yield
        finally:
            self.health.index_open = False
            self.stores.close()
            if self._feed_watch is not None:
                self._feed_watch.close()
                self._feed_watch = None

    def make_stage(self) -> DecideStage:
        return self.stage

    def make_checkpoint(self, consumer: Consumer) -> Checkpoint:
        return DecideCheckpoint(
            consumer,
            self.make_producer,
            self.config.kafka,
            changelog_topic=self.full_config.scaleout.changelog_topic,
            stage=self.stage,
        )

    def _record(self, decided: DecideBatch, polled_at: float, durable: float) -> None:  # type: ignore[override]
        super()._record(decided, polled_at, durable)
        self.metrics.changelog_records.inc(len(decided.changes))

    # -- the loop ----------------------------------------------------------------------------

    def _ensure_topics(self, admin: AdminClient) -> None:
        super()._ensure_topics(admin)
        feed = topic_partitions(admin, self.full_config.kafka.input_topic)
        self.sequencer.sources = max(feed or 1, 1)

    def _loop(self, consumer: Consumer, stage, checkpoint: Checkpoint, store: None) -> None:  # type: ignore[override]
        """Poll; queue by internal partition and feed source; decide what the event-time
        order releases; commit each partition's first queued offset with what was decided
        above it (scaleout/sequencing.py)."""
        max_messages = self.config.kafka.batch_max_messages
        wait_s = parse_duration_ms(self.config.kafka.batch_max_wait) / 1000
        topic = self.config.kafka.input_topic
        backoff = 0.0
        while not self._stop.is_set():
            self.health.turn()
            self._raise_if_fatal()
            records = consumer.consume(max_messages, wait_s)
            polled_at = time.perf_counter()
            messages, _ = self._valid_records(records)
            if messages:
                self.health.broker_reachable = True
            for m in messages:
                self.sequencer.add(m, self.stage.decode(m))
            self._watch_progress(consumer)
            while not self._stop.is_set():
                entries = self.sequencer.release(max_messages)
                self._note_overflow()
                commits = self.sequencer.commits()
                moved = {p: c for p, c in commits.items() if self._last_commits.get(p) != c}
                if not entries and not moved:
                    break
                offsets = [TopicPartition(topic, p, o, metadata=md) for p, (o, md) in moved.items()]
                decide = partial(self.stage.decide_entries, entries)
                batch = [m for m, _, _ in entries]
                if self._process(batch, decide, consumer, checkpoint, polled_at, offsets):
                    self.sequencer.committed(moved)
                    self._last_commits.update(moved)
                    backoff = 0.0
                else:
                    backoff = min(max(backoff * 2, 0.5), _MAX_BACKOFF_S)
                    self._stop.wait(backoff)
                    break
            self._housekeeping(None)

    def _watch_progress(self, consumer: Consumer) -> None:
        """Ask the broker, at most every `_PROGRESS_LOOK_S`, which feed partitions the
        fingerprint role has not forwarded to their end (its group's committed offsets), then
        which owned internal partitions this instance has not read to their end; in that order,
        so whatever was forwarded before the first answer is covered by the second."""
        now = time.monotonic()
        if now - self._last_progress_look < _PROGRESS_LOOK_S:
            return
        self._last_progress_look = now
        try:
            feed = self.full_config.kafka.input_topic
            behind = self._fingerprint_role_behind(
                self._end_offsets(feed, range(self.sequencer.sources))
            )
            read_to_end = self._read_to_end(consumer)
        except KafkaException as e:
            log_event(log, logging.WARNING, "cannot read the progress of the feed", error=str(e))
            return
        self.sequencer.progress(behind, read_to_end)

    def _fingerprint_role_behind(self, ends: dict[tuple[str, int], int]) -> set[int]:
        feed = self.full_config.kafka.input_topic
        if self._feed_watch is None:
            settings = consumer_config(role_config(self.full_config, "fingerprint").kafka)
            settings.pop("statistics.interval.ms", None)
            # Read committed would wait for the fingerprint role's open transaction to end;
            # read uncommitted answers at once with its last committed offsets, which are
            # never ahead of what it forwarded.
            settings["isolation.level"] = "read_uncommitted"
            self._feed_watch = Consumer(settings)
        tps = [TopicPartition(feed, s) for s in range(self.sequencer.sources)]
        return {
            tp.partition
            for tp in self._feed_watch.committed(tps, timeout=5.0)
            if max(tp.offset, 0) < ends[(feed, tp.partition)]
        }

    def _end_offsets(self, topic: str, partitions: Iterable[int]) -> dict[tuple[str, int], int]:
        """The end of each partition a read-committed reader can reach, from the admin
        client: the consumer's own connection would queue the question behind its long-polling
        fetch (up to `fetch.wait.max.ms` per partition)."""
        assert self._admin is not None
        asked = {TopicPartition(topic, p): OffsetSpec.latest() for p in partitions}
        if not asked:
            return {}
        futures = self._admin.list_offsets(
            asked, isolation_level=IsolationLevel.READ_COMMITTED, request_timeout=5.0
        )
        return {(tp.topic, tp.partition): f.result().offset for tp, f in futures.items()}

    def _read_to_end(self, consumer: Consumer) -> dict[int, bool]:
        """Owned internal partitions → whether everything the broker holds of them now was
        read (the position passes transaction markers, so it reaches the end offset)."""
        topic = self.config.kafka.input_topic
        owned = self.sequencer.owned()
        ends = self._end_offsets(topic, owned)
        read = {}
        for tp in consumer.position([TopicPartition(topic, p) for p in owned]):
            position = tp.offset if tp.offset >= 0 else self.sequencer.next_offset(tp.partition)
            read[tp.partition] = position is not None and position >= ends[(topic, tp.partition)]
        return read

    def _note_overflow(self) -> None:
        overflowed = self.sequencer.overflowed - self._overflow_seen
        if not overflowed:
            return
        self._overflow_seen = self.sequencer.overflowed
        self.metrics.reorder_overflow.inc(overflowed)
        now = time.monotonic()
        if now - self._overflow_logged_at >= 10.0:  # the counter has every one
            self._overflow_logged_at = now
            log_event(
                log,
                logging.WARNING,
                "reorder buffer full: articles decided without waiting for a slower feed partition",
                articles=overflowed,
                reorder_buffer=self.sequencer.max_queued,
            )

    def _rewind(self, consumer: Consumer, failed: Sequence[Message]) -> None:
        """Read every owned partition again from its last commit."""
        topic = self.config.kafka.input_topic
        assigned = {tp.partition for tp in consumer.assignment()}
        for partition, offset in self.sequencer.restart().items():
            if partition in assigned:
                consumer.seek(TopicPartition(topic, partition, offset))

    # -- ownership -------------------------------------------------------------------------

    def _on_assign(self, consumer: Consumer, partitions: list[TopicPartition]) -> None:
        owned = sorted(p.partition for p in partitions)
        for partition in self.stores.partitions():
            if partition not in owned:
                self.stores.close_partition(partition)
                self.stage.delivered.pop(partition, None)
        # Not ready until every owned partition is restored: nothing is decided before.
        self.health.assigned = 0
        self.health.waiting_for = f"the restore of partitions {owned} from the changelog"
        self.metrics.restoring_partitions.set(len(owned))
        for partition in owned:
            self._restore(partition)
            self.metrics.restoring_partitions.dec()
        # Where each partition's last commit stands, and what it says was decided above it.
        for tp in self._committed(consumer, partitions):
            offset = tp.offset if tp.offset >= 0 else 0
            self.sequencer.assign(tp.partition, offset, tp.metadata)
            self._last_commits.pop(tp.partition, None)
        self._last_progress_look = float("-inf")
        super()._on_assign(consumer, partitions)
        self._refresh_index_stats(None)

    def _committed(
        self, consumer: Consumer, partitions: list[TopicPartition]
    ) -> list[TopicPartition]:
        """The group's committed offsets (and metadata) of `partitions`. Pending transactional
        offsets of a predecessor hold the answer up until its transaction ends: ask again."""
        delay = 1.0
        while True:
            try:
                return consumer.committed(partitions, timeout=30.0)
            except KafkaException as e:
                self._raise_if_fatal()
                log_event(
                    log,
                    logging.WARNING,
                    "cannot read the committed offsets yet; retrying",
                    error=e.args[0].str(),
                    retry_in_s=delay,
                )
                time.sleep(delay)
                delay = min(delay * 2, 10.0)

    def _release(self, partitions: list[TopicPartition], level: int, event: str) -> None:
        for tp in partitions:
            self.sequencer.revoke(tp.partition)
            self._last_commits.pop(tp.partition, None)
        super()._release(partitions, level, event)

    def _restore(self, partition: int) -> None:
        log_event(log, logging.INFO, "restore started", partition=partition)
        m = self.metrics
        seen = 0

        def progress(p: int, read: int, left: int) -> None:
            nonlocal seen
            m.restore_records.inc(read - seen)
            seen = read
            m.restore_remaining.labels(str(p)).set(left)
            self.health.turn()  # a long restore is progress, not a stuck loop

        result = restore_partition(
            consumer_config(self.config.kafka),
            self.full_config.scaleout.changelog_topic,
            partition,
            self.stores,
            progress,
        )
        m.restore_remaining.labels(str(partition)).set(0)
        m.restore_seconds.inc(result.seconds)
        log_event(
            log,
            logging.INFO,
            "restore finished",
            partition=partition,
            from_offset=result.start_offset,
            read=result.read,
            applied=result.applied,
            seconds=round(result.seconds, 3),
            per_second=round(result.per_second),
        )

    # -- housekeeping ----------------------------------------------------------------------

    def _housekeeping(self, store: object) -> None:
        now = time.monotonic()
        for s in self.stores.all_stores():
            if s.expiry_due():
                dropped = s.expire()
                if dropped:
                    self.metrics.segments_expired.inc(len(dropped))
                    log_event(log, logging.INFO, "segments expired", segments=dropped)
        if now - self._last_stats >= 10.0:
            self._refresh_index_stats(None)
            release_free_memory()  # as the single-process service does (consumer/ops/memory.py)

    def _refresh_index_stats(self, store: object) -> None:
        self._last_stats = time.monotonic()
        articles = segments = disk = 0
        for s in self.stores.all_stores():
            stats = s.stats()
            articles += stats.articles
            segments += len(stats.segments)
            disk += stats.disk_bytes
        self.metrics.index_articles.set(articles)
        self.metrics.index_segments.set(segments)
        self.metrics.index_disk_bytes.set(disk)
