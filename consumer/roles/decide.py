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
for an article whose record is missing there. The deciding itself, against the domains'
indexes, is decider.py's; this module is the Kafka stage around it.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Iterable, Iterator, Sequence
from contextlib import contextmanager
from functools import partial

from confluent_kafka import Consumer, IsolationLevel, KafkaException, TopicPartition
from confluent_kafka.admin import AdminClient, OffsetSpec

from consumer.config import Config
from consumer.deciding.rules import match_rules
from consumer.ops.logs import log_event
from consumer.ops.metrics import Metrics
from consumer.records import Message
from consumer.roles.decider import DecideBatch, Decider
from consumer.scaleout.changelog import RestoreResult, restore_partition
from consumer.scaleout.common import ensure_scaleout_topics, role_config
from consumer.scaleout.domains import DomainStores
from consumer.scaleout.sequencing import Entry, Sequencer
from consumer.stream.clients import consumer_config, ensure_output_topics, topic_partitions
from consumer.stream.disorder import DisorderWatch
from consumer.stream.eventtime import Timed, reorder_window
from consumer.stream.outputs import Delivered, Outputs
from consumer.stream.service import Service
from consumer.stream.stage import Runtime, Work, count_decisions, serving
from consumer.stream.state import IndexUpkeep

log = logging.getLogger("newsdedup.roles.decide")

# How often the broker is asked how far the fingerprint role and this instance have read: a
# queue that waits for nothing more is let go at the next look.
_PROGRESS_LOOK_S = 0.1


