"""`newsdedup run` (`--role all`): the whole pipeline in one process, as a `Stage` of the loop
(consumer/stream/service.py); `all_service` builds that Service.

Polled messages are fingerprinted by the worker pool and queued per partition; they are
decided in event-time order (eventtime.py) against the one index, whose batch, decisions and
dead letters the checkpoint then makes durable. Under a backlog the workers fingerprint the
next poll while the last one is decided and committed.
"""

from __future__ import annotations

import dataclasses
import logging
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

from confluent_kafka import Consumer, KafkaException, TopicPartition
from confluent_kafka.admin import AdminClient

from consumer.config import Config
from consumer.deciding.rules import match_rules
from consumer.ops.logs import log_event
from consumer.ops.metrics import Metrics
from consumer.records import Analyzed, Invalid, Message
from consumer.roles.replay import replay_feed
from consumer.stream.clients import ensure_output_topics
from consumer.stream.disorder import DisorderWatch
from consumer.stream.eventtime import EventTimeOrder, Timed, reorder_window, time_of
from consumer.stream.offsets import PartitionReads
from consumer.stream.outputs import Delivered, Outputs, Record
from consumer.stream.pipeline import Analysis, DecidedBatch, Pipeline
from consumer.stream.service import Service
from consumer.stream.stage import Runtime, Work, count_decisions, serving
from consumer.stream.state import IndexUpkeep, open_index
from consumer.stream.workers import Analyzer
from indexstore import IndexStore

log = logging.getLogger("newsdedup.service")

# A partition's queue is fetched no further past this many batches (AllStage._flow_control).
_QUEUED_BATCHES = 4


def decision_outputs(decided: DecidedBatch, topic: str) -> Outputs:
    """A decided batch as the checkpoint takes it: the decisions, corrections last, keyed by
    article id (a reader that keeps the latest per key ends with the event-time answer)."""
    records = [
        Record(topic, d.id.encode("utf-8"), d.to_bytes())
        for d in (*decided.decisions, *decided.corrections)
    ]
    return Outputs(decided.index_batch, records, decided.rejections, decided.stage_seconds)


@dataclass(slots=True)
class _InFlight:
    """A polled batch the workers are fingerprinting while older ones are decided."""

    messages: list[Message]
    results: Iterator[list[Analyzed | Invalid]]
    partitions: set[int]  # those the messages come from
    at_end: set[int]  # partitions whose end the poll reached, after these records
    backlog: bool  # the poll was full: the broker holds more right now


