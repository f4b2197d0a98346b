"""Rebuilding the single-process index from the retained feed, without publishing anything.

`--role all` keeps no changelog: its index is a function of the feed it has decided. Replaying
each input partition from its earliest retained offset up to the group's committed offset,
through the service's own pipeline, rebuilds that index; the service then continues from the
committed offsets as if its directory had never been lost. What the feed no longer retains
(below a partition's low watermark) cannot come back: `ReplayResult.lost` counts it.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass

from confluent_kafka import (
    OFFSET_INVALID,
    TIMESTAMP_NOT_AVAILABLE,
    Consumer,
    KafkaError,
    KafkaException,
    TopicPartition,
)
from confluent_kafka import Message as KafkaMessage

from consumer.analysis import Analyzer
from consumer.config import Config
from consumer.deciding import match_rules
from consumer.decisions import Source
from consumer.kafka_clients import consumer_config
from consumer.pipeline import Message, Pipeline, wall_clock_ms
from indexstore import IndexStore

_WAIT_S = 1.0


@dataclass(frozen=True, slots=True)
class PartitionReplay:
    partition: int
    start: int  # the earliest retained offset
    end: int  # the group's committed offset: where the service continues
    lost: int  # offsets below `start` that the feed no longer retains


@dataclass(frozen=True, slots=True)
class ReplayResult:
    partitions: tuple[PartitionReplay, ...]
    messages: int
    seconds: float

    @property
    def lost(self) -> int:
        return sum(p.lost for p in self.partitions)


# called with the number of messages replayed so far, after every batch
Progress = Callable[[int], None]


def replay_feed(
    config: Config, store: IndexStore, partitions: int, progress: Progress | None = None
) -> ReplayResult:
    """Decide the retained feed up to the group's committed offsets into `store`; the
    decisions are not published (they were, when the service first made them)."""
    t0 = time.perf_counter()
    topic = config.kafka.input_topic
    # The service's group.id, to read its committed offsets; assign() never joins the group
    # and nothing here commits, so a running member would not notice (none should run).
    settings = consumer_config(config.kafka)
    del settings["statistics.interval.ms"]
    consumer = Consumer({**settings, "enable.partition.eof": True})
    done = 0
    try:
        plan = _plan(consumer, topic, partitions)
        todo = {p.partition: p.end for p in plan if p.end > p.start}
        consumer.assign(
            [TopicPartition(topic, p.partition, p.start) for p in plan if p.end > p.start]
        )
        with Analyzer(config.input, config.fingerprint, config.service.workers) as analyzer:
            pipeline = Pipeline(store, analyzer, rules=match_rules(config.match))
            while todo:
                records = consumer.consume(config.kafka.batch_max_messages, _WAIT_S)
                messages = []
                for record in records:
                    error = record.error()
                    if error is not None:
                        if error.code() == KafkaError._PARTITION_EOF:
                            todo.pop(record.partition(), None)
                            continue
                        raise KafkaException(error)
                    end = todo.get(record.partition())
                    if end is None or record.offset() >= end:
                        continue
                    messages.append(_message(record))
                if messages:
                    pipeline.decide(messages).index_batch.commit()
                    done += len(messages)
                    if progress is not None:
                        progress(done)
                # Transaction markers take offsets too: a partition is done once the
                # consumer's position has passed its committed offset, whatever lies below.
                for tp in consumer.position([TopicPartition(topic, p) for p in todo]):
                    if tp.offset >= todo[tp.partition]:
                        del todo[tp.partition]
        store.expire()
    finally:
        consumer.close()
    return ReplayResult(tuple(plan), done, time.perf_counter() - t0)


def _plan(consumer: Consumer, topic: str, partitions: int) -> list[PartitionReplay]:
    committed = consumer.committed(
        [TopicPartition(topic, p) for p in range(partitions)], timeout=30.0
    )
    plan = []
    for tp in committed:
        low, _high = consumer.get_watermark_offsets(
            TopicPartition(topic, tp.partition), timeout=30.0, cached=False
        )
        # No committed offset: the service has decided nothing there yet.
        end = 0 if tp.offset == OFFSET_INVALID or tp.offset < 0 else tp.offset
        start = min(low, end)
        plan.append(PartitionReplay(tp.partition, start, end, lost=start))
    return plan


def _message(record: KafkaMessage) -> Message:
    """As the service builds it, so the replay decides exactly what the service decided."""
    ts_type, ts = record.timestamp()
    return Message(
        key=record.key(),
        value=record.value(),
        source=Source(record.topic(), record.partition(), record.offset()),
        timestamp_ms=wall_clock_ms() if ts_type == TIMESTAMP_NOT_AVAILABLE else ts,
        headers=tuple(record.headers() or ()),
    )
