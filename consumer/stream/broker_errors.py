"""The errors librdkafka reports besides records, sorted into "stop" and "carry on".

The clients report errors through callbacks, and a poll returns some in place of records. A
refusal for good (credentials, authorization, a fenced static member) stops the service: it is
kept here and raised by the loop (`raise_if_fatal`), also from inside the retries of the
start-up (stage.py's `Runtime.check_fatal`). Anything else the service rides out (librdkafka
reconnects by itself), so it is only logged: one line per kind of error every 10 s.
"""

from __future__ import annotations

import logging
import time
from typing import final

from confluent_kafka import KafkaError

from consumer.errors import NewsdedupError
from consumer.ops.health import HealthState
from consumer.ops.logs import log_event
from consumer.stream.clients import REFUSAL_CODES

_FATAL_CODES = REFUSAL_CODES
# A consumer's own fatal errors arrive as records: _FATAL (with fatal() false on the record),
# e.g. a static member fenced by a newer one with the same group.instance.id.
_CONSUMER_FATAL_CODES = _FATAL_CODES | {KafkaError._FATAL, KafkaError.FENCED_INSTANCE_ID}
_ERROR_LOG_EVERY_S = 10.0


class KafkaFatalError(NewsdedupError):
    """The broker refused us for good (credentials, authorization, fencing): do not retry."""


@final
class BrokerErrors:
    """The service's error callbacks and the first refusal for good among what they saw."""

    def __init__(self, health: HealthState, logger: logging.Logger) -> None:
        self._health = health
        self._log = logger
        self.fatal: str | None = None
        self._last_error_log: dict[int, float] = {}

    def raise_if_fatal(self) -> None:
        if self.fatal:
            raise KafkaFatalError(f"Kafka refused the service: {self.fatal}")

    def on_error(self, error: KafkaError) -> None:
        """The consumer's and the admin client's `error_cb`."""
        if error.fatal() or error.code() in _FATAL_CODES:
            self.fatal = error.str()
        else:
            self._log_transient(error)

    def on_producer_error(self, error: KafkaError) -> None:
        """The producer's `error_cb`."""
        # A producer that failed fatally is replaced by the checkpoint; only refusals
        # (credentials, authorization) stop the service.
        if error.code() in _FATAL_CODES:
            self.fatal = error.str()
        else:
            self._log_transient(error)

    def on_consumed_error(self, error: KafkaError) -> None:
        """An error a poll returned in place of a record (other than a partition's end)."""
        if error.fatal() or error.code() in _CONSUMER_FATAL_CODES:
            self.fatal = error.str()
        else:
            log_event(self._log, logging.WARNING, "consume error", error=error.str())

    def _log_transient(self, error: KafkaError) -> None:
        if error.code() == KafkaError._ALL_BROKERS_DOWN:
            self._health.broker_reachable = False
        # librdkafka reports every failed reconnect; one line per kind every 10 s is enough.
        now = time.monotonic()
        if now - self._last_error_log.get(error.code(), -1e9) >= _ERROR_LOG_EVERY_S:
            self._last_error_log[error.code()] = now
            log_event(self._log, logging.WARNING, "kafka error", error=error.str())
