"""The evaluation's feed produced into the broker as a backlog.

`newsdedup eval --through-kafka` (consumer/evaluation/through_kafka.py) spreads the feed's
articles over the input partitions at random (seeded, each partition in publish order) and
produces them in two halves around the service's restart. The topics are the harness's
(consumer/harness/broker.py).
"""

from __future__ import annotations

import json
import time
from collections.abc import Sequence
from random import Random

from confluent_kafka import Producer

from consumer.evaluation.feed import FeedArticle
from consumer.harness.broker import client_settings
from consumer.harness.records import InputRecord, produce


def partition_of_each(articles: Sequence[FeedArticle], partitions: int, seed: int) -> list[int]:
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
        self,
        bootstrap: str,
        topic: str,
        articles: Sequence[FeedArticle],
        partitions: int,
        seed: int,
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
        records = (
            InputRecord(
                key=self.articles[n].id.encode("utf-8"),
                value=json.dumps(self.articles[n].to_message(), ensure_ascii=False).encode(),
                partition=self.partition_of[n],
                timestamp_ms=self.first_ms + n,
            )
            for n in range(start, stop)
        )
        produce(producer, self.topic, records)
