"""`newsdedup run`: the Kafka loop, the same for every role. Poll, hand the records to the
role's stage, make what it releases durable, repeat.

Each batch is finished (index, outputs, offsets: see checkpoint.py) before the next poll, so
a rebalance or a shutdown never finds work in flight. What differs between `--role all`,
`fingerprint` and `decide` is their `Stage` (stage.py; the roles are in consumer/roles/);
everything here is written once.
"""

from __future__ import annotations

import json
import logging
import os
import threading
import time
from collections.abc import Callable, Sequence
from typing import Any, cast

from confluent_kafka import (
    TIMESTAMP_NOT_AVAILABLE,
    Consumer,
    KafkaError,
    KafkaException,
    Producer,
    TopicPartition,
)
from confluent_kafka import Message as KafkaMessage
from confluent_kafka.admin import AdminClient

from consumer.config import Config
from consumer.errors import NewsdedupError
from consumer.ops.health import HealthServer, HealthState
from consumer.ops.logs import log_event
from consumer.ops.metrics import Metrics
from consumer.records import Message, Source
from consumer.stream.batch_report import BatchReport
from consumer.stream.broker_errors import BrokerErrors, KafkaFatalError
from consumer.stream.checkpoint import Checkpoint, OutputFailed
from consumer.stream.clients import (
    admin_config,
    consumer_config,
    group_instance_id,
    producer_config,
    topic_max_message_bytes,
    topic_partitions,
)
from consumer.stream.eventtime import wall_clock_ms
from consumer.stream.input_gaps import InputGaps
from consumer.stream.stage import Backoff, RetryLater, Runtime, Stage, Work

log = logging.getLogger("newsdedup.service")

# A stop that could not finish in [service] stop_timeout (the broker is gone mid-batch).
EXIT_STOP_TIMEOUT = 3


