"""What a role is to the Kafka loop: `--role all`, `fingerprint` and `decide` each implement one
`Stage`; the loop, the commit protocol, retries, stops and librdkafka's callbacks are the
Service's own (service.py), written once.

The loop hands a stage what it polled (`take`), asks it what to make durable next
(`next_work`: the messages, how to decide them into `Outputs`, the offsets to commit after
them), tells it when that is durable (`durable`) or failed and must be read again (`rewind`),
and lets it follow its partitions (`assigned`, `released`) and tidy up between polls
(`housekeeping`). What a stage needs of the service comes in a `Runtime`, which also retries
what waits on the broker (`Runtime.retry`).
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable, Iterable, Iterator, Sequence
from contextlib import AbstractContextManager, contextmanager
from dataclasses import dataclass
from typing import Any, Protocol, TypeVar

from confluent_kafka import Consumer, KafkaException, TopicPartition
from confluent_kafka.admin import AdminClient

from consumer.config import Config
from consumer.ops.health import HealthState
from consumer.ops.logs import log_event
from consumer.ops.metrics import Metrics
from consumer.records import Decision, DecisionKind, Message
from consumer.stream.eventtime import wall_clock_ms
from consumer.stream.outputs import Delivered, Outputs
from consumer.stream.workers import Analyzer

T = TypeVar("T")

# The longest wait between two attempts at something the broker keeps refusing.
MAX_BACKOFF_S = 30.0


@dataclass(frozen=True, slots=True)
class Work:
    """One batch to make durable."""

    messages: Sequence[Message]  # what it decides (a rewind reads them again)
    decide: Callable[[], tuple[Any, Outputs]]  # what was decided, and what to publish
    offsets: Sequence[TopicPartition]  # to commit once its outputs are durable


class RetryLater(Exception):
    """Raised by an attempt of `Runtime.retry` that failed without a KafkaException: it is
    tried again, and its log line says what it waits for."""

    def __init__(self, event: str, **fields: object) -> None:
        super().__init__(event)
        self.event = event
        self.fields = fields


class Backoff:
    """Waits between the attempts at something that keeps failing: `first_s`, then each
    twice the last, up to `max_s`; `reset` after a success."""

    def __init__(self, first_s: float, max_s: float = MAX_BACKOFF_S) -> None:
        self.first_s = first_s
        self.max_s = max_s
        self.delay = first_s  # the next wait

    def wait(self, stop: threading.Event) -> bool:
        """Wait the next delay, or less if `stop` is set meanwhile (then True)."""
        stopped = stop.wait(self.delay)
        self.delay = min(self.delay * 2, self.max_s)
        return stopped

    def reset(self) -> None:
        self.delay = self.first_s


@dataclass(slots=True)
class Runtime:
    """What the service lends its stage."""

    config: Config  # the role's own view of the configuration
    full_config: Config  # as loaded (the scale-out roles read the other role's settings)
    metrics: Metrics
    health: HealthState
    stop: threading.Event
    check_fatal: Callable[[], None]  # raises once the broker refused us for good
    admin: AdminClient | None = None  # once the service is connected
    analyzer: Analyzer | None = None  # the worker pool, which a stop that gives up must end

    def retry(
        self,
        attempt: Callable[[], T],
        logger: logging.Logger,
        failure: str,
        *,
        max_delay_s: float = MAX_BACKOFF_S,
        **fields: object,
    ) -> T | None:
        """What `attempt` returns, trying again while it fails: 1 s after the first failure,
        the wait doubling up to `max_delay_s`. A KafkaException is a failure, logged as one
        `failure` line with `fields` and its error, unless the broker refused us for good
        (`check_fatal` raises); an attempt that raises `RetryLater` names its failure itself.
        None once a stop is asked for, which also cuts a wait short."""
        backoff = Backoff(1.0, max_delay_s)
        while not self.stop.is_set():
            try:
                return attempt()
            except KafkaException as e:
                self.check_fatal()
                event, details = failure, {**fields, "error": e.args[0].str()}
            except RetryLater as later:
                event, details = later.event, later.fields
            log_event(logger, logging.WARNING, event, **details, retry_in_s=backoff.delay)
            backoff.wait(self.stop)
        return None


class Stage(Protocol):
    def resources(self) -> AbstractContextManager[object]:
        """What the stage holds while the service runs (worker pool, index)."""
        ...

    def ensure_topics(self, admin: AdminClient, input_partitions: int) -> None:
        """Create the topics it writes to when they are missing."""
        ...

    def consumer_settings(self) -> dict[str, object]:
        """Settings its consumer needs beyond the configured ones."""
        ...

    def prepare(self) -> None:
        """Work before the consumer subscribes (the producer has fenced any predecessor)."""
        ...

    def assigned(self, consumer: Consumer, partitions: list[TopicPartition]) -> None: ...

    def released(self, partitions: list[TopicPartition]) -> None: ...

    def take(self, consumer: Consumer, messages: list[Message], at_end: set[int]) -> None:
        """What one poll returned (`at_end`: partitions the broker said it reached the end
        of, after their last message here)."""
        ...

    def next_work(self, limit: int) -> Work | None:
        """The next batch to make durable (at most `limit` messages), or None for now."""
        ...

    def durable(self, work: Work, decided: Any, delivered: Delivered) -> None:
        """`work`'s outputs and offsets are durable."""
        ...

    def rewind(self, consumer: Consumer, work: Work) -> None:
        """`work`'s outputs failed: read it (and whatever was queued behind it) again."""
        ...

    def housekeeping(self) -> None: ...


@contextmanager
def serving(runtime: Runtime, analyzer: Analyzer | None) -> Iterator[None]:
    """While the block runs the stage is ready as far as it goes (its index open, or none
    needed), and its worker pool is known to the service, which must end it should a stop
    give up."""
    runtime.analyzer = analyzer
    runtime.health.index_open = True
    try:
        yield
    finally:
        runtime.health.index_open = False
        runtime.analyzer = None


def next_offsets(messages: Iterable[Message]) -> list[TopicPartition]:
    """Past each partition's last message: what a batch read in offset order commits."""
    last: dict[tuple[str, int], int] = {}
    for m in messages:
        last[(m.source.topic, m.source.partition)] = m.source.offset
    return [TopicPartition(t, p, o + 1) for (t, p), o in last.items()]


def count_decisions(metrics: Metrics, decisions: Iterable[Decision]) -> None:
    """The decision metrics of the roles that decide."""
    latest_event = None
    for d in decisions:
        metrics.articles.labels(d.decision.value).inc()
        if d.decision is not DecisionKind.UNIQUE:
            metrics.match_distance.observe(d.distance or 0)
        if d.late:
            metrics.late_articles.inc()
        latest_event = max(latest_event or 0, d.event_time_ms)
    if latest_event is not None:
        metrics.event_lag_seconds.set(max(0.0, (wall_clock_ms() - latest_event) / 1000))
