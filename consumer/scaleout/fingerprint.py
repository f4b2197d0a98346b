"""`newsdedup run --role fingerprint`: feed → parse, validate, fingerprint → internal topic.

Stateless: any number of instances share the feed's partitions through their consumer group.
Each valid article goes to the internal partition of its dedup domain, so one decide instance
sees every article of a domain whichever feed partition it came from; bad input goes to the
dead-letter topic exactly as in the single-process service.
"""

from __future__ import annotations

import json
import logging
import time
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field

from confluent_kafka import Consumer

from consumer.config import Config
from consumer.deciding.article import Analyzed
from consumer.ops.logs import log_event
from consumer.ops.metrics import Metrics
from consumer.scaleout.common import RoleService
from consumer.scaleout.domains import domain_dir_name
from consumer.scaleout.wire import domain_partition, encode_fingerprinted
from consumer.stream.checkpoint import Checkpoint
from consumer.stream.parsing import Invalid, InvalidReason
from consumer.stream.pipeline import Message, Rejection
from consumer.stream.workers import Analyzer

log = logging.getLogger("newsdedup.roles.fingerprint")


@dataclass(frozen=True, slots=True)
class Forward:
    """A valid article on its way to its domain's internal partition."""

    message: Message
    item: Analyzed
    domain: str


class _NoIndex:
    """This role writes no index: step 1 of the checkpoint protocol is empty."""

    def commit(self) -> None:
        pass


@dataclass(slots=True)
class FingerprintedBatch:
    outcomes: list[Forward | Rejection]
    index_batch: _NoIndex = field(default_factory=_NoIndex)
    stage_seconds: dict[str, float] = field(default_factory=dict)


class FingerprintStage:
    def __init__(self, analyzer: Analyzer, domain_field: str) -> None:
        self.analyzer = analyzer
        self.domain_field = domain_field

    def decide(self, messages: Sequence[Message]) -> FingerprintedBatch:
        t0 = time.perf_counter()
        analyzed = self.analyzer.analyze([(m.value, m.timestamp_ms) for m in messages])
        outcomes: list[Forward | Rejection] = []
        for message, result in zip(messages, analyzed, strict=True):
            if isinstance(result, Analyzed):
                domain = self.domain_of(message)
                if isinstance(domain, Invalid):
                    outcomes.append(Rejection(message, domain))
                else:
                    outcomes.append(Forward(message, result, domain))
            else:
                outcomes.append(Rejection(message, result))
        return FingerprintedBatch(outcomes, stage_seconds={"fingerprint": time.perf_counter() - t0})

    def domain_of(self, message: Message) -> str | Invalid:
        """The article's domain field as text; "" (the default domain) when absent; Invalid
        when it cannot name a domain. The value parsed, so a valid article, is JSON: this
        second parse costs little beside segmenting."""
        if not self.domain_field or message.value is None:
            return ""
        value = json.loads(message.value).get(self.domain_field)
        domain = "" if value is None else str(value)
        try:
            domain_dir_name(domain)
        except ValueError as e:
            return Invalid(InvalidReason.BAD_FIELD_TYPE, f"field {self.domain_field!r} {e}")
        return domain


class ForwardCheckpoint(Checkpoint):
    """The service's commit protocol with this role's outputs: internal records and DLQ."""

    def __init__(self, *args: object, internal_topic: str, partitions: int) -> None:
        self.internal_topic = internal_topic
        self.partitions = partitions
        super().__init__(*args)

    def _produce(self, decided: FingerprintedBatch) -> None:  # type: ignore[override]
        for outcome in decided.outcomes:
            if isinstance(outcome, Forward):
                self._send(
                    self.internal_topic,
                    outcome.domain.encode("utf-8"),
                    encode_fingerprinted(outcome.item, outcome.message.source),
                    partition=domain_partition(outcome.domain, self.partitions),
                    # The feed record's own timestamp: the decide role orders articles of
                    # equal event time by it, as `--role all` does.
                    timestamp_ms=outcome.message.timestamp_ms,
                )
            else:
                self._send_dead_letter(outcome)


class FingerprintService(RoleService):
    role = "fingerprint"

    def __init__(self, config: Config, metrics: Metrics | None = None) -> None:
        super().__init__(config, metrics)
        self._analyzer: Analyzer | None = None

    @contextmanager
    def resources(self) -> Iterator[None]:
        config = self.config
        with Analyzer(config.input, config.fingerprint, config.service.workers) as analyzer:
            self._analyzer = analyzer
            # No index in this role: readiness waits only for the broker and an assignment.
            self.health.index_open = True
            try:
                yield
            finally:
                self.health.index_open = False
                self._analyzer = None

    def make_stage(self) -> FingerprintStage:
        assert self._analyzer is not None
        return FingerprintStage(self._analyzer, self.full_config.scaleout.domain_field)

    def make_checkpoint(self, consumer: Consumer) -> Checkpoint:
        return ForwardCheckpoint(
            consumer,
            self.make_producer,
            self.config.kafka,
            internal_topic=self.full_config.scaleout.internal_topic,
            partitions=self.scaleout_partitions,
        )

    def _record(self, decided: FingerprintedBatch, polled_at: float, durable: float) -> None:  # type: ignore[override]
        m = self.metrics
        for stage, seconds in decided.stage_seconds.items():
            m.stage_seconds.labels(stage).observe(seconds)
        m.batch_size.observe(len(decided.outcomes))
        for outcome in decided.outcomes:
            m.process_seconds.observe(durable - polled_at)
            if isinstance(outcome, Forward):
                m.fingerprinted.inc()
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
        self._decided_since_log += len(decided.outcomes)
        self._busy_since_log += durable - polled_at

    def _housekeeping(self, store: object) -> None:
        now = time.monotonic()
        self._log_throughput(now)
