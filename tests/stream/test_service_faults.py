"""Faults against the real broker: SIGKILL at random moments, a second instance joining and
leaving, the broker going away for 30 s. Nothing lost, nothing doubled, nothing changed."""

from __future__ import annotations

import random
import time

import pytest
from feeds import corpus_feed
from service_support import (
    ServiceProcess,
    Topics,
    decisions_by_id,
    produce,
    read_all,
    wait_until,
)

from consumer.config import IndexConfig
from consumer.deciding import stored
from consumer.stream.state import index_options
from indexstore import IndexStore

pytestmark = [pytest.mark.kafka, pytest.mark.slow]

CRASH_ARTICLES = 20_000
KILLS = 5


@pytest.fixture
def topics(new_topic) -> Topics:
    return Topics(new_topic("in", partitions=3), new_topic("out", 3), new_topic("dlq"))


@pytest.mark.parametrize("delivery", ["exactly_once", "at_least_once"])
def test_sigkill_loses_nothing_and_doubles_nothing(kafka_bootstrap, topics, tmp_path, delivery):
    feed = corpus_feed(CRASH_ARTICLES)
    ids = {a["id"] for a in feed}
    assert len(ids) == len(feed) == CRASH_ARTICLES
    produce(kafka_bootstrap, topics.input, feed)
    rng = random.Random(20261123)
    state = tmp_path / "state"
    service = ServiceProcess(
        kafka_bootstrap,
        topics,
        state,
        tmp_path / "svc.log",
        group_id=f"crash-{delivery}",
        delivery=delivery,
    )
    for _ in range(KILLS):
        service.start()
        time.sleep(rng.uniform(3.0, 9.0))
        assert service.running(), service.log()[-3000:]
        service.kill()
    service.start()
    records = read_all(
        kafka_bootstrap,
        topics.output,
        expected=len(feed),
        timeout=600,
        settle=5.0,
        read_committed=True,
        service=service,
    )
    assert service.stop() == 0, service.log()[-3000:]
    assert service.log().count("starting") == KILLS + 1

    decisions = decisions_by_id(records, ids, delivery)

    # The options the service ran with (its defaults plus what ServiceProcess sets), so the
    # store's compatibility check compares like with like.
    options = index_options(IndexConfig(segment="30d", retention="36500d"))
    with IndexStore.open(state, options) as store:
        assert store.stats().articles == len(ids)
        for article_id in rng.sample(sorted(ids), 500):
            record = store.get(article_id)
            assert record is not None
            kept = stored.decode(article_id, record.payload)
            assert kept.kind.value == decisions[article_id][-1]["decision"]
            assert kept.cluster_id == decisions[article_id][-1]["cluster_id"]


def test_instance_joining_and_leaving_loses_and_doubles_nothing(kafka_bootstrap, topics, tmp_path):
    feed = corpus_feed(8000)
    produce(kafka_bootstrap, topics.input, feed)
    common = dict(group_id="rebalance", delivery="exactly_once")
    first = ServiceProcess(
        kafka_bootstrap,
        topics,
        tmp_path / "a",
        tmp_path / "a.log",
        kafka_transactional_id="rebalance-a",
        **common,
    )
    second = ServiceProcess(
        kafka_bootstrap,
        topics,
        tmp_path / "b",
        tmp_path / "b.log",
        kafka_transactional_id="rebalance-b",
        **common,
    )
    with first:
        time.sleep(6)
        with second:
            wait_until(lambda: "partitions assigned" in second.log(), 60, what="second assigned")
            time.sleep(4)
            assert second.stop() == 0
        records = read_all(
            kafka_bootstrap,
            topics.output,
            expected=len(feed),
            timeout=300,
            settle=5.0,
            service=first,
        )
        assert first.stop() == 0
    assert "partitions revoked" in first.log()
    ids = [r.json()["id"] for r in records]
    assert sorted(ids) == sorted(a["id"] for a in feed)


def test_broker_outage_pauses_and_resumes(kafka_local, tmp_path):
    """The broker stops for 30 s mid-run and comes back with its data: the service waits,
    then finishes, with every article decided exactly once (exactly_once, read_committed)."""
    bootstrap = kafka_local.start()
    from confluent_kafka.admin import AdminClient, NewTopic

    admin = AdminClient({"bootstrap.servers": bootstrap})
    topics = Topics("outage.in", "outage.out", "outage.dlq")
    for f in admin.create_topics([NewTopic(topics.input, 2, 1)]).values():
        f.result(30)
    feed = corpus_feed(6000)
    produce(bootstrap, topics.input, feed)
    service = ServiceProcess(
        bootstrap,
        topics,
        tmp_path / "state",
        tmp_path / "svc.log",
        group_id="outage",
        delivery="exactly_once",
    )
    with service:
        wait_until(lambda: "partitions assigned" in service.log(), 90, what="assignment")
        time.sleep(2)
        kafka_local.stop()
        time.sleep(30)
        assert service.running(), service.log()[-3000:]
        kafka_local.run("start", KAFKA_KEEP_DATA="1")
        records = read_all(
            bootstrap, topics.output, expected=len(feed), timeout=400, settle=5.0, service=service
        )
        assert service.stop() == 0, service.log()[-3000:]
    ids = [r.json()["id"] for r in records]
    assert sorted(ids) == sorted(a["id"] for a in feed)