class AllStage:
    def __init__(self, runtime: Runtime) -> None:
        self.runtime = runtime
        self.config = runtime.config
        # Polled messages wait here to be decided in event-time order (stream/eventtime.py).
        self._order: EventTimeOrder[Analysis] = EventTimeOrder(
            self.config.service.partition_idle.ms, window=reorder_window(self.config)
        )
        # Room for a full reorder window and the batches that fill it.
        self._max_queued = max(
            _QUEUED_BATCHES * self.config.kafka.batch_max_messages,
            2 * self.config.service.reorder_window,
        )
        self._paused: set[int] = set()
        # Each partition's reads and commits: records leave the order earliest first, not
        # always in offset order (stream/offsets.py).
        self._reads: dict[int, PartitionReads] = {}
        self._last_commits: dict[int, tuple[int, str]] = {}
        self._disorder = DisorderWatch(runtime.metrics, log, self.config.service.reorder_window)
        self._lag_at_assign: dict[int, bool] = {}
        self._fingerprint_seconds = 0.0
        self._in_flight: _InFlight | None = None
        self._store: IndexStore | None = None
        self._pipeline: Pipeline | None = None
        self._input_partitions = 0
        self._upkeep = IndexUpkeep(self._stores, runtime.metrics, log)
        # One index decides the whole feed: /readyz tells when part of it goes elsewhere.
        runtime.health.needs_whole_feed = True

    # -- lifetime -----------------------------------------------------------------------------

    @contextmanager
    def resources(self) -> Iterator[None]:
        config = self.config
        # The pool first: its processes must not inherit Kafka or RocksDB state.
        with (
            Analyzer(config.input, config.fingerprint, config.service.workers) as analyzer,
            open_index(config.index) as store,
        ):
            self._store = store
            self._pipeline = Pipeline(store, analyzer, rules=match_rules(config.match))
            self._upkeep.refresh_gauges()
            with serving(self.runtime, analyzer):
                yield

    def ensure_topics(self, admin: AdminClient, input_partitions: int) -> None:
        self._input_partitions = input_partitions
        ensure_output_topics(admin, self.config.kafka, input_partitions)

    def consumer_settings(self) -> dict[str, object]:
        # A partition known to be at its end is not waited for (stream/eventtime.py).
        return {"enable.partition.eof": True}

    def prepare(self) -> None:
        """An index behind the group's committed offsets (its directory lost, or restored
        from an older copy) would decide the rest of the feed against what it lacks, and
        copies of those articles would pass as originals. So it is first rebuilt from the
        retained feed, up to those offsets; /readyz answers 503 meanwhile."""
        runtime = self.runtime
        store, analyzer = self._store, runtime.analyzer
        assert store is not None and analyzer is not None
        runtime.health.waiting_for = "the index to be rebuilt from the feed"
        new_index = not store.positions()
        log_event(log, logging.INFO, "checking the index against the group's committed offsets")
        result = runtime.retry(
            lambda: replay_feed(self.config, store, self._input_partitions, analyzer=analyzer),
            log,
            # The broker is away, or the group's offsets are still settling.
            "cannot compare the index with the group's committed offsets yet; retrying",
        )
        if result is None:
            return  # asked to stop
        replayed = {
            "messages": result.messages,
            "seconds": round(result.seconds, 1),
            "partitions": [p.partition for p in result.partitions if p.end > p.start],
        }
        if result.messages and new_index:
            log_event(
                log,
                logging.INFO,
                "the index is empty (a new instance, or a new index directory) and the group has "
                "committed offsets: rebuilt it from the retained feed up to them",
                **replayed,
            )
        elif not new_index and (result.messages or result.lost):
            log_event(
                log,
                logging.WARNING,
                "the index was behind the group's committed offsets (lost, or an older copy); "
                "rebuilt it from the retained feed",
                **replayed,
            )
        if result.lost:
            log_event(
                log,
                logging.WARNING,
                "part of the feed behind the index is no longer retained by the broker: later "
                "copies of those articles will not be flagged",
                messages_lost=result.lost,
            )
        runtime.health.waiting_for = "a partition assignment"

    # -- partitions ---------------------------------------------------------------------------

    def assigned(self, consumer: Consumer, partitions: list[TopicPartition]) -> None:
        start = None if self._store is None else self._store.watermark_ms()
        self._order.assign([p.partition for p in partitions], start_ms=start)
        self._lag_at_assign = self._lag_of(consumer, partitions)
        total = self.runtime.health.input_partitions or self._input_partitions
        if 0 < len(partitions) < total:
            log_event(
                log,
                logging.WARNING,
                "this instance sees only part of the input partitions: duplicates across "
                "instances will be missed. Run one --role all instance per feed (its own "
                "group_id), or the scale-out roles (fingerprint, decide) to spread the work",
                assigned=len(partitions),
                total=total,
            )

    def released(self, partitions: list[TopicPartition]) -> None:
        # What was queued for these partitions is read again by their next owner; the batch
        # in flight is queued first, so none of it lands in a queue assigned afresh.
        self._settle()
        self._order.revoke(p.partition for p in partitions)
        self._paused.difference_update(p.partition for p in partitions)
        for tp in partitions:
            self._reads.pop(tp.partition, None)
            self._last_commits.pop(tp.partition, None)

    def _lag_of(self, consumer: Consumer, partitions: list[TopicPartition]) -> dict[int, bool]:
        """Which of the partitions just assigned have records past the group's committed
        offset: a restart on a backlog must wait for each of them, however slow its first
        fetch (two requests to the broker, once per assignment)."""
        try:
            committed = consumer.committed(partitions, timeout=10.0)
            self._start_reads(committed)
            lag = {}
            for tp in committed:
                low, high = consumer.get_watermark_offsets(tp, timeout=10.0, cached=False)
                lag[tp.partition] = (tp.offset if tp.offset >= 0 else low) < high
            return lag
        except KafkaException as e:
            log_event(log, logging.WARNING, "cannot read the partitions' lag", error=str(e))
            self._start_reads([TopicPartition(tp.topic, tp.partition) for tp in partitions])
            return {}

    def _start_reads(self, committed: list[TopicPartition]) -> None:
        """Each assigned partition's reads start at the group's commit, which names what was
        decided above it; without one (none yet, or it could not be read), at the first
        record read."""
        for tp in committed:
            offset = tp.offset if tp.offset >= 0 else None
            self._reads[tp.partition] = PartitionReads.from_commit(offset, tp.metadata)
            self._last_commits.pop(tp.partition, None)

    # -- the batch ----------------------------------------------------------------------------

    def take(self, consumer: Consumer, messages: list[Message], at_end: set[int]) -> None:
        """Queue the batch polled before (its fingerprints are done by now, or nearly) and
        start the workers on this one: they fingerprint it while what is queued is decided."""
        self._settle()
        messages = [m for m in messages if self._read(m)]
        if messages:
            assert self._pipeline is not None
            self._in_flight = _InFlight(
                messages,
                self._pipeline.analyze(messages),
                {m.source.partition for m in messages},
                at_end,
                backlog=len(messages) >= self.config.kafka.batch_max_messages,
            )
            self._order.expect(self._in_flight.partitions, True)
        else:
            for partition in at_end:
                self._order.caught_up(partition)
        self._flow_control(consumer)
        self._note_lag(consumer)

    def _read(self, message: Message) -> bool:
        """Whether a polled record is to be decided: not when it was read already, or decided
        before a restart or a move (its partition's commit says so). One to be decided holds
        its partition's commit back from now on, while the workers fingerprint it too."""
        reads = self._reads.get(message.source.partition)
        if reads is None:  # assigned without a look at its commit: from the first record
            reads = self._reads[message.source.partition] = PartitionReads.from_commit(None, None)
        if not reads.read(message.source.offset):
            return False
        reads.queued[message.source.offset] = message.source.partition
        return True

    def _settle(self) -> None:
        """Queue the batch in flight by partition, once the workers have fingerprinted it."""
        in_flight, self._in_flight = self._in_flight, None
        if in_flight is None:
            return
        order = self._order
        t0 = time.perf_counter()
        results = [r for chunk in in_flight.results for r in chunk]
        self._fingerprint_seconds += time.perf_counter() - t0
        for message, result in zip(in_flight.messages, results, strict=True):
            if isinstance(result, Analyzed):
                # Only a rejection's value is needed again (for the DLQ).
                message = dataclasses.replace(message, value=None)
            partition = message.source.partition
            order.add(partition, (message, result), time_of(result), message.timestamp_ms)
        self._disorder.note(order.out_of_order, order.beyond_window)
        order.expect(in_flight.partitions, False)
        for partition in in_flight.at_end:
            order.caught_up(partition)

    def next_work(self, limit: int) -> Work | None:
        """What the event-time order releases now. When it releases nothing, the batch in
        flight is waited for, unless the last poll was full: then more is waiting on the
        broker, and reading it while the workers finish keeps both sides busy."""
        span = self.config.index.retention.ms  # a batch stays inside one window (eventtime.py)
        released = list(self._order.release(limit, span))
        if not released and self._in_flight is not None and not self._in_flight.backlog:
            self._settle()
            released = list(self._order.release(limit, span))
        if not released:
            return None
        entries = released
        for entry in entries:
            self._decided(entry.item[0])
        entries += self._unblock_commits()
        messages = [e.item[0] for e in entries]
        return Work(messages, lambda: self._decide(entries), self._commits())

    def _decided(self, message: Message) -> None:
        reads = self._reads.get(message.source.partition)
        if reads is not None:
            reads.decided(message.source.offset)

    def _unblock_commits(self) -> list[Timed[Analysis]]:
        """A commit that could no longer name what was decided above it (its metadata has a
        size limit) decides the record holding it back now, out of order, rather than stop."""
        entries = []
        for partition, reads in self._reads.items():
            while reads.commit_held_back():
                message, result = self._order.pop_first(partition)
                self._decided(message)
                entries.append(Timed((message, result), None))
        return entries

    def _commits(self) -> list[TopicPartition]:
        """The offsets (and what was decided above them) to commit once the work is durable:
        those that moved since the last commit."""
        topic = self.config.kafka.input_topic
        offsets = []
        for partition, reads in self._reads.items():
            commit = reads.commit()
            if commit is not None and commit != self._last_commits.get(partition):
                offsets.append(TopicPartition(topic, partition, commit[0], metadata=commit[1]))
        return offsets

    def _decide(self, entries: list[Timed[Analysis]]) -> tuple[DecidedBatch, Outputs]:
        assert self._pipeline is not None
        decided = self._pipeline.decide_ordered(entries)
        decided.stage_seconds["fingerprint"] = self._fingerprint_seconds
        self._fingerprint_seconds = 0.0
        return decided, decision_outputs(decided, self.config.kafka.output_topic)

    def durable(self, work: Work, decided: Any, delivered: Delivered) -> None:
        count_decisions(self.runtime.metrics, decided.decisions)
        for tp in work.offsets:
            reads = self._reads.get(tp.partition)
            if reads is not None:
                reads.committed_at(tp.offset)
                self._last_commits[tp.partition] = (tp.offset, tp.metadata or "")

    def rewind(self, consumer: Consumer, work: Work) -> None:
        """Read again from each partition's last commit (what it names as decided above it is
        skipped again); a partition without a commit, from the failed batch's first message
        or its first queued one. The queues start over."""
        first = {p: entry[0].source.offset for p, entry in self._order.first_queued().items()}
        in_flight, self._in_flight = self._in_flight, None  # read again, from the broker
        for m in (*work.messages, *(in_flight.messages if in_flight else ())):
            p = m.source.partition
            first[p] = min(first.get(p, m.source.offset), m.source.offset)
        self._order.clear()
        for p, reads in self._reads.items():
            committed = reads.restart()
            if committed is not None:
                first[p] = committed
            elif p in first:
                reads.next_offset = None  # read again from `first`, whatever it was
        topic = self.config.kafka.input_topic
        assigned = {(tp.topic, tp.partition) for tp in consumer.assignment()}
        for partition, offset in first.items():
            if (topic, partition) in assigned:
                consumer.seek(TopicPartition(topic, partition, offset))

    def _flow_control(self, consumer: Consumer) -> None:
        """Stop fetching a partition whose queue is long (it waits for a slower one), and
        fetch it again once the queue has drained to half: memory stays bounded however far
        apart the partitions are."""
        topic = self.config.kafka.input_topic
        for partition in self._order.partitions():
            queued = self._order.queued(partition)
            if partition not in self._paused and queued >= self._max_queued:
                consumer.pause([TopicPartition(topic, partition)])
                self._paused.add(partition)
            elif partition in self._paused and queued <= self._max_queued // 2:
                consumer.resume([TopicPartition(topic, partition)])
                self._paused.discard(partition)

    def _note_lag(self, consumer: Consumer) -> None:
        """Tell the order which partitions with nothing queued still have records on the
        broker (from the high watermark of the last fetch): those are waited for."""
        topic = self.config.kafka.input_topic
        empty = [p for p in self._order.partitions() if not self._order.ready(p)]
        if not empty:
            return
        positions = consumer.position([TopicPartition(topic, p) for p in empty])
        for tp in positions:
            if tp.offset < 0:
                # Not fetched yet (just assigned): what the broker said at the assignment.
                self._order.behind(tp.partition, self._lag_at_assign.get(tp.partition, False))
                continue
            _low, high = consumer.get_watermark_offsets(tp, cached=True)
            self._order.behind(tp.partition, 0 <= tp.offset < high)

    # -- between polls --------------------------------------------------------------------------

    def housekeeping(self) -> None:
        self._upkeep.between_polls()

    def _stores(self) -> list[IndexStore]:
        return [] if self._store is None else [self._store]


def all_service(config: Config, metrics: Metrics | None = None) -> Service:
    """`newsdedup run` (`--role all`)."""
    return Service(config, metrics, stage=AllStage, role="all")
