"""Records into the run's input topic, and the output and dead-letter topics read back."""

from __future__ import annotations

import uuid
from collections.abc import Callable, Iterable
from dataclasses import dataclass

from confluent_kafka import OFFSET_BEGINNING, Consumer, Producer, TopicPartition

from consumer.errors import NewsdedupError
from consumer.harness.broker import client_settings


@dataclass(frozen=True, slots=True)
class InputRecord:
    key: bytes
    value: bytes
    partition: int | None = None  # None: the producer's partitioner (by key)
    timestamp_ms: int | None = None  # None: the time it is sent


def produce(
    producer: Producer,
    topic: str,
    records: Iterable[InputRecord],
    after_each: Callable[[int], None] | None = None,
    flush_s: float = 120.0,
) -> None:
    """Every record, all delivered when this returns (or NewsdedupError). `after_each` is
    called with the count sent so far: a fixed-rate producer sleeps there."""
    failures: list[str] = []

    def delivered(error: object, _message: object) -> None:
        if error is not None:
            failures.append(str(error))

    for sent, record in enumerate(records, 1):
        placed: dict[str, int] = {}
        if record.partition is not None:
            placed["partition"] = record.partition
        if record.timestamp_ms is not None:
            placed["timestamp"] = record.timestamp_ms
        while True:
            try:
                producer.produce(
                    topic, value=record.value, key=record.key, on_delivery=delivered, **placed
                )
                break
            except BufferError:
                producer.poll(0.05)
        producer.poll(0)
        if after_each is not None:
            after_each(sent)
    if producer.flush(flush_s) or failures:
        raise NewsdedupError(
            f"the feed was not all delivered to {topic}: {(failures or ['flush timed out'])[0]}"
        )


def decision_reader(
    bootstrap: str, topics: Iterable[tuple[str, int]], group_prefix: str
) -> Consumer:
    """A reader of every partition of (topic, partitions) from the start, committed records
    only (what a transactional service has not committed is not yet its answer)."""
    reader = Consumer(
        client_settings(
            bootstrap,
            **{
                "group.id": f"{group_prefix}-{uuid.uuid4().hex[:8]}",
                "enable.auto.commit": False,
                "isolation.level": "read_committed",
            },
        )
    )
    reader.assign(
        [
            TopicPartition(topic, p, OFFSET_BEGINNING)
            for topic, partitions in topics
            for p in range(partitions)
        ]
    )
    return reader
