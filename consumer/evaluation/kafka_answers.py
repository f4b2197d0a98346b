"""Reading back what `newsdedup eval --through-kafka`'s service answered: the latest decision
per article from the output topic, dead letters from the dead-letter topic, the service
restarted once half the feed is answered, and an account of every record (`Delivered`).
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Protocol

from confluent_kafka import Message

from consumer.errors import NewsdedupError
from consumer.evaluation.check import ContractError, decision_from_record
from consumer.evaluation.feed import FeedArticle
from consumer.evaluation.runs import SystemAnswer
from consumer.harness.broker import Topics
from consumer.harness.records import decision_reader

# After the last article is decided, how long the topics must stay quiet before reading
# stops: records that follow (a correction, a re-sent decision) are counted too.
SETTLE_S = 3.0
# No new decision for this long means the service is stuck (a start takes seconds).
STALL_S = 180.0


class RestartableService(Protocol):
    def start(self) -> None: ...
    def restart(self, how: str) -> list[int | None]: ...
    def failure(self) -> str | None: ...


@dataclass(slots=True)
class Delivered:
    """What the service wrote, read back from its output and dead-letter topics."""

    role: str
    partitions: int
    delivery: str
    restart: str
    articles: int
    records: int = 0  # decision records read
    decided: int = 0  # feed articles with at least one decision
    rejected: int = 0  # feed articles dead-lettered and never decided
    undecided: int = 0  # feed articles with neither
    repeated: int = 0  # records giving again the answer their key already had
    changed: int = 0  # records changing it (what a correction does)
    foreign: int = 0  # records for no article of the feed, or keyed by another id
    late: int = 0  # latest decisions marked late
    matched_later: int = 0  # latest decisions flagged against a later-published article
    decided_before_restart: int = 0
    restart_exit_codes: list[int | None] = field(default_factory=list)  # None: killed
    seconds: float = 0.0  # from the first start to the last decision


class _Answers:
    """The latest decision per feed article so far, and the tally in `delivered`."""

    def __init__(self, feed_ids: set[str], topics: Topics, delivered: Delivered) -> None:
        self.feed_ids, self.topics, self.delivered = feed_ids, topics, delivered
        self.latest: dict[str, SystemAnswer] = {}
        self.latest_late: dict[str, bool] = {}
        self.partition_of_key: dict[str, int] = {}
        self.dead_lettered: set[str] = set()
        self.answered = 0  # feed articles decided or dead-lettered
        self.error: str | None = None

    def take(self, message: Message) -> bool:
        """Count one record; True when it answered a feed article for the first time."""
        key = (message.key() or b"").decode("utf-8", errors="replace")
        if message.topic() == self.topics.dlq:
            first = key in self.feed_ids and key not in self.dead_lettered
            first = first and key not in self.latest
            self.dead_lettered.add(key)
            return self._answered(first)
        self.delivered.records += 1
        try:
            record = json.loads(message.value())
            decision = decision_from_record(record)
        except (ValueError, TypeError, ContractError):
            self.delivered.foreign += 1
            return False
        if decision.id != key or key not in self.feed_ids:
            self.delivered.foreign += 1
            return False
        if self.partition_of_key.setdefault(key, message.partition()) != message.partition():
            # Latest per key is only defined within one partition.
            self.error = f"decisions for {key!r} in two output partitions"
        previous = self.latest.get(key)
        if previous == decision:
            self.delivered.repeated += 1
        elif previous is not None:
            self.delivered.changed += 1
        self.latest[key] = decision
        self.latest_late[key] = record.get("late") is True
        return self._answered(previous is None and key not in self.dead_lettered)

    def _answered(self, first: bool) -> bool:
        self.answered += first
        return first

    def finish(self, seconds: float) -> None:
        d = self.delivered
        d.seconds = seconds
        d.decided = len(self.latest)
        d.rejected = len((self.dead_lettered & self.feed_ids) - set(self.latest))
        d.undecided = len(self.feed_ids) - d.decided - d.rejected
        d.late = sum(self.latest_late.values())


def read_answers(
    bootstrap: str,
    topics: Topics,
    articles: Sequence[FeedArticle],
    service: RestartableService,
    delivered: Delivered,
    produce_the_rest: Callable[[], None],
) -> tuple[dict[str, SystemAnswer], str | None]:
    """Start the service; once half the feed is answered, restart it and `produce_the_rest`;
    read its decisions until every article is answered and nothing more comes: the latest
    decision per article, and an error if any."""
    answers = _Answers({a.id for a in articles}, topics, delivered)
    reader = decision_reader(
        bootstrap, [(topics.output, delivered.partitions), (topics.dlq, 1)], "newsdedup-eval-reader"
    )
    started = time.perf_counter()
    last_new = last_answer = started
    error: str | None = None
    service.start()
    try:
        while True:
            now = time.perf_counter()
            if answers.answered == len(answers.feed_ids) and now - last_new >= SETTLE_S:
                break
            error = _stalled(answers, now - last_new) or service.failure()
            if error:
                break
            if not delivered.restart_exit_codes and 2 * answers.answered >= len(answers.feed_ids):
                delivered.decided_before_restart = answers.answered
                delivered.restart_exit_codes = service.restart(delivered.restart)
                produce_the_rest()
                last_new = time.perf_counter()
                continue
            for message in reader.consume(500, 0.1):
                if message.error():
                    continue
                last_new = time.perf_counter()
                if answers.take(message):
                    last_answer = last_new
            error = answers.error
            if error:
                break
    except NewsdedupError as e:
        error = str(e)
    finally:
        reader.close()
    answers.finish(last_answer - started)
    return answers.latest, error


def _stalled(answers: _Answers, quiet_s: float) -> str | None:
    if quiet_s < STALL_S:
        return None
    return (
        f"stalled: nothing new for {STALL_S:.0f} s; "
        f"{answers.answered:,} of {len(answers.feed_ids):,} articles answered"
    )
