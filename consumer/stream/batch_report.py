"""What each finished batch tells the operator, for every role: the batch metrics, one log line
per dead letter, and every 30 s a throughput line.

The throughput line gives the rate of the work itself (messages over the seconds spent from
poll to durable), not over the whole interval, where a quiet feed would read as a slow one.
"""

from __future__ import annotations

import logging
import time
from typing import final

from consumer.ops.logs import log_event
from consumer.ops.metrics import Metrics
from consumer.stream.outputs import Outputs
from consumer.stream.stage import Work

_THROUGHPUT_LOG_S = 30.0


@final
class BatchReport:
    """The service's batch metrics and log lines, and the throughput since its last line."""

    def __init__(self, metrics: Metrics, logger: logging.Logger) -> None:
        self._metrics = metrics
        self._log = logger
        self._decided_since_log = 0
        # Seconds spent on batches (poll to durable) since the last throughput line.
        self._busy_since_log = 0.0
        self._last_throughput_log = time.monotonic()

    def durable(self, work: Work, outputs: Outputs, polled_at: float, durable: float) -> None:
        """What every role's batch tells the metrics: its size and times, its dead letters."""
        m = self._metrics
        for stage, seconds in outputs.stage_seconds.items():
            m.stage_seconds.labels(stage).observe(seconds)
        m.batch_size.observe(len(work.messages))
        for _ in work.messages:
            m.process_seconds.observe(durable - polled_at)
        for rejection in outputs.dead_letters:
            m.invalid.labels(str(rejection.invalid.reason)).inc()
            log_event(
                self._log,
                logging.WARNING,
                "message sent to the dead-letter topic",
                reason=str(rejection.invalid.reason),
                detail=rejection.invalid.detail,
                topic=rejection.message.source.topic,
                partition=rejection.message.source.partition,
                offset=rejection.message.source.offset,
            )
        self._decided_since_log += len(work.messages)
        self._busy_since_log += durable - polled_at

    def log_throughput(self, now: float) -> None:
        """The throughput line, when 30 s have passed since the last one."""
        if now - self._last_throughput_log < _THROUGHPUT_LOG_S:
            return
        # The rate of the work itself: over the whole interval, a quiet feed read as a slow one.
        busy = self._busy_since_log
        log_event(
            self._log,
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