class Service:
    """One `newsdedup run` process: its role is the `stage`. The roles (consumer/roles/) each
    build theirs with a factory, e.g. `all_service(config)`."""

    def __init__(
        self,
        config: Config,
        metrics: Metrics | None = None,
        *,
        stage: Callable[[Runtime], Stage],
        role: str,
        full_config: Config | None = None,
    ) -> None:
        self.config = config  # the role's own view (scaleout/common.py role_config)
        self.role = role
        self.metrics = metrics or Metrics()
        self.health = HealthState(stuck_after_s=config.service.stuck_after.seconds)
        self._stop = threading.Event()
        self._errors = BrokerErrors(self.health, log)
        self._input_partitions = 0
        # The input partitions there were at the start, and those assigned since: any other
        # assigned was added to the topic while the service ran.
        self._known_input_partitions: set[int] = set()
        self._input_gaps = InputGaps(self.metrics, config.kafka.auto_offset_reset, log)
        self._dlq_max_bytes: int | None = None
        self._report = BatchReport(self.metrics, log)
        self.http: HealthServer | None = None
        self._admin: AdminClient | None = None
        self.group_instance_id = group_instance_id(
            config.scaleout.instance_id, config.metrics.listen
        )
        self.runtime = Runtime(
            config,
            full_config or config,
            self.metrics,
            self.health,
            self._stop,
            self._errors.raise_if_fatal,
        )
        self.stage = stage(self.runtime)

    def request_stop(self) -> None:
        """Finish the batch in hand, commit, close. Should the broker keep that from ending
        within [service] stop_timeout, exit anyway: the index is written before anything is
        published and offsets are committed last, so the unfinished batch is simply read again
        at the next start (exactly_once: its open transaction is aborted by then)."""
        if self._stop.is_set():
            return
        self._stop.set()
        timeout_s = self.config.service.stop_timeout.seconds
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
        if self.runtime.analyzer is not None:
            self.runtime.analyzer.kill()
        os._exit(EXIT_STOP_TIMEOUT)

    def run(self) -> int:
        self.http = HealthServer(self.config.metrics.listen, self.health, self.metrics).start()
        kafka = self.config.kafka
        log_event(
            log,
            logging.INFO,
            "starting",
            role=self.role,
            listen=self.config.metrics.listen,
            instance=self.group_instance_id,
            delivery=kafka.delivery,
            input=kafka.input_topic,
            output=kafka.output_topic,
            group=kafka.group_id,
            index=self.config.index.path,
        )
        try:
            with self.stage.resources():
                self._serve()
        except Exception as e:
            # One structured line for log pipelines; the CLI still tells the user.
            log_event(log, logging.ERROR, "stopping on error", error=f"{type(e).__name__}: {e}")
            raise
        finally:
            self.http.stop()
        log_event(log, logging.INFO, "stopped", role=self.role)
        return 0

    # -- startup ---------------------------------------------------------------------------

    def _serve(self) -> None:
        settings: dict[str, Any] = {
            **admin_config(self.config.kafka),
            "error_cb": self._errors.on_error,
        }
        self._admin = AdminClient(settings)
        self.runtime.admin = self._admin
        try:
            self._serve_with(self._admin)
            return
        except KafkaFatalError as error:
            refusal = str(error)
        # A refused client keeps reconnecting, each attempt one more failed login in the
        # broker's log, until librdkafka destroys it with its last reference; the shutdown
        # ahead (the workers, the index) takes a while. The error raised here holds no frame
        # below this one: the caught one did, and frames keep the functions they ran, with the
        # client in their closures, even once cleared. So it is dropped, and the client with it.
        self._admin = self.runtime.admin = None
        raise KafkaFatalError(refusal) from None

    def _serve_with(self, admin: AdminClient) -> None:
        kafka = self.config.kafka
        partitions = self._wait_for_input_topic(admin)
        if partitions is None:
            return
        self._note_input_partitions(partitions)
        self._ensure_topics(admin)
        consumer = Consumer(
            {
                # Static membership; [kafka.client] may still set its own.
                "group.instance.id": self.group_instance_id,
                **consumer_config(kafka),
                **self.stage.consumer_settings(),
                "error_cb": self._errors.on_error,
                "stats_cb": self._on_stats,
            }
        )
        checkpoint = None
        try:
            checkpoint = Checkpoint(consumer, self._make_producer, kafka)
            checkpoint.stopping = self._stop.is_set
            checkpoint.dead_letter_limit.limit_to_topic(self._dlq_max_bytes)
            # After the checkpoint's producer has started: under exactly_once it fences a
            # killed predecessor and aborts its open transaction, whose pending offsets would
            # otherwise hold up reading the committed ones until that transaction times out.
            self.stage.prepare()
            if self._stop.is_set():
                return
            consumer.subscribe(
                [kafka.input_topic],
                on_assign=self._on_assign,
                on_revoke=self._on_revoke,
                on_lost=self._on_lost,
            )
            self._loop(consumer, checkpoint)
            self._leave_group(consumer)
        finally:
            self.health.assigned = 0
            consumer.close()
            if checkpoint is not None:
                checkpoint.close()

    def _leave_group(self, consumer: Consumer) -> None:
        """After a clean stop, leave the consumer group at once. As a static member
        (group.instance.id) the instance would otherwise stay in it, partitions and all, until
        session.timeout.ms: right after a crash, whose restart takes the place back without a
        rebalance, but after a stop the group refuses offset resets meanwhile. librdkafka sends
        a static member's LeaveGroup when it unsubscribes, never when it closes; the revoke
        that follows is served by a poll (any record it returns is read again later)."""
        if not self.config.kafka.leave_group_on_stop:
            return
        consumer.unsubscribe()
        deadline = time.monotonic() + 5.0
        while consumer.assignment() and time.monotonic() < deadline:
            consumer.poll(0.1)
        log_event(log, logging.INFO, "left the consumer group", group=self.config.kafka.group_id)

    def _make_producer(self) -> Producer:
        return Producer(
            {**producer_config(self.config.kafka), "error_cb": self._errors.on_producer_error}
        )

    def _wait_for_input_topic(self, admin: AdminClient) -> int | None:
        """Partition count of the input topic, waiting with backoff while the broker is down or
        the topic does not exist yet; None when asked to stop meanwhile."""
        topic = self.config.kafka.input_topic

        def partitions() -> int:
            self._errors.raise_if_fatal()
            self.health.turn()
            try:
                count = topic_partitions(
                    admin, topic, timeout=5.0, check=self._errors.raise_if_fatal
                )
            except KafkaException:
                self.health.broker_reachable = False
                raise
            self.health.broker_reachable = True
            if not count:
                self.health.waiting_for = f"the input topic {topic!r}"
                raise RetryLater("input topic does not exist yet; waiting", topic=topic)
            self.health.waiting_for = "a partition assignment"
            return count

        return self.runtime.retry(
            partitions,
            log,
            "broker not reachable; waiting",
            bootstrap=self.config.kafka.bootstrap_servers,
        )

    def _ensure_topics(self, admin: AdminClient) -> None:
        """Create the topics this service writes to when they are missing, and learn how large
        a dead letter the DLQ topic takes."""
        self.stage.ensure_topics(admin, self._input_partitions)
        self._dlq_max_bytes = topic_max_message_bytes(admin, self.config.kafka.dlq_topic)

    # -- the loop ----------------------------------------------------------------------------

    def _loop(self, consumer: Consumer, checkpoint: Checkpoint) -> None:
        """Poll and hand the records to the stage; make durable what it releases; repeat."""
        max_messages = self.config.kafka.batch_max_messages
        wait_s = self.config.kafka.batch_max_wait.seconds
        # After a batch whose outputs failed: wait before it is tried again.
        backoff = Backoff(0.5)
        while not self._stop.is_set():
            self.health.turn()
            self._errors.raise_if_fatal()
            records = consumer.consume(max_messages, wait_s)
            polled_at = time.perf_counter()
            messages, at_end = self._valid_records(consumer, records)
            if messages:
                self.health.broker_reachable = True
            self.stage.take(consumer, messages, at_end)
            while not self._stop.is_set():
                work = self.stage.next_work(max_messages)
                if work is None:
                    break
                if self._process(work, consumer, checkpoint, polled_at):
                    backoff.reset()
                else:
                    backoff.wait(self._stop)
                    break
            self.stage.housekeeping()
            self._report.log_throughput(time.monotonic())

    def _valid_records(
        self, consumer: Consumer, records: Sequence[KafkaMessage]
    ) -> tuple[list[Message], set[int]]:
        """The messages polled, and the partitions whose last word was that they reached
        their end."""
        messages = []
        at_end: set[int] = set()
        for record in records:
            error = record.error()
            topic, partition, offset = record.topic(), record.partition(), record.offset()
            if error is not None:
                if error.code() == KafkaError._PARTITION_EOF and partition is not None:
                    at_end.add(partition)
                else:
                    self._errors.on_consumed_error(error)
                continue
            if topic is None or partition is None or offset is None:
                continue  # only events lack them, and events carry an error
            at_end.discard(partition)
            self._input_gaps.polled(consumer, topic, partition, offset)
            ts_type, ts = record.timestamp()
            # A consumed record's headers are (name, bytes or None) pairs.
            headers = cast(tuple[tuple[str, bytes], ...], tuple(record.headers() or ()))
            messages.append(
                Message(
                    key=record.key(),
                    value=record.value(),
                    source=Source(topic, partition, offset),
                    timestamp_ms=wall_clock_ms() if ts_type == TIMESTAMP_NOT_AVAILABLE else ts,
                    headers=headers,
                )
            )
        return messages, at_end

    def _process(
        self, work: Work, consumer: Consumer, checkpoint: Checkpoint, polled_at: float
    ) -> bool:
        """Decide `work` and make it durable; False when its outputs failed and it will be
        read again."""
        decided, outputs = work.decide()
        try:
            delivered = checkpoint.complete(outputs, work.offsets)
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
                messages=len(work.messages),
            )
            if e.topic_missing:
                self._recreate_missing_topics()
            self.stage.rewind(consumer, work)
            return False
        self.health.output_error = None
        self._report.durable(work, outputs, polled_at, time.perf_counter())
        self.stage.durable(work, decided, delivered)
        return True

    def _recreate_missing_topics(self) -> None:
        """A topic we write to was deleted while we ran: create it again, as at start."""
        if self._admin is None:
            return
        try:
            self._ensure_topics(self._admin)
        except (NewsdedupError, KafkaException) as e:
            log_event(log, logging.WARNING, "cannot create the missing topic yet", error=str(e))

    # -- librdkafka callbacks (called from inside consume) -----------------------------------

    def _on_assign(self, consumer: Consumer, partitions: list[TopicPartition]) -> None:
        # The assignment may follow the topic's growth, which the statistics bring later. (No
        # metadata request here: list_topics inside a callback breaks confluent-kafka's state.)
        if partitions:
            self._note_input_partitions(
                max(self._input_partitions, *(p.partition + 1 for p in partitions))
            )
        self._input_gaps.assigned(consumer, partitions)
        self.stage.assigned(consumer, partitions)
        self.health.assigned = len(partitions)
        self.metrics.assigned_partitions.set(len(partitions))
        assigned = sorted(p.partition for p in partitions)
        log_event(log, logging.INFO, "partitions assigned", role=self.role, partitions=assigned)
        new = [p for p in assigned if p not in self._known_input_partitions]
        if new:
            log_event(
                log,
                logging.INFO,
                "new input partitions assigned (added to the topic since the start)",
                partitions=new,
            )
            self._known_input_partitions.update(new)

    def _note_input_partitions(self, count: int) -> None:
        """The input topic's partition count, as the broker's metadata says now."""
        if count > self._input_partitions and self._input_partitions:
            log_event(
                log,
                logging.INFO,
                "the input topic has new partitions",
                topic=self.config.kafka.input_topic,
                partitions=list(range(self._input_partitions, count)),
            )
        if not self._input_partitions:
            self._known_input_partitions = set(range(count))
        self._input_partitions = count
        self.health.input_partitions = count
        self.metrics.input_partitions.set(count)

    def _on_revoke(self, consumer: Consumer, partitions: list[TopicPartition]) -> None:
        # Nothing is in flight here: every batch was completed before this poll.
        self._release(partitions, logging.INFO, "partitions revoked")

    def _on_lost(self, consumer: Consumer, partitions: list[TopicPartition]) -> None:
        self._release(partitions, logging.WARNING, "partitions lost (session timed out)")

    def _release(self, partitions: list[TopicPartition], level: int, event: str) -> None:
        self.stage.released(partitions)
        self._input_gaps.released(partitions)
        self.health.assigned = 0
        self.metrics.assigned_partitions.set(0)
        # Eager assignment gives up everything; another instance now reports these partitions.
        self.metrics.consumer_lag.clear()
        log_event(log, level, event, partitions=sorted(p.partition for p in partitions))

    def _on_stats(self, stats_json: str) -> None:
        stats = json.loads(stats_json)
        brokers = stats.get("brokers", {}).values()
        self.health.broker_reachable = any(b.get("state") == "UP" for b in brokers)
        for topic, t in stats.get("topics", {}).items():
            if topic == self.config.kafka.input_topic:
                # Every partition the metadata names, assigned or not, and -1: unassigned.
                count = sum(1 for pid in t.get("partitions", {}) if pid != "-1")
                if count > self._input_partitions:
                    self._note_input_partitions(count)
            for pid, p in t.get("partitions", {}).items():
                lag = p.get("consumer_lag", -1)
                # Only partitions being fetched: stats keep stale figures for revoked ones.
                if pid != "-1" and lag >= 0 and p.get("fetch_state") == "active":
                    self.metrics.consumer_lag.labels(topic, pid).set(lag)
