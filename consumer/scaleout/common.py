"""What the two split roles share: their derived Kafka settings, their topics, their start-up.

A role is the single-process Service with another input or output: the fingerprint role
reads the feed and writes the internal topic, the decide role reads the internal topic and
writes decisions. Each has a consumer group of its own, so the group spreads the feed's
partitions over fingerprint instances and the internal partitions over decide instances.
"""

from __future__ import annotations

import dataclasses
import logging
import socket
import time
from contextlib import AbstractContextManager
from functools import partial

from confluent_kafka import Consumer, KafkaError, KafkaException, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

from consumer.config import Config, parse_duration_ms
from consumer.ops.health import HealthServer
from consumer.ops.logs import log_event
from consumer.ops.metrics import Metrics
from consumer.stream.checkpoint import Checkpoint
from consumer.stream.clients import (
    TopicError,
    admin_config,
    consumer_config,
    producer_config,
    topic_partitions,
)
from consumer.stream.service import _MAX_BACKOFF_S, Service

log = logging.getLogger("newsdedup.roles")

ROLES = ("all", "fingerprint", "decide")
# The changelog keeps whole days beyond the window: a restore must find every record that can
# still be searched, and deletion by time is per log segment, so it lags retention.ms anyway.
_CHANGELOG_EXTRA_RETENTION_MS = 86_400_000
_DECIDE_MAX_POLL_INTERVAL_MS = "86400000"  # librdkafka's largest value: 24 h


def role_config(config: Config, role: str) -> Config:
    """The [kafka] settings a role's own Service sees: its group, its input or output topic and
    a transactional.id of its own (two instances sharing one would fence each other)."""
    kafka, so = config.kafka, config.scaleout
    instance = so.instance_id or socket.gethostname()
    base = kafka.transactional_id or kafka.group_id
    changes: dict[str, object] = {
        "group_id": f"{kafka.group_id}-{role}",
        "transactional_id": f"{base}-{role}-{instance}",
    }
    client = dict(kafka.client)
    if role == "fingerprint":
        changes["output_topic"] = so.internal_topic
    else:
        changes["input_topic"] = so.internal_topic
        # A restore runs inside the assignment callback, where librdkafka counts the time
        # since the last poll: a long one would otherwise be taken for a hung member and
        # trigger a rebalance, which restarts the restore. Hangs are caught by /healthz.
        client.setdefault("max.poll.interval.ms", _DECIDE_MAX_POLL_INTERVAL_MS)
    return dataclasses.replace(config, kafka=dataclasses.replace(kafka, client=client, **changes))


def ensure_scaleout_topics(admin: AdminClient, config: Config) -> int:
    """Create the internal and changelog topics when missing; returns their partition count,
    which must be the same for both (a domain's changelog partition is its internal one)."""
    so, kafka = config.scaleout, config.kafka
    retention = parse_duration_ms(config.index.retention) + _CHANGELOG_EXTRA_RETENTION_MS
    wanted = {
        so.internal_topic: {},
        so.changelog_topic: {
            "cleanup.policy": "compact,delete",
            "retention.ms": str(retention),
        },
    }
    missing = [t for t in wanted if topic_partitions(admin, t) is None]
    if missing:
        futures = admin.create_topics(
            [
                NewTopic(t, so.partitions, kafka.create_replication_factor, config=wanted[t])
                for t in missing
            ],
            request_timeout=15.0,
        )
        for topic, future in futures.items():
            try:
                future.result()
                log_event(log, logging.INFO, "topic created", topic=topic, partitions=so.partitions)
            except KafkaException as e:
                if e.args[0].code() != KafkaError.TOPIC_ALREADY_EXISTS:
                    raise TopicError(f"cannot create topic {topic!r}: {e.args[0].str()}") from None
    counts = {t: _settled_partitions(admin, t) for t in wanted}
    if len(set(counts.values())) != 1:
        raise TopicError(
            f"the internal and changelog topics must have the same partitions, found {counts}: "
            "a domain's changelog partition is its internal partition"
        )
    return counts[so.internal_topic]


