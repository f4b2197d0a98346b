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
from functools import partial

from confluent_kafka import Consumer, TopicPartition
from confluent_kafka.admin import AdminClient

from consumer.config import Config
from consumer.ops.metrics import Metrics
from consumer.records import Analyzed, Invalid, InvalidReason, Message, Rejection
from consumer.scaleout.common import ensure_scaleout_topics, role_config
from consumer.scaleout.domains import domain_dir_name
from consumer.scaleout.wire import domain_partition, encode_fingerprinted
from consumer.stream.clients import ensure_output_topics
from consumer.stream.outputs import Delivered, NoIndexWrite, Outputs, Record
from consumer.stream.service import Service
from consumer.stream.stage import Runtime, Work, next_offsets, serving
from consumer.stream.workers import Analyzer

log = logging.getLogger("newsdedup.roles.fingerprint")


@dataclass(frozen=True, slots=True)
class Forward:
    """A valid article on its way to its domain's internal partition."""

    message: Message
    item: Analyzed
    domain: str


@dataclass(slots=True)
class FingerprintedBatch:
    outcomes: list[Forward | Rejection]
    stage_seconds: dict[str, float] = field(default_factory=dict)

    def outputs(self, internal_topic: str, partitions: int) -> Outputs:
        """Each valid article to its domain's internal partition (no index: step 1 is empty),
        every rejection to the DLQ."""
        records = [
            Record(
                internal_topic,
                f.domain.encode("utf-8"),
                encode_fingerprinted(f.item, f.message.source),
                partition=domain_partition(f.domain, partitions),
                # The feed record's own timestamp: the decide role orders articles of equal
                # event time by it, as `--role all` does.
                timestamp_ms=f.message.timestamp_ms,
            )
            for f in self.outcomes
            if isinstance(f, Forward)
        ]
        rejections = [o for o in self.outcomes if isinstance(o, Rejection)]
        return Outputs(NoIndexWrite(), records, rejections, self.stage_seconds)


class FingerprintStage:
    """`--role fingerprint` as a stage of the loop: each poll's messages make one batch, in
    the order the broker returned them; no index, so step 1 of the protocol is empty."""

    def __init__(self, runtime: Runtime) -> None:
        self.runtime = runtime
        self.config = runtime.config
        self.domain_field = runtime.full_config.scaleout.domain_field
        self.internal_topic = runtime.full_config.scaleout.internal_topic
        self.internal_partitions = 0  # learnt when the topics are ensured
        self._polled: list[Message] = []

    @contextmanager
    def resources(self) -> Iterator[None]:
        config = self.config
        # No index in this role: readiness waits only for the broker and an assignment.
        with (
            Analyzer(config.input, config.fingerprint, config.service.workers) as analyzer,
            serving(self.runtime, analyzer),
        ):
            yield

    def ensure_topics(self, admin: AdminClient, input_partitions: int) -> None:
        self.internal_partitions = ensure_scaleout_topics(admin, self.runtime.full_config)
        ensure_output_topics(admin, self.config.kafka, input_partitions)

    def consumer_settings(self) -> dict[str, object]:
        return {}

    def prepare(self) -> None:
        pass

    def assigned(self, consumer: Consumer, partitions: list[TopicPartition]) -> None:
        pass

    def released(self, partitions: list[TopicPartition]) -> None:
        pass

    def take(self, consumer: Consumer, messages: list[Message], at_end: set[int]) -> None:
        self._polled = messages

    def next_work(self, limit: int) -> Work | None:
        messages, self._polled = self._polled, []
        if not messages:
            return None
        return Work(messages, partial(self._forward, messages), next_offsets(messages))

    def _forward(self, messages: Sequence[Message]) -> tuple[FingerprintedBatch, Outputs]:
        batch = self.decide(messages)
        return batch, batch.outputs(self.internal_topic, self.internal_partitions)

    def decide(self, messages: Sequence[Message]) -> FingerprintedBatch:
        """Fingerprint `messages` and give each valid article its domain."""
        analyzer = self.runtime.analyzer
        assert analyzer is not None
        t0 = time.perf_counter()
        analyzed = analyzer.analyze([(m.value, m.timestamp_ms) for m in messages])
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

    def durable(self, work: Work, decided: FingerprintedBatch, delivered: Delivered) -> None:
        self.runtime.metrics.fingerprinted.inc(
            sum(isinstance(o, Forward) for o in decided.outcomes)
        )

    def rewind(self, consumer: Consumer, work: Work) -> None:
        """Read again from the failed batch's first message in each partition."""
        first: dict[tuple[str, int], int] = {}
        for m in work.messages:
            key = (m.source.topic, m.source.partition)
            first[key] = min(first.get(key, m.source.offset), m.source.offset)
        assigned = {(tp.topic, tp.partition) for tp in consumer.assignment()}
        for (topic, partition), offset in first.items():
            if (topic, partition) in assigned:
                consumer.seek(TopicPartition(topic, partition, offset))

    def housekeeping(self) -> None:
        pass


def fingerprint_service(config: Config, metrics: Metrics | None = None) -> Service:
    """`newsdedup run --role fingerprint`."""
    return Service(
        role_config(config, "fingerprint"),
        metrics,
        stage=FingerprintStage,
        role="fingerprint",
        full_config=config,
    )
