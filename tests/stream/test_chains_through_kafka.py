"""Chains of copies delivered out of event-time order through the real broker: copies before
their originals, copies of copies before the copies they copy, some in the backlog the service
starts on and some produced while it runs. A reader that keeps the latest decision per key ends
with `check`'s answer on the feed sorted by event time, cluster ids included."""

from __future__ import annotations

import json
import random
import time

import pytest
from chains import check_answer, differences, latest_per_key, random_chains
from confluent_kafka import Producer
from service_support import ServiceProcess, Topics, read_all

pytestmark = [pytest.mark.kafka, pytest.mark.slow]

PARTITIONS = 3
CHAINS = 16


def _produce(bootstrap: str, topic: str, articles: list[dict], rng: random.Random) -> None:
    """In this order, each to a partition drawn at random; idempotent, so each partition
    holds its articles in the order given."""
    producer = Producer({"bootstrap.servers": bootstrap, "enable.idempotence": True})
    failures: list = []
    for article in articles:
        producer.produce(
            topic,
            key=article["id"].encode(),
            value=json.dumps(article).encode(),
            partition=rng.randrange(PARTITIONS),
            on_delivery=lambda e, m: e and failures.append(e),
        )
    assert producer.flush(60) == 0
    assert not failures


def _decided_in_two_rounds(
    bootstrap: str, topics: Topics, feed: list[dict], start, seed: int, kill: bool = False
) -> dict[str, dict]:
    """Half of the feed, in a random order, before the service starts; the rest, in a random
    order too, once it has decided the first half, in three parts a moment apart. With `kill`,
    the service is SIGKILLed after the second part and started again on the same state (the
    last batch may have reached the index and not the topic: it is delivered again). The
    latest record per key."""
    rng = random.Random(seed)
    arrival = rng.sample(feed, len(feed))
    first, second = arrival[: len(feed) // 2], arrival[len(feed) // 2 :]
    _produce(bootstrap, topics.input, first, rng)
    instances = start("")
    try:
        read_all(bootstrap, topics.output, expected=len(first), timeout=120, service=instances[-1])
        third = len(second) // 3
        for n, part in enumerate((second[:third], second[third : 2 * third], second[2 * third :])):
            _produce(bootstrap, topics.input, part, rng)
            time.sleep(0.2)
            if kill and n == 1:
                instances[-1].kill()
                instances[-1:] = start("-restarted")
        records = read_all(
            bootstrap, topics.output, expected=len(feed), timeout=120, service=instances[-1]
        )
        for instance in instances:
            assert instance.stop() == 0, instance.log()[-2000:]
    finally:
        for instance in instances:
            if instance.process is not None and instance.running():
                instance.kill()
    for r in records:
        assert r.key == r.json()["id"].encode()
    return latest_per_key(r.json() for r in records)


def _topics(new_topic) -> Topics:
    return Topics(new_topic("in", partitions=PARTITIONS), new_topic("out"), new_topic("dlq"))


# Small batches: a chain's articles fall in different batches as well as in one.
OPTIONS = {"kafka_batch_max_messages": "7", "kafka_client_session_timeout_ms": "6000"}


@pytest.mark.parametrize(
    ("seed", "delivery", "kill"),
    [(1, "exactly_once", False), (2, "at_least_once", False), (4, "exactly_once", True)],
)
def test_role_all_settles_every_chain_as_check_does(
    kafka_bootstrap, new_topic, tmp_path, seed, delivery, kill
):
    feed = random_chains(random.Random(seed), CHAINS, seed)
    topics = _topics(new_topic)

    def start(suffix: str) -> list[ServiceProcess]:
        service = ServiceProcess(
            kafka_bootstrap,
            topics,
            tmp_path / "state",
            tmp_path / f"svc{suffix}.log",
            group_id=f"chains-{seed}",
            delivery=delivery,
            **OPTIONS,
        )
        return [service.start()]

    latest = _decided_in_two_rounds(kafka_bootstrap, topics, feed, start, seed, kill)
    corrected = sum(1 for d in latest.values() if d.get("correction"))
    wrong = differences(latest, check_answer(feed))
    assert not wrong, f"{len(wrong)} of {len(feed)}:\n" + "\n".join(wrong)
    # The feed is out of order enough that corrections settled some of it.
    assert corrected > 0


def test_scaleout_roles_settle_every_chain_as_check_does(kafka_bootstrap, new_topic, tmp_path):
    from roles import RoleProcess, scaleout_options

    seed = 3
    feed = random_chains(random.Random(seed), CHAINS, seed)
    topics = _topics(new_topic)
    common = dict(group_id="chains-scaleout", **scaleout_options(**OPTIONS))

    def start(suffix: str) -> list[ServiceProcess]:
        return [
            RoleProcess(
                role,
                kafka_bootstrap,
                topics,
                tmp_path / role,
                tmp_path / f"{role}{suffix}.log",
                scaleout_instance_id=f"{role}-0",
                **common,
            ).start()
            for role in ("fingerprint", "decide")
        ]

    latest = _decided_in_two_rounds(kafka_bootstrap, topics, feed, start, seed)
    wrong = differences(latest, check_answer(feed))
    assert not wrong, f"{len(wrong)} of {len(feed)}:\n" + "\n".join(wrong)
    assert any(d.get("correction") for d in latest.values())
