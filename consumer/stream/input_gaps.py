"""Input the service never read because the broker no longer held it.

When retention deletes records a consumer group has not read (the service was stopped, or
lagged further behind than the topic's retention), the committed offset, or the next offset
to fetch, falls below the partition's low watermark. librdkafka then moves on to
`auto.offset.reset` with one INFO line of its own. The service says it in its own words
instead: a WARNING with the partition and how many records were skipped, and a counter
(`newsdedup_input_records_skipped_total{reason="retention"}`).

Two places see it: an assignment, whose committed offsets are compared with the low
watermarks (the service was stopped), and the records polled, whose offsets jump past
the next one expected (it lagged). A jump alone is not a loss: transaction markers and
compaction leave gaps too; only offsets below the low watermark the last fetch reported
count.
"""

from __future__ import annotations

import logging

from confluent_kafka import Consumer, KafkaException, TopicPartition

from consumer.ops.logs import log_event
from consumer.ops.metrics import Metrics

_TIMEOUT_S = 10.0


class InputGaps:
    def __init__(self, metrics: Metrics, offset_reset: str, logger: logging.Logger) -> None:
        self._skipped = metrics.input_records_skipped.labels("retention")
        self._offset_reset = offset_reset
        self._log = logger
        # partition -> the offset its next record should have, when known
        self._next: dict[int, int] = {}

    def assigned(self, consumer: Consumer, partitions: list[TopicPartition]) -> None:
        """Compare the group's committed offsets with what the broker still holds (two
        requests per partition, once per assignment)."""
        try:
            committed = consumer.committed(partitions, timeout=_TIMEOUT_S)
            for tp in committed:
                if tp.offset < 0:
                    continue  # nothing committed: there is nothing the group missed
                low, _high = consumer.get_watermark_offsets(tp, timeout=_TIMEOUT_S, cached=False)
                if tp.offset < low:
                    self._report(tp.topic, tp.partition, tp.offset, low)
                self._next[tp.partition] = max(tp.offset, low)
        except KafkaException as e:
            log_event(
                self._log,
                logging.WARNING,
                "cannot compare the committed offsets with the records the broker holds",
                error=e.args[0].str(),
            )

    def released(self, partitions: list[TopicPartition]) -> None:
        for tp in partitions:
            self._next.pop(tp.partition, None)

    def polled(self, consumer: Consumer, topic: str, partition: int, offset: int) -> None:
        """A record was polled: report the offsets before it that retention deleted."""
        expected = self._next.get(partition)
        self._next[partition] = offset + 1
        if expected is None or offset <= expected:
            return
        # Fetch responses carry the log start offset: no request here.
        low, _high = consumer.get_watermark_offsets(TopicPartition(topic, partition), cached=True)
        if low > expected:
            self._report(topic, partition, expected, min(low, offset))

    def _report(self, topic: str, partition: int, first: int, end: int) -> None:
        skipped = end - first
        self._skipped.inc(skipped)
        log_event(
            self._log,
            logging.WARNING,
            "input records deleted before they were read (the topic's retention is shorter "
            "than the service's stop or lag): skipped; later copies of them pass as originals",
            topic=topic,
            partition=partition,
            skipped=skipped,
            offsets=f"{first}-{end - 1}",
            auto_offset_reset=self._offset_reset,
        )
