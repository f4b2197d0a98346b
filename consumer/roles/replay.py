"""Rebuilding the single-process index from the retained feed, without publishing anything.

`--role all` keeps no changelog: its index is a function of the feed it has decided. Replaying
each input partition from its earliest retained offset up to the group's committed offset,
through the service's own pipeline, rebuilds that index; the service then continues from the
committed offsets as if its directory had never been lost. What the feed no longer retains
(below a partition's low watermark) cannot come back: `ReplayResult.lost` counts it.
"""

from __future__ import annotations

import contextlib
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

from consumer.config import Config
from consumer.deciding.rules import match_rules
from consumer.records import Message, Source
from consumer.stream.clients import consumer_config
from consumer.stream.eventtime import EventTimeOrder, ReorderWindow, time_of, wall_clock_ms
from consumer.stream.offsets import decode_done
from consumer.stream.pipeline import Analysis, Pipeline
from consumer.stream.workers import Analyzer
from indexstore import IndexStore

_WAIT_S = 1.0


@dataclass(frozen=True, slots=True)
class PartitionReplay:
    partition: int
    start: int  # the earliest retained offset
    end: int  # the group's committed offset: where the service continues
    lost: int  # offsets below `start` that the feed no longer retains
    # Records above `end` that the commit names as decided (stream/offsets.py): the service
    # skips them, so they are replayed too.
    done: frozenset[int] = frozenset()

    @property
    def stop(self) -> int:
        """Past the last record to replay."""
        return max(self.end, max(self.done, default=-1) + 1)

    def wanted(self, offset: int) -> bool:
        return offset < self.end or offset in self.done


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
    config: Config,
    store: IndexStore,
    partitions: int,
    progress: Progress | None = None,
    analyzer: Analyzer | None = None,
) -> ReplayResult:
    """Decide the retained feed from where `store` stands (its input positions) up to the
    group's committed offsets into `store`; the decisions are not published (they were, when
    the service first made them). With nothing to replay this costs one look-up."""
    t0 = time.perf_counter()
    topic = config.kafka.input_topic
    # The service's group.id, to read its committed offsets; assign() never joins the group
    # and nothing here commits, so a running member would not notice (none should run).
    settings = consumer_config(config.kafka)
    del settings["statistics.interval.ms"]
    consumer = Consumer({**settings, "enable.partition.eof": True})
    done = 0
    try:
        plan = _plan(consumer, topic, partitions, store.positions())
        todo = {p.partition: p for p in plan if p.stop > p.start}
        if not todo:
            return ReplayResult(tuple(plan), 0, time.perf_counter() - t0)
        consumer.assign([TopicPartition(topic, p.partition, p.start) for p in todo.values()])
        with contextlib.ExitStack() as stack:
            if analyzer is None:
                analyzer = stack.enter_context(
                    Analyzer(config.input, config.fingerprint, config.service.workers)
                )
            pipeline = Pipeline(store, analyzer, rules=match_rules(config.match))
            # In the service's order: the same event-time order over the same partitions.
            order: EventTimeOrder[Analysis] = EventTimeOrder(
                # Its end is known: the window waits for the records, never for the clock.
                config.service.partition_idle.ms,
                window=ReorderWindow(config.service.reorder_window),
            )
            order.assign([p.partition for p in plan], start_ms=store.watermark_ms())
            for p in plan:
                if p.partition not in todo:
                    order.caught_up(p.partition)
            while todo or len(order):
                messages = _consume(consumer, config.kafka.batch_max_messages, todo)
                results = analyzer.analyze([(m.value, m.timestamp_ms) for m in messages])
                for message, result in zip(messages, results, strict=True):
                    order.add(
                        message.source.partition,
                        (message, result),
                        time_of(result),
                        message.timestamp_ms,
                    )
                # Transaction markers take offsets too: a partition is done once the
                # consumer's position has passed its committed offset, whatever lies below.
                for tp in consumer.position([TopicPartition(topic, p) for p in todo]):
                    if tp.offset >= todo[tp.partition].stop:
                        del todo[tp.partition]
                for p in plan:
                    if p.partition not in todo:
                        order.caught_up(p.partition)
                    else:
                        order.behind(p.partition, True)  # its end is known and not reached
                entries = list(order.release())
                if entries:
                    pipeline.decide_ordered(entries).index_batch.commit()
                    done += len(entries)
                    if progress is not None:
                        progress(done)
        store.expire()
    finally:
        consumer.close()
    return ReplayResult(tuple(plan), done, time.perf_counter() - t0)


def _consume(
    consumer: Consumer, max_messages: int, todo: dict[int, PartitionReplay]
) -> list[Message]:
    """The next records still to replay; a partition found at its end leaves `todo`."""
    records = consumer.consume(max_messages, _WAIT_S) if todo else []
    messages = []
    for record in records:
        error = record.error()
        if error is not None:
            if error.code() == KafkaError._PARTITION_EOF:
                todo.pop(record.partition(), None)
                continue
            raise KafkaException(error)
        replay = todo.get(record.partition())
        if replay is None or not replay.wanted(record.offset()):
            continue
        messages.append(_message(record))
    return messages


def _plan(
    consumer: Consumer, topic: str, partitions: int, positions: dict[str, int]
) -> list[PartitionReplay]:
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
        done = frozenset(decode_done(end, tp.metadata)) if end == tp.offset else frozenset()
        stop = PartitionReplay(tp.partition, 0, end, 0, done).stop
        # What the index already holds needs no replay; what the feed no longer holds
        # cannot have one.
        indexed = min(positions.get(f"{topic}/{tp.partition}", 0), stop)
        retained = min(low, stop)
        start = max(retained, indexed)
        plan.append(
            PartitionReplay(tp.partition, start, end, lost=max(0, retained - indexed), done=done)
        )
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
