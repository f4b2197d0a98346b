"""`newsdedup run`: the Kafka loop. Poll a batch, decide it, make it durable, repeat.

Each batch is finished (index, outputs, offsets: see checkpoint.py) before the next poll, so
a rebalance or a shutdown never finds work in flight.
"""

from __future__ import annotations

import dataclasses
import json
import logging
import os
import threading
import time
import traceback
from collections.abc import Callable, Sequence
from functools import partial

from confluent_kafka import (
    TIMESTAMP_NOT_AVAILABLE,
    Consumer,
    KafkaError,
    KafkaException,
    Producer,
    TopicPartition,
)
from confluent_kafka.admin import AdminClient

from consumer.config import Config, parse_duration_ms
from consumer.deciding.article import Analyzed
from consumer.deciding.decision import Decision, DecisionKind, Source
from consumer.deciding.rules import match_rules
from consumer.errors import NewsdedupError
from consumer.ops.health import HealthServer, HealthState
from consumer.ops.logs import log_event
from consumer.ops.memory import release_free_memory
from consumer.ops.metrics import Metrics
from consumer.stream.checkpoint import Checkpoint, OutputFailed
from consumer.stream.clients import (
    REFUSAL_CODES,
    admin_config,
    consumer_config,
    ensure_output_topics,
    group_instance_id,
    producer_config,
    topic_max_message_bytes,
    topic_partitions,
)
from consumer.stream.eventtime import EventTimeOrder, time_of
from consumer.stream.parsing import Invalid
from consumer.stream.pipeline import DecidedBatch, Message, Ordered, Pipeline, wall_clock_ms
from consumer.stream.state import open_index
from consumer.stream.workers import Analyzer
from indexstore import IndexStore

log = logging.getLogger("newsdedup.service")

_FATAL_CODES = REFUSAL_CODES
# A consumer's own fatal errors arrive as records: _FATAL (with fatal() false on the record),
# e.g. a static member fenced by a newer one with the same group.instance.id.
_CONSUMER_FATAL_CODES = _FATAL_CODES | {KafkaError._FATAL, KafkaError.FENCED_INSTANCE_ID}
_STATS_REFRESH_S = 10.0
# How often freed memory is handed back to the OS (consumer/ops/memory.py says why).
_RELEASE_MEMORY_S = 30.0
_THROUGHPUT_LOG_S = 30.0
_MAX_BACKOFF_S = 30.0
_ERROR_LOG_EVERY_S = 10.0
# A partition's queue is fetched no further past this many batches (Service._flow_control).
_QUEUED_BATCHES = 4
# A stop that could not finish in [service] stop_timeout (the broker is gone mid-batch).
EXIT_STOP_TIMEOUT = 3


class KafkaFatalError(NewsdedupError):
    """The broker refused us for good (credentials, authorization, fencing): do not retry."""


