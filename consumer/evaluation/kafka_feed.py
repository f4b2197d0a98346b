"""The evaluation's side of the broker: its topics, and the feed produced into them as a backlog.

`newsdedup eval --through-kafka` (consumer/evaluation/through_kafka.py) creates one set of
topics per run, spreads the feed's articles over the input partitions at random (seeded, each
partition in publish order) and produces them in two halves around the service's restart. What
is here only talks to the broker; starting the service and reading its answers back stay in
through_kafka.py.
"""

from __future__ import annotations

import contextlib
import json
import logging
import time
import uuid
from collections.abc import Sequence
from dataclasses import dataclass
from random import Random

from confluent_kafka import Producer
from confluent_kafka.admin import AdminClient, NewTopic

from consumer.errors import NewsdedupError
from consumer.evaluation.feed import Article

# The clients of the evaluation itself log nothing: librdkafka reports passing states (a
# coordinator still loading, the private broker going away at the end) that are no fault, and
# every real failure reaches the run as an exception, a delivery error or a stall.
_QUIET = logging.getLogger("newsdedup.eval.kafka")
_QUIET.addHandler(logging.NullHandler())
_QUIET.propagate = False


def client_settings(bootstrap: str, **settings: object) -> dict[str, object]:
    """The configuration of one of the evaluation's own clients (quiet, see above)."""
    return {"bootstrap.servers": bootstrap, "logger": _QUIET, **settings}


@dataclass(frozen=True, slots=True)
class Topics:
    """One run's topics, named after it: input, output, dead letters and the scale-out's two."""

    input: str
    output: str
    dlq: str
    internal: str
    changelog: str

    @classmethod
    def create(cls, bootstrap: str, partitions: int) -> Topics:
        run = f"newsdedup-eval-{uuid.uuid4().hex[:8]}"
        topics = cls(*(f"{run}.{name}" for name in ("in", "out", "dlq", "internal", "changelog")))
        # The scale-out topics are left to the roles, which create them as configured.
        wanted = [
            NewTopic(topics.input, partitions, 1),
            NewTopic(topics.output, partitions, 1),
            NewTopic(topics.dlq, 1, 1),
        ]
        admin = AdminClient(client_settings(bootstrap))  # alive until the results came
        for future in admin.create_topics(wanted).values():
            future.result(30)
        return topics

    def delete(self, bootstrap: str) -> None:
        # Best effort: a private broker goes away anyway; a given one keeps nothing of ours.
        names = [self.input, self.output, self.dlq, self.internal, self.changelog]
        admin = AdminClient(client_settings(bootstrap))
        for future in admin.delete_topics(names).values():
            with contextlib.suppress(Exception):  # a topic the run never created, say
                future.result(30)


def partition_of_each(articles: Sequence[Article], partitions: int, seed: int) -> list[int]:
    """The input partition of each article, at random but the same for a seed."""
    rng = Random(seed)
    return [rng.randrange(partitions) for _ in articles]


class Backlog:
    """The feed, keyed by article id, each article on its partition (at random, the same for
    a seed): each partition is in publish order. Each record is stamped 1 ms after the one
    before, as a feed written one article at a time would be (a bulk producer puts hundreds
    into one millisecond): articles published at the same time (dates given to the day) then
    keep their feed order in the service, which breaks such ties by the record's timestamp, as
    `check` keeps the file's order."""

    def __init__(
        self, bootstrap: str, topic: str, articles: Sequence[Article], partitions: int, seed: int
    ) -> None:
        self.bootstrap, self.topic, self.articles = bootstrap, topic, articles
        self.partition_of = partition_of_each(articles, partitions, seed)
        self.first_ms = int(time.time() * 1000) - len(articles)

    def produce(self, start: int, stop: int) -> None:
        """Articles start..stop of the feed, all delivered when this returns."""
        producer = Producer(
            client_settings(
                self.bootstrap,
                **{"linger.ms": 20, "enable.idempotence": True, "compression.type": "lz4"},
            )
        )
        failures: list[str] = []

        def delivered(error: object, _message: object) -> None:
            if error is not None:
                failures.append(str(error))

        for n in range(start, stop):
            article = self.articles[n]
            value = json.dumps(article.to_message(), ensure_ascii=False).encode("utf-8")
            while True:
                try:
                    producer.produce(
                        self.topic,
                        value=value,
                        key=article.id.encode("utf-8"),
                        partition=self.partition_of[n],
                        timestamp=self.first_ms + n,
                        on_delivery=delivered,
                    )
                    break
                except BufferError:
                    producer.poll(0.05)
            producer.poll(0)
        if producer.flush(120) or failures:
            raise NewsdedupError(
                f"the feed was not all delivered to {self.topic}: "
                f"{(failures or ['flush timed out'])[0]}"
            )