class DecideStage:
    """`--role decide` as a stage of the loop: queue by internal partition and feed source,
    decide what the event-time order releases, commit each partition's first queued offset
    with what was decided above it (scaleout/sequencing.py)."""

    def __init__(self, runtime: Runtime) -> None:
        self.runtime = runtime
        self.config = runtime.config
        self.full_config = runtime.full_config
        self.stores = DomainStores(self.config.index)
        self.decider = Decider(self.stores, match_rules(self.config.match))
        # Event-time order inside each owned internal partition (scaleout/sequencing.py); one
        # queue per feed partition, whose count is learnt at start.
        self.sequencer = Sequencer(
            self.config.service.partition_idle.ms,
            1,
            max_queued=self.full_config.scaleout.reorder_buffer,
            window=reorder_window(self.config),
            span_ms=self.config.index.retention.ms,
        )
        self._last_commits: dict[int, tuple[int, str]] = {}
        # Reads the fingerprint role's committed offsets; assign()-free, it never joins.
        self._feed_watch: Consumer | None = None
        self._last_progress_look = float("-inf")
        self._overflow_seen = 0
        self._disorder = DisorderWatch(runtime.metrics, log, self.config.service.reorder_window)
        self._overflow_logged_at = float("-inf")
        self._upkeep = IndexUpkeep(self.stores.all_stores, runtime.metrics, log)

    # -- lifetime -----------------------------------------------------------------------------

    @contextmanager
    def resources(self) -> Iterator[None]:
        try:
            with serving(self.runtime, None):
                yield
        finally:
            self.stores.close()
            if self._feed_watch is not None:
                self._feed_watch.close()
                self._feed_watch = None

    def ensure_topics(self, admin: AdminClient, input_partitions: int) -> None:
        ensure_scaleout_topics(admin, self.full_config)
        ensure_output_topics(admin, self.config.kafka, input_partitions)
        feed = topic_partitions(admin, self.full_config.kafka.input_topic)
        self.sequencer.sources = max(feed or 1, 1)

    def consumer_settings(self) -> dict[str, object]:
        return {}

    def prepare(self) -> None:
        pass

    # -- the batch ----------------------------------------------------------------------------

    def take(self, consumer: Consumer, messages: list[Message], at_end: set[int]) -> None:
        for m in messages:
            self.sequencer.add(m, self.decider.decode(m))
        self._watch_progress(consumer)

    def next_work(self, limit: int) -> Work | None:
        entries = self.sequencer.release(limit)
        self._note_overflow()
        self._disorder.note(self.sequencer.out_of_order, self.sequencer.beyond_window)
        commits = self.sequencer.commits()
        moved = {p: c for p, c in commits.items() if self._last_commits.get(p) != c}
        if not entries and not moved:
            return None
        topic = self.config.kafka.input_topic
        offsets = [TopicPartition(topic, p, o, metadata=md) for p, (o, md) in moved.items()]
        return Work([e.item[0] for e in entries], partial(self._decide, entries), offsets)

    def _decide(self, entries: Sequence[Timed[Entry]]) -> tuple[DecideBatch, Outputs]:
        decided = self.decider.decide_entries(entries)
        topics = self.config.kafka.output_topic, self.full_config.scaleout.changelog_topic
        return decided, decided.outputs(*topics)

    def durable(self, work: Work, decided: DecideBatch, delivered: Delivered) -> None:
        moved = {tp.partition: (tp.offset, tp.metadata or "") for tp in work.offsets}
        self.sequencer.committed(moved)
        self._last_commits.update(moved)
        metrics = self.runtime.metrics
        count_decisions(metrics, decided.outcomes)
        metrics.changelog_records.inc(len(decided.changes))
        # Where our records now end in each changelog partition: written into its stores with
        # their next batch, so a later restore of them starts after our own records.
        changelog = self.full_config.scaleout.changelog_topic
        for (topic, partition), offset in delivered.items():
            if topic == changelog:
                self.decider.delivered[partition] = offset + 1

    def rewind(self, consumer: Consumer, work: Work) -> None:
        """Read every owned partition again from its last commit."""
        topic = self.config.kafka.input_topic
        assigned = {tp.partition for tp in consumer.assignment()}
        for partition, offset in self.sequencer.restart().items():
            if partition in assigned:
                consumer.seek(TopicPartition(topic, partition, offset))

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
        admin = self.runtime.admin
        assert admin is not None
        asked = {TopicPartition(topic, p): OffsetSpec.latest() for p in partitions}
        if not asked:
            return {}
        futures = admin.list_offsets(
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
        self.runtime.metrics.reorder_overflow.inc(overflowed)
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

    # -- ownership -------------------------------------------------------------------------

    def assigned(self, consumer: Consumer, partitions: list[TopicPartition]) -> None:
        health, metrics = self.runtime.health, self.runtime.metrics
        owned = sorted(p.partition for p in partitions)
        for partition in self.stores.partitions():
            if partition not in owned:
                self.stores.close_partition(partition)
                self.decider.delivered.pop(partition, None)
        # Not ready until every owned partition is restored: nothing is decided before.
        health.assigned = 0
        health.waiting_for = f"the restore of partitions {owned} from the changelog"
        metrics.restoring_partitions.set(len(owned))
        for partition in owned:
            if not self._restore(partition):
                return  # stopping: nothing is decided from these partitions
            metrics.restoring_partitions.dec()
        committed = self._committed(consumer, partitions)
        if committed is None:
            return  # stopping: nothing is decided from these partitions
        # Where each partition's last commit stands, and what it says was decided above it.
        for tp in committed:
            offset = tp.offset if tp.offset >= 0 else 0
            self.sequencer.assign(tp.partition, offset, tp.metadata)
            self._last_commits.pop(tp.partition, None)
        self._last_progress_look = float("-inf")
        self._upkeep.refresh_gauges()

    def _committed(
        self, consumer: Consumer, partitions: list[TopicPartition]
    ) -> list[TopicPartition] | None:
        """The group's committed offsets (and metadata) of `partitions`; None when asked to
        stop meanwhile. Pending transactional offsets of a predecessor hold the answer up until
        its transaction ends: ask again."""
        return self.runtime.retry(
            lambda: consumer.committed(partitions, timeout=30.0),
            log,
            "cannot read the committed offsets yet; retrying",
            max_delay_s=10.0,
        )

    def released(self, partitions: list[TopicPartition]) -> None:
        for tp in partitions:
            self.sequencer.revoke(tp.partition)
            self._last_commits.pop(tp.partition, None)

    def _restore(self, partition: int) -> bool:
        """Bring `partition`'s index up to the end of its changelog; False when asked to stop
        first. The broker refuses to serve a partition for a while after the topic is created
        or while its leader moves: the restore is tried again from where the index stands."""
        log_event(log, logging.INFO, "restore started", partition=partition)
        m = self.runtime.metrics
        seen = 0

        def progress(p: int, read: int, left: int) -> None:
            nonlocal seen
            m.restore_records.inc(read - seen)
            seen = read
            m.restore_remaining.labels(str(p)).set(left)
            self.runtime.health.turn()  # a long restore is progress, not a stuck loop

        def attempt() -> RestoreResult:
            nonlocal seen
            seen = 0  # each attempt counts its records from 0
            return restore_partition(
                consumer_config(self.config.kafka),
                self.full_config.scaleout.changelog_topic,
                partition,
                self.stores,
                progress,
            )

        result = self.runtime.retry(
            attempt,
            log,
            "cannot restore the partition yet; retrying",
            max_delay_s=10.0,
            partition=partition,
        )
        if result is None:
            return False
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
        return True

    # -- housekeeping ----------------------------------------------------------------------

    def housekeeping(self) -> None:
        self._upkeep.between_polls()


def decide_service(config: Config, metrics: Metrics | None = None) -> Service:
    """`newsdedup run --role decide`."""
    return Service(
        role_config(config, "decide"), metrics, stage=DecideStage, role="decide", full_config=config
    )