def _settled_partitions(admin: AdminClient, topic: str, timeout: float = 30.0) -> int:
    """The partition count of a topic that exists. Just after a creation (this instance's or
    another's racing it) the broker may answer "unknown" or "no partitions" for a while; a
    count of 0 taken then would send every record to partition `crc % 0`."""
    deadline = time.monotonic() + timeout
    delay = 0.05
    while True:
        try:
            count = topic_partitions(admin, topic)
        except KafkaException as e:
            # LEADER_NOT_AVAILABLE and the like: the partitions are still being placed.
            if time.monotonic() >= deadline:
                raise TopicError(f"topic {topic!r} has no usable metadata: {e}") from None
            count = None
        if count:
            return count
        if time.monotonic() >= deadline:
            raise TopicError(f"topic {topic!r} reports no partitions after {timeout:.0f} s")
        time.sleep(delay)
        delay = min(delay * 2, 1.0)


class RoleService(Service):
    """A Service whose resources and topics are a role's; the loop, the batch protocol,
    retries and callbacks are the Service's own."""

    role = ""

    def __init__(self, config: Config, metrics: Metrics | None = None) -> None:
        super().__init__(role_config(config, self.role), metrics)
        self.full_config = config
        self.scaleout_partitions = 0

    def resources(self) -> AbstractContextManager:
        raise NotImplementedError

    def make_stage(self) -> object:
        """The object the loop calls `decide(messages)` on."""
        raise NotImplementedError

    def make_checkpoint(self, consumer: Consumer) -> Checkpoint:
        raise NotImplementedError

    def run(self) -> int:
        self.http = HealthServer(self.config.metrics.listen, self.health, self.metrics).start()
        kafka = self.config.kafka
        log_event(
            log,
            logging.INFO,
            "starting",
            role=self.role,
            delivery=kafka.delivery,
            input=kafka.input_topic,
            output=kafka.output_topic,
            group=kafka.group_id,
            instance=self.group_instance_id,
            listen=self.config.metrics.listen,
        )
        try:
            with self.resources():
                self._serve_role()
        except Exception as e:
            log_event(log, logging.ERROR, "stopping on error", error=f"{type(e).__name__}: {e}")
            raise
        finally:
            self.http.stop()
        log_event(log, logging.INFO, "stopped", role=self.role)
        return 0

    def _serve_role(self) -> None:
        kafka = self.config.kafka
        self._admin = admin = AdminClient({**admin_config(kafka), "error_cb": self._on_error})
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
                "error_cb": self._on_error,
                "stats_cb": self._on_stats,
            }
        )
        checkpoint = None
        try:
            checkpoint = self.make_checkpoint(consumer)
            checkpoint.stopping = self._stop.is_set
            checkpoint.limit_dead_letters(self._dlq_max_bytes)
            consumer.subscribe(
                [kafka.input_topic],
                on_assign=self._on_assign,
                on_revoke=self._on_revoke,
                on_lost=self._on_lost,
            )
            self._loop(consumer, self.make_stage(), checkpoint, None)
        finally:
            self.health.assigned = 0
            consumer.close()
            if checkpoint is not None:
                checkpoint.close()

    def _loop(self, consumer: Consumer, stage, checkpoint: Checkpoint, store: None) -> None:  # type: ignore[override]
        """Poll a batch, hand it to the role's stage, make it durable, repeat (in the order
        the broker returns records)."""
        max_messages = self.config.kafka.batch_max_messages
        wait_s = parse_duration_ms(self.config.kafka.batch_max_wait) / 1000
        backoff = 0.0
        while not self._stop.is_set():
            self.health.turn()
            self._raise_if_fatal()
            records = consumer.consume(max_messages, wait_s)
            polled_at = time.perf_counter()
            messages, _ = self._valid_records(records)
            if messages:
                self.health.broker_reachable = True
                decide = partial(stage.decide, messages)
                if self._process(messages, decide, consumer, checkpoint, polled_at):
                    backoff = 0.0
                else:
                    backoff = min(max(backoff * 2, 0.5), _MAX_BACKOFF_S)
                    self._stop.wait(backoff)
            self._housekeeping(None)  # type: ignore[arg-type]

    def _ensure_topics(self, admin: AdminClient) -> None:
        self.scaleout_partitions = ensure_scaleout_topics(admin, self.full_config)
        super()._ensure_topics(admin)

    def make_producer(self) -> Producer:
        return Producer({**producer_config(self.config.kafka), "error_cb": self._on_producer_error})

    def _on_assign(self, consumer: Consumer, partitions: list[TopicPartition]) -> None:
        # Unlike `all`, a role instance owning part of the partitions is the point.
        self.health.assigned = len(partitions)
        self.metrics.assigned_partitions.set(len(partitions))
        log_event(
            log,
            logging.INFO,
            "partitions assigned",
            role=self.role,
            partitions=sorted(p.partition for p in partitions),
        )
