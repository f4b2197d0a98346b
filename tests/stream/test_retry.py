"""Retrying what waits on the broker (`Runtime.retry`, `Backoff`): the waits double up to their
cap, a stop ends a wait at once, each failure is one log line, and a refusal is not retried."""

from __future__ import annotations

import logging
import threading
import time

import pytest
from confluent_kafka import KafkaError, KafkaException

from consumer.config import Config
from consumer.errors import NewsdedupError
from consumer.ops.health import HealthState
from consumer.ops.metrics import Metrics
from consumer.stream.stage import MAX_BACKOFF_S, Backoff, RetryLater, Runtime

log = logging.getLogger("newsdedup.test_retry")


def _runtime(check_fatal=lambda: None) -> Runtime:
    return Runtime(Config(), Config(), Metrics(), HealthState(), threading.Event(), check_fatal)


def _broker_down() -> KafkaException:
    return KafkaException(KafkaError(KafkaError._TRANSPORT, "broker down"))


def _failures(caplog) -> list[tuple[str, dict]]:
    return [(r.getMessage(), r.fields) for r in caplog.records if r.name == log.name]


def test_backoff_doubles_up_to_its_cap_and_starts_over_after_a_success() -> None:
    stopped = threading.Event()
    stopped.set()  # every wait returns at once
    backoff = Backoff(1.0)
    delays = []
    for _ in range(8):
        delays.append(backoff.delay)
        assert backoff.wait(stopped)
    assert delays == [1.0, 2.0, 4.0, 8.0, 16.0, MAX_BACKOFF_S, MAX_BACKOFF_S, MAX_BACKOFF_S]
    backoff.reset()
    assert backoff.delay == 1.0


def test_a_stop_ends_a_long_backoff_at_once() -> None:
    stop = threading.Event()
    threading.Timer(0.1, stop.set).start()
    started = time.monotonic()
    assert Backoff(MAX_BACKOFF_S).wait(stop)
    assert time.monotonic() - started < 1.0


def test_a_stop_during_a_retry_wait_ends_it_promptly(caplog) -> None:
    runtime = _runtime()
    attempts = 0

    def attempt() -> int:
        nonlocal attempts
        attempts += 1
        raise _broker_down()

    threading.Timer(0.2, runtime.stop.set).start()
    started = time.monotonic()
    with caplog.at_level(logging.WARNING):
        assert runtime.retry(attempt, log, "broker not reachable; waiting") is None
    # Stopped inside the first wait (1 s): no second attempt.
    assert time.monotonic() - started < 0.9
    assert attempts == 1
    assert len(_failures(caplog)) == 1


def test_a_stop_before_the_retry_makes_no_attempt() -> None:
    runtime = _runtime()
    runtime.stop.set()
    assert runtime.retry(lambda: pytest.fail("attempted"), log, "unused") is None


def test_each_failure_is_one_line_with_the_wait_before_the_next_attempt(caplog) -> None:
    runtime = _runtime()
    outcomes: list[BaseException | str] = [
        _broker_down(),
        RetryLater("the topic does not exist yet; waiting", topic="feed"),
        "answer",
    ]

    def attempt() -> str:
        outcome = outcomes.pop(0)
        if isinstance(outcome, BaseException):
            raise outcome
        return outcome

    with caplog.at_level(logging.WARNING):
        assert runtime.retry(attempt, log, "cannot ask yet; retrying", bootstrap="b:9092") == (
            "answer"
        )
    assert _failures(caplog) == [
        (
            "cannot ask yet; retrying",
            {"bootstrap": "b:9092", "error": "broker down", "retry_in_s": 1.0},
        ),
        ("the topic does not exist yet; waiting", {"topic": "feed", "retry_in_s": 2.0}),
    ]


class Refused(NewsdedupError):
    pass


def test_a_refusal_by_the_broker_is_raised_not_retried(caplog) -> None:
    def refused() -> None:
        raise Refused("Kafka refused the service")

    runtime = _runtime(check_fatal=refused)

    def attempt() -> int:
        raise _broker_down()

    started = time.monotonic()
    with caplog.at_level(logging.WARNING), pytest.raises(Refused):
        runtime.retry(attempt, log, "unused")
    assert time.monotonic() - started < 0.5
    assert _failures(caplog) == []
