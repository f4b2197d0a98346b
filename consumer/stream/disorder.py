"""Disorder inside a partition, made visible: the metric, and a warning when the reorder window
did not absorb it.

A producer without idempotence that retries a batch can land it behind batches sent after it,
in the same partition. The reorder window (eventtime.py) puts such records back in event-time
order; one that comes after its partition's time has passed it is decided after later
articles, and late if it is older than the index window, so its own later copies are missed.
"""

from __future__ import annotations

import logging
import time

from consumer.ops.logs import log_event
from consumer.ops.metrics import Metrics

# The counter has every record; the log says so at most this often.
_WARN_EVERY_S = 10.0


class DisorderWatch:
    """Turns the running totals of the event-time order(s) into the metric and the warning."""

    def __init__(self, metrics: Metrics, log: logging.Logger, window: int) -> None:
        self._metrics = metrics
        self._log = log
        self._window = window
        self._seen = (0, 0)
        self._warned_at = float("-inf")

    def note(self, out_of_order: int, beyond_window: int) -> None:
        """`out_of_order` and `beyond_window` as totals since the order(s) started."""
        seen_out, seen_beyond = self._seen
        self._seen = (out_of_order, beyond_window)
        exceeded = beyond_window - seen_beyond
        absorbed = out_of_order - seen_out - exceeded
        if absorbed > 0:
            self._metrics.out_of_order.labels("absorbed").inc(absorbed)
        if exceeded <= 0:
            return
        self._metrics.out_of_order.labels("exceeded").inc(exceeded)
        now = time.monotonic()
        if now - self._warned_at >= _WARN_EVERY_S:
            self._warned_at = now
            log_event(
                self._log,
                logging.WARNING,
                "articles arrived behind later-dated ones of their partition, past the reorder "
                "window: they are decided after them, and as late if older than the index "
                "window; produce with enable.idempotence=true, or raise [service] reorder_window",
                articles=exceeded,
                reorder_window=self._window,
            )