class Service:
    def __init__(self, config: Config, metrics: Metrics | None = None) -> None:
        self.config = config
        self.metrics = metrics or Metrics()
        self.health = HealthState(
            stuck_after_s=parse_duration_ms(config.service.stuck_after) / 1000
        )
        self._stop = threading.Event()
        self._fatal: str | None = None
        self._last_error_log: dict[int, float] = {}
        self._input_partitions = 0
        self._dlq_max_bytes: int | None = None
        self._decided_since_log = 0
        # Seconds spent on batches (poll to durable) since the last throughput line.
        self._busy_since_log = 0.0
        self._last_throughput_log = time.monotonic()
        self._last_stats = 0.0
        self._last_memory_release = time.monotonic()
        self.http: HealthServer | None = None
        self._admin: AdminClient | None = None
        # Polled messages wait here to be decided in event-time order (stream/eventtime.py).
        self._order: EventTimeOrder[tuple[Message, Analyzed | Invalid]] = EventTimeOrder(
            parse_duration_ms(config.service.partition_idle)
        )
        self._max_queued = _QUEUED_BATCHES * config.kafka.batch_max_messages
        self._paused: set[int] = set()
        self._lag_at_assign: dict[int, bool] = {}
        self._fingerprint_seconds = 0.0
        self._index: IndexStore | None = None
        # The worker pool while it runs: a stop that gives up must end it (_abandon_stop).
        self._analyzer: Analyzer | None = None
        self.group_instance_id = group_instance_id(
            config.scaleout.instance_id, config.metrics.listen
        )

    def request_stop(self) -> None:
        """Finish the batch in hand, commit, close. Should the broker keep that from ending
        within [service] stop_timeout, exit anyway: the index is written before anything is
        published and offsets are committed last, so the unfinished batch is simply read again
        at the next start (exactly_once: its open transaction is aborted by then)."""
        if self._stop.is_set():
            return
        self._stop.set()
        timeout_s = parse_duration_ms(self.config.service.stop_timeout) / 1000
        timer = threading.Timer(timeout_s, self._abandon_stop, args=(timeout_s,))
        timer.daemon = True
        timer.start()

    def _abandon_stop(self, waited_s: float) -> None:
        log_event(
            log,
            logging.ERROR,
            "stop timed out waiting for the broker; exiting without finishing the batch in "
            "hand, which the next start reads again",
            waited_s=waited_s,
        )
        logging.shutdown()
        # os._exit skips the pool's clean-up: its workers would outlive the service.
        if self._analyzer is not None:
            self._analyzer.kill()
        os._exit(EXIT_STOP_TIMEOUT)

    def run(self) -> int:
        self.http = HealthServer(self.config.metrics.listen, self.health, self.metrics).start()
        log_event(
            log,
            logging.INFO,
            "starting",
            listen=self.config.metrics.listen,
            instance=self.group_instance_id,
            delivery=self.config.kafka.delivery,
            input=self.config.kafka.input_topic,
            output=self.config.kafka.output_topic,
            index=self.config.index.path,
        )
        try:
            # The pool first: its processes must not inherit Kafka or RocksDB state.
            with (
                Analyzer(
                    self.config.input, self.config.fingerprint, self.config.service.workers
                ) as analyzer,
                open_index(self.config.index) as store,
            ):
                self._analyzer = analyzer
                self.health.index_open = True
                self._index = store
                self._refresh_index_stats(store)
                try:
                    self._serve(store, analyzer)
                finally:
                    self.health.index_open = False
        except Exception as e:
            # One structured line for log pipelines; the CLI still tells the user.
            log_event(log, logging.ERROR, "stopping on error", error=f"{type(e).__name__}: {e}")
            raise
        finally:
            self.http.stop()
        log_event(log, logging.INFO, "stopped")
        return 0

    # -- startup ---------------------------------------------------------------------------

    def _serve(self, store: IndexStore, analyzer: Analyzer) -> None:
        self._admin = AdminClient({**admin_config(self.config.kafka), "error_cb": self._on_error})
        try:
            self._serve_with(self._admin, store, analyzer)
        except KafkaFatalError as refused:
            # A refused client keeps reconnecting, each attempt one more failed login in the
            # broker's log, until it is destroyed; the shutdown ahead (the workers, the index)
            # takes a while. librdkafka destroys it with its last reference, and frames in the
            # tracebacks of the error and of the errors it was raised while handling hold some.
            error: BaseException | None = refused
            while error is not None:
                traceback.clear_frames(error.__traceback__)
                error = error.__cause__ or error.__context__
            self._admin = None
            raise

    def _serve_with(self, admin: AdminClient, store: IndexStore, analyzer: Analyzer) -> None:
        kafka = self.config.kafka
        partitions = self._wait_for_input_topic(admin)
        if partitions is None:
            return
        self._input_partitions = partitions
        self._ensure_topics(admin)
        consumer = Consumer(
            {
                # Static membership; [kafka.client] may still set its own.
                "group.instance.id": self.group_instance_id,
                **consumer_config(kafka),
                # A partition known to be at its end is not waited for (stream/eventtime.py).
                "enable.partition.eof": True,
                "error_cb": self._on_error,
                "stats_cb": self._on_stats,
            }
        )
        checkpoint = None
        try:
            checkpoint = Checkpoint(
                consumer,
                lambda: Producer({**producer_config(kafka), "error_cb": self._on_producer_error}),
                kafka,
            )
            checkpoint.stopping = self._stop.is_set
            checkpoint.limit_dead_letters(self._dlq_max_bytes)
            # After the checkpoint's producer has started: under exactly_once it fences a
            # killed predecessor and aborts its open transaction, whose pending offsets would
            # otherwise hold up reading the committed ones until that transaction times out.
            self._catch_up_index(store, analyzer)
            if self._stop.is_set():
                return
            consumer.subscribe(
                [kafka.input_topic],
                on_assign=self._on_assign,
                on_revoke=self._on_revoke,
                on_lost=self._on_lost,
            )
            self._loop(
                consumer,
                Pipeline(store, analyzer, rules=match_rules(self.config.match)),
                checkpoint,
                store,
            )
        finally:
            self.health.assigned = 0
            consumer.close()
            if checkpoint is not None:
                checkpoint.close()

    def _catch_up_index(self, store: IndexStore, analyzer: Analyzer) -> None:
        """An index behind the group's committed offsets (its directory lost, or restored
        from an older copy) would decide the rest of the feed against what it lacks, and
        copies of those articles would pass as originals. So it is first rebuilt from the
        retained feed, up to those offsets; /readyz answers 503 meanwhile."""
        from consumer.stream.replay import replay_feed

        self.health.waiting_for = "the index to be rebuilt from the feed"
        log_event(log, logging.INFO, "checking the index against the group's committed offsets")
        delay = 1.0
        while True:
            try:
                result = replay_feed(self.config, store, self._input_partitions, analyzer=analyzer)
                break
            except KafkaException as e:
                # The broker is away, or the group's offsets are still settling.
                self._raise_if_fatal()
                log_event(
                    log,
                    logging.WARNING,
                    "cannot compare the index with the group's committed offsets yet; retrying",
                    error=e.args[0].str(),
                    retry_in_s=delay,
                )
                if self._stop.wait(delay):
                    return
                delay = min(delay * 2, _MAX_BACKOFF_S)
        if result.messages or result.lost:
            log_event(
                log,
                logging.WARNING,
                "the index was behind the group's committed offsets (lost, or an older copy); "
                "rebuilt it from the retained feed",
                messages=result.messages,
                seconds=round(result.seconds, 1),
                partitions=[p.partition for p in result.partitions if p.end > p.start],
            )
        if result.lost:
            log_event(
                log,
                logging.WARNING,
                "part of the feed behind the index is no longer retained by the broker: later "
                "copies of those articles will not be flagged",
                messages_lost=result.lost,
            )
        self.health.waiting_for = "a partition assignment"

    def _wait_for_input_topic(self, admin: AdminClient) -> int | None:
        """Partition count of the input topic, waiting with backoff while the broker is down or
        the topic does not exist yet; None when asked to stop meanwhile."""
        delay = 1.0
        while not self._stop.is_set():
            self._raise_if_fatal()
            self.health.turn()
            try:
                partitions = topic_partitions(
                    admin, self.config.kafka.input_topic, timeout=5.0, check=self._raise_if_fatal
                )
                self.health.broker_reachable = True
                if partitions:
                    self.health.waiting_for = "a partition assignment"
                    return partitions
                self.health.waiting_for = f"the input topic {self.config.kafka.input_topic!r}"
                log_event(
                    log,
                    logging.WARNING,
                    "input topic does not exist yet; waiting",
                    topic=self.config.kafka.input_topic,
                    retry_in_s=delay,
                )
            except KafkaException as e:
                self.health.broker_reachable = False
                self._raise_if_fatal()
                log_event(
                    log,
                    logging.WARNING,
                    "broker not reachable; waiting",
                    bootstrap=self.config.kafka.bootstrap_servers,
                    error=e.args[0].str(),
                    retry_in_s=delay,
                )
            self._stop.wait(delay)
            delay = min(delay * 2, _MAX_BACKOFF_S)
        return None

    def _ensure_topics(self, admin: AdminClient) -> None:
        """Create the topics this service writes to when they are missing, and learn how large
        a dead letter the DLQ topic takes."""
        ensure_output_topics(admin, self.config.kafka, self._input_partitions)
        self._dlq_max_bytes = topic_max_message_bytes(admin, self.config.kafka.dlq_topic)

    # -- the loop ----------------------------------------------------------------------------

    def _loop(
        self, consumer: Consumer, pipeline: Pipeline, checkpoint: Checkpoint, store: IndexStore
    ) -> None:
        """Poll, fingerprint, queue by partition; decide what the event-time order releases,
        make it durable; repeat."""
        max_messages = self.config.kafka.batch_max_messages
        wait_s = parse_duration_ms(self.config.kafka.batch_max_wait) / 1000
        order = self._order
        backoff = 0.0
        while not self._stop.is_set():
            self.health.turn()
            self._raise_if_fatal()
            records = consumer.consume(max_messages, wait_s)
            polled_at = time.perf_counter()
            messages, at_end = self._valid_records(records)
            if messages:
                self.health.broker_reachable = True
                t0 = time.perf_counter()
                results = pipeline.analyzer.analyze([(m.value, m.timestamp_ms) for m in messages])
                self._fingerprint_seconds += time.perf_counter() - t0
                for message, result in zip(messages, results, strict=True):
                    if isinstance(result, Analyzed):
                        # Only a rejection's value is needed again (for the DLQ).
                        message = dataclasses.replace(message, value=None)
                    order.add(
                        message.source.partition,
                        (message, result),
                        time_of(result),
                        message.timestamp_ms,
                    )
            for partition in at_end:
                order.caught_up(partition)
            self._flow_control(consumer)
            self._note_lag(consumer)
            while not self._stop.is_set():
                released = list(order.release(max_messages))
                if not released:
                    break
                entries = [Ordered(*r.item, r.time_ms) for r in released]
                messages = [e.message for e in entries]
                decide = partial(self._decide_ordered, pipeline, entries)
                if self._process(messages, decide, consumer, checkpoint, polled_at):
                    backoff = 0.0
                else:
                    backoff = min(max(backoff * 2, 0.5), _MAX_BACKOFF_S)
                    self._stop.wait(backoff)
                    break
            self._housekeeping(store)

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
        empty = [p for p in self._order.partitions() if not self._order.queued(p)]
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

    def _lag_of(self, consumer: Consumer, partitions: list[TopicPartition]) -> dict[int, bool]:
        """Which of the partitions just assigned have records past the group's committed
        offset: a restart on a backlog must wait for each of them, however slow its first
        fetch (two requests to the broker, once per assignment)."""
        try:
            committed = consumer.committed(partitions, timeout=10.0)
            lag = {}
            for tp in committed:
                low, high = consumer.get_watermark_offsets(tp, timeout=10.0, cached=False)
                lag[tp.partition] = (tp.offset if tp.offset >= 0 else low) < high
            return lag
        except KafkaException as e:
            log_event(log, logging.WARNING, "cannot read the partitions' lag", error=str(e))
            return {}

    def _valid_records(self, records: Sequence) -> tuple[list[Message], set[int]]:
        """The messages polled, and the partitions whose last word was that they reached
        their end."""
        messages = []
        at_end: set[int] = set()
        for record in records:
            error = record.error()
            if error is not None:
                if error.code() == KafkaError._PARTITION_EOF:
                    at_end.add(record.partition())
                elif error.fatal() or error.code() in _CONSUMER_FATAL_CODES:
                    self._fatal = error.str()
                else:
                    log_event(log, logging.WARNING, "consume error", error=error.str())
                continue
            at_end.discard(record.partition())
            ts_type, ts = record.timestamp()
            messages.append(
                Message(
                    key=record.key(),
                    value=record.value(),
                    source=Source(record.topic(), record.partition(), record.offset()),
                    timestamp_ms=wall_clock_ms() if ts_type == TIMESTAMP_NOT_AVAILABLE else ts,
                    headers=tuple(record.headers() or ()),
                )
            )
        return messages, at_end

    def _decide_ordered(self, pipeline: Pipeline, entries: list[Ordered]) -> DecidedBatch:
        decided = pipeline.decide_ordered(entries)
        decided.stage_seconds["fingerprint"] = self._fingerprint_seconds
        self._fingerprint_seconds = 0.0
        return decided

    def _process(
        self,
        messages: list[Message],
        decide: Callable[[], DecidedBatch],
        consumer: Consumer,
        checkpoint: Checkpoint,
        polled_at: float,
        offsets: list[TopicPartition] | None = None,
    ) -> bool:
        """Decide `messages` (through `decide`) and make the batch durable, committing
        `offsets` (by default: past each partition's last message); False when its outputs
        failed and it will be read again."""
        decided = decide()
        try:
            checkpoint.complete(decided, _next_offsets(messages) if offsets is None else offsets)
        except OutputFailed as e:
            # Nothing past this batch is read until its outputs are delivered: a decision is
            # never dropped, and /readyz says why the service is not moving.
            self.metrics.batch_retries.inc()
            self.health.output_error = str(e)
            log_event(
                log,
                logging.ERROR,
                "outputs not delivered; rewinding the batch to retry",
                error=str(e),
                messages=len(messages),
            )
            if e.topic_missing:
                self._recreate_missing_topics()
            self._rewind(consumer, messages)
            return False
        self.health.output_error = None
        self._record(decided, polled_at, time.perf_counter())
        return True

    def _rewind(self, consumer: Consumer, failed: Sequence[Message]) -> None:
        """Read again from the failed batch's first message in each partition, and from the
        first queued one in the others; the queues start over."""
        first = {p: entry[0].source for p, entry in self._order.first_queued().items()}
        for m in failed:
            first[m.source.partition] = min(
                first.get(m.source.partition, m.source), m.source, key=lambda s: s.offset
            )
        self._order.clear()
        assigned = {(tp.topic, tp.partition) for tp in consumer.assignment()}
        for source in first.values():
            if (source.topic, source.partition) in assigned:
                consumer.seek(TopicPartition(source.topic, source.partition, source.offset))

    def _recreate_missing_topics(self) -> None:
        """A topic we write to was deleted while we ran: create it again, as at start."""
        if self._admin is None:
            return
        try:
            self._ensure_topics(self._admin)
        except (NewsdedupError, KafkaException) as e:
            log_event(log, logging.WARNING, "cannot create the missing topic yet", error=str(e))

    def _record(self, decided: DecidedBatch, polled_at: float, durable: float) -> None:
        m = self.metrics
        for stage, seconds in decided.stage_seconds.items():
            m.stage_seconds.labels(stage).observe(seconds)
        m.batch_size.observe(len(decided.outcomes))
        latest_event = None
        for outcome in decided.outcomes:
            m.process_seconds.observe(durable - polled_at)
            if isinstance(outcome, Decision):
                m.articles.labels(outcome.decision.value).inc()
                if outcome.decision is not DecisionKind.UNIQUE:
                    m.match_distance.observe(outcome.distance or 0)
                if outcome.late:
                    m.late_articles.inc()
                latest_event = max(latest_event or 0, outcome.event_time_ms)
            else:
                m.invalid.labels(str(outcome.invalid.reason)).inc()
                log_event(
                    log,
                    logging.WARNING,
                    "message sent to the dead-letter topic",
                    reason=str(outcome.invalid.reason),
                    detail=outcome.invalid.detail,
                    topic=outcome.message.source.topic,
                    partition=outcome.message.source.partition,
                    offset=outcome.message.source.offset,
                )
        if latest_event is not None:
            m.event_lag_seconds.set(max(0.0, (wall_clock_ms() - latest_event) / 1000))
        self._decided_since_log += len(decided.outcomes)
        self._busy_since_log += durable - polled_at

    # -- housekeeping ------------------------------------------------------------------------

    def _housekeeping(self, store: IndexStore) -> None:
        now = time.monotonic()
        if store.expiry_due():
            dropped = store.expire()
            if dropped:
                self.metrics.segments_expired.inc(len(dropped))
                log_event(log, logging.INFO, "segments expired", segments=dropped)
        if now - self._last_stats >= _STATS_REFRESH_S:
            self._refresh_index_stats(store)
        if now - self._last_memory_release >= _RELEASE_MEMORY_S:
            self._last_memory_release = now
            release_free_memory()
        self._log_throughput(now)

    def _log_throughput(self, now: float) -> None:
        if now - self._last_throughput_log < _THROUGHPUT_LOG_S:
            return
        # The rate of the work itself: over the whole interval, a quiet feed read as a slow one.
        busy = self._busy_since_log
        log_event(
            log,
            logging.INFO,
            "throughput",
            messages=self._decided_since_log,
            busy_s=round(busy, 1),
            interval_s=round(now - self._last_throughput_log, 1),
            per_second=round(self._decided_since_log / busy, 1) if busy > 0 else 0.0,
        )
        self._decided_since_log = 0
        self._busy_since_log = 0.0
        self._last_throughput_log = now

    def _refresh_index_stats(self, store: IndexStore) -> None:
        self._last_stats = time.monotonic()
        stats = store.stats()
        self.metrics.index_articles.set(stats.articles)
        self.metrics.index_segments.set(len(stats.segments))
        self.metrics.index_disk_bytes.set(stats.disk_bytes)
        for part, size in store.memory_usage().items():
            self.metrics.index_memory_bytes.labels(part).set(size)

    # -- librdkafka callbacks (called from inside consume) -----------------------------------

    def _on_assign(self, consumer: Consumer, partitions: list[TopicPartition]) -> None:
        start = None if self._index is None else self._index.watermark_ms()
        self._order.assign([p.partition for p in partitions], start_ms=start)
        self._lag_at_assign = self._lag_of(consumer, partitions)
        self.health.assigned = len(partitions)
        self.metrics.assigned_partitions.set(len(partitions))
        log_event(
            log,
            logging.INFO,
            "partitions assigned",
            partitions=sorted(p.partition for p in partitions),
        )
        if 0 < len(partitions) < self._input_partitions:
            log_event(
                log,
                logging.WARNING,
                "this instance sees only part of the input partitions: duplicates across "
                "instances will be missed; run one instance per feed until scale-out lands",
                assigned=len(partitions),
                total=self._input_partitions,
            )

    def _on_revoke(self, consumer: Consumer, partitions: list[TopicPartition]) -> None:
        # Nothing is in flight here: every batch was completed before this poll.
        self._release(partitions, logging.INFO, "partitions revoked")

    def _on_lost(self, consumer: Consumer, partitions: list[TopicPartition]) -> None:
        self._release(partitions, logging.WARNING, "partitions lost (session timed out)")

    def _release(self, partitions: list[TopicPartition], level: int, event: str) -> None:
        # What was queued for these partitions is read again by their next owner.
        self._order.revoke(p.partition for p in partitions)
        self._paused.difference_update(p.partition for p in partitions)
        self.health.assigned = 0
        self.metrics.assigned_partitions.set(0)
        # Eager assignment gives up everything; another instance now reports these partitions.
        self.metrics.consumer_lag.clear()
        log_event(log, level, event, partitions=sorted(p.partition for p in partitions))

    def _on_error(self, error: KafkaError) -> None:
        if error.fatal() or error.code() in _FATAL_CODES:
            self._fatal = error.str()
        else:
            self._log_transient(error)

    def _on_producer_error(self, error: KafkaError) -> None:
        # A producer that failed fatally is replaced by the checkpoint; only refusals
        # (credentials, authorization) stop the service.
        if error.code() in _FATAL_CODES:
            self._fatal = error.str()
        else:
            self._log_transient(error)

    def _log_transient(self, error: KafkaError) -> None:
        if error.code() == KafkaError._ALL_BROKERS_DOWN:
            self.health.broker_reachable = False
        # librdkafka reports every failed reconnect; one line per kind every 10 s is enough.
        now = time.monotonic()
        if now - self._last_error_log.get(error.code(), -1e9) >= _ERROR_LOG_EVERY_S:
            self._last_error_log[error.code()] = now
            log_event(log, logging.WARNING, "kafka error", error=error.str())

    def _on_stats(self, stats_json: str) -> None:
        stats = json.loads(stats_json)
        brokers = stats.get("brokers", {}).values()
        self.health.broker_reachable = any(b.get("state") == "UP" for b in brokers)
        for topic, t in stats.get("topics", {}).items():
            for pid, p in t.get("partitions", {}).items():
                lag = p.get("consumer_lag", -1)
                # Only partitions being fetched: stats keep stale figures for revoked ones.
                if pid != "-1" and lag >= 0 and p.get("fetch_state") == "active":
                    self.metrics.consumer_lag.labels(topic, pid).set(lag)

    def _raise_if_fatal(self) -> None:
        if self._fatal:
            raise KafkaFatalError(f"Kafka refused the service: {self._fatal}")


def _next_offsets(messages: Sequence[Message]) -> list[TopicPartition]:
    last: dict[tuple[str, int], int] = {}
    for m in messages:
        last[(m.source.topic, m.source.partition)] = m.source.offset
    return [TopicPartition(t, p, o + 1) for (t, p), o in last.items()]
