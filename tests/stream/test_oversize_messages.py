"""No message stops the feed: input as large as the broker delivers ends as a decision or a dead
letter, with the service's default limits, in both delivery modes."""

from __future__ import annotations

import hashlib
import json
import time

import pytest
from confluent_kafka import Producer
from confluent_kafka.admin import AdminClient, NewTopic
from service_support import (
    ServiceProcess,
    Topics,
    committed_offsets,
    decisions_by_id,
    read_all,
    wait_until,
)

pytestmark = [pytest.mark.kafka, pytest.mark.slow]

ARTICLES = 2_000
# Not JSON, just under the default [input] max_message_bytes: the dead letter repeats the value
# and adds its error headers, which together pass the producer's 1,000,000-byte limit.
NEARLY_1MB = b"{" + b"x" * 999_890
# Over every default limit but still under the broker's (1,048,588 bytes for a record batch).
OVER_1MB = json.dumps({"id": "huge", "title": "t", "content": "y" * 1_020_000}).encode()


def _articles() -> list[dict]:
    return [
        {
            "id": f"a-{i}",
            "title": f"Harbour report {i}",
            "content": f"Crane {i} moved {i * 7 % 101} containers in district {i % 13} today.",
            "published_at": f"2024-05-01T{(i // 3600) % 24:02d}:{(i // 60) % 60:02d}:{i % 60:02d}Z",
        }
        for i in range(ARTICLES)
    ]


def _produce(bootstrap: str, topic: str, values: list[bytes | dict]) -> None:
    producer = Producer(
        {"bootstrap.servers": bootstrap, "linger.ms": 10, "message.max.bytes": 2_000_000}
    )
    failures: list = []
    for value in values:
        key = None
        if isinstance(value, dict):
            key = value["id"].encode()
            value = json.dumps(value).encode()
        while True:
            try:
                producer.produce(
                    topic, value=value, key=key, on_delivery=lambda e, m: e and failures.append(e)
                )
                break
            except BufferError:
                producer.poll(0.1)
    assert producer.flush(60) == 0
    assert not failures, failures


@pytest.mark.parametrize("delivery", ["at_least_once", "exactly_once"])
def test_megabyte_messages_are_dead_lettered_and_the_feed_drains(
    kafka_bootstrap, new_topic, tmp_path, delivery
):
    topics = Topics(new_topic("in"), new_topic("out"), new_topic("dlq"))
    articles = _articles()
    values: list[bytes | dict] = [*articles[:700], NEARLY_1MB, *articles[700:1400], OVER_1MB]
    values += articles[1400:]
    _produce(kafka_bootstrap, topics.input, values)
    with ServiceProcess(
        kafka_bootstrap,
        topics,
        tmp_path / "state",
        tmp_path / "svc.log",
        group_id=f"oversize-{delivery}",
        delivery=delivery,
    ) as service:
        dead = read_all(kafka_bootstrap, topics.dlq, expected=2, timeout=120, service=service)
        decided = read_all(kafka_bootstrap, topics.output, expected=ARTICLES, timeout=120)
        assert service.stop() == 0
        log = service.log()
    decisions_by_id(decided, {a["id"] for a in articles}, delivery)
    assert "rewinding the batch" not in log
    assert len(dead) == 2, [r.headers for r in dead]
    by_size = {int(r.headers["x-error-value-bytes"]): r for r in dead}
    assert set(by_size) == {len(NEARLY_1MB), len(OVER_1MB)}
    for original in (NEARLY_1MB, OVER_1MB):
        record = by_size[len(original)]
        # What fits of the value, and enough to know the whole: its size and hash.
        assert record.headers["x-error-value-truncated"] == b"true"
        assert original.startswith(record.value)
        assert len(record.value) > 900_000
        assert (
            record.headers["x-error-value-sha256"] == hashlib.sha256(original).hexdigest().encode()
        )
        assert int(record.headers["x-source-offset"]) == values.index(original)
    assert committed_offsets(kafka_bootstrap, f"oversize-{delivery}", topics.input, 1) == [
        len(values)
    ]


def test_a_dead_letter_topic_with_a_small_limit_gets_what_fits(
    kafka_bootstrap, new_topic, tmp_path
):
    """The DLQ topic's own max.message.bytes is lower than the producer's: the dead letter is cut
    to the topic's limit instead of being refused (and retried) forever."""
    topics = Topics(new_topic("in"), new_topic("out"), f"dlq-small-{tmp_path.name}")
    admin = AdminClient({"bootstrap.servers": kafka_bootstrap})
    admin.create_topics([NewTopic(topics.dlq, 1, 1, config={"max.message.bytes": "200000"})])[
        topics.dlq
    ].result()
    articles = _articles()[:300]
    values: list[bytes | dict] = [*articles[:100], NEARLY_1MB, *articles[100:]]
    _produce(kafka_bootstrap, topics.input, values)
    with ServiceProcess(
        kafka_bootstrap, topics, tmp_path / "state", tmp_path / "svc.log", group_id="small-dlq"
    ) as service:
        dead = read_all(kafka_bootstrap, topics.dlq, expected=1, timeout=60, service=service)
        decided = read_all(kafka_bootstrap, topics.output, expected=len(articles), timeout=60)
        assert service.stop() == 0
    decisions_by_id(decided, {a["id"] for a in articles}, "at_least_once")
    (record,) = dead
    assert record.headers["x-error-value-truncated"] == b"true"
    assert 100_000 < len(record.value) < 200_000
    assert int(record.headers["x-error-value-bytes"]) == len(NEARLY_1MB)


def test_a_producer_fenced_twice_stops_with_one_line(kafka_bootstrap, new_topic, tmp_path):
    """Two services given one transactional.id (two groups, two feeds): each new producer
    fences the other's. A fenced producer is replaced once; fenced again at once, the process
    gives way with one line and exit 2, never a traceback, and the other keeps deciding."""
    names = [Topics(new_topic("in"), new_topic("out"), new_topic("dlq")) for _ in range(2)]

    def service(n: int) -> ServiceProcess:
        return ServiceProcess(
            kafka_bootstrap,
            names[n],
            tmp_path / f"state-{n}",
            tmp_path / f"svc-{n}.log",
            group_id=f"fence-{n}",
            delivery="exactly_once",
            kafka_transactional_id="shared-transactional-id",
            scaleout_instance_id=f"fence-{n}",
        )

    articles = _articles()[:20]
    with service(0) as first, service(1) as second:
        # Both keep producing transactions, each from its own feed, a few at a time, for as
        # long as both run: however slowly a loaded machine starts them, each keeps having
        # transactions for the other to fence.
        deadline = time.monotonic() + 120
        round_no = 0
        while first.running() and second.running() and time.monotonic() < deadline:
            fresh = [{**a, "id": f"{a['id']}-r{round_no}"} for a in articles]
            for topics in names:
                _produce(kafka_bootstrap, topics.input, fresh)
            round_no += 1
            time.sleep(0.2)
        wait_until(lambda: not (first.running() and second.running()), 30, what="one to give way")
        stopped, other = (first, second) if not first.running() else (second, first)
        assert stopped.process.returncode == 2, stopped.log()[-3000:]
        log = stopped.log()
        assert "Traceback" not in log, log[-3000:]
        errors = [line for line in log.splitlines() if "newsdedup: error:" in line]
        assert len(errors) == 1 and "transactional" in errors[0], log[-3000:]
        stopped.process = None
        assert other.running()
