"""Kafka faults around the service, against real brokers: no broker at start, an output topic
that refuses our records, output and dead-letter topics deleted while the service runs.

In every case the service must not drop a decision: it stops moving (nothing past the failing
batch is read or committed), says why in its log and on /readyz, and goes on by itself once
the fault is gone.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import time
import urllib.error
from pathlib import Path

import pytest
from confluent_kafka.admin import AdminClient, NewTopic
from service_support import (
    NEWSDEDUP,
    ServiceProcess,
    Topics,
    committed_offsets,
    family_tree,
    free_port,
    produce,
    read_all,
    set_topic_config,
    wait_until,
)

pytestmark = [pytest.mark.kafka, pytest.mark.slow]

CLOCK_TICKS = os.sysconf("SC_CLK_TCK")


def articles(prefix: str, n: int) -> list[dict]:
    """Small made-up articles, distinct enough that each is unique."""
    return [
        {
            "id": f"{prefix}-{i}",
            "title": f"Council report {prefix} number {i}",
            "content": f"The {i}th report of the {prefix} series covers item {i * 7919} "
            f"and the budget line {i * 104729}, with a vote expected on day {i % 28 + 1}.",
        }
        for i in range(n)
    ]


def cpu_seconds(pid: int) -> float:
    """User + system CPU time of `pid` and the processes below it (the worker processes)."""
    total = 0
    for process in family_tree(pid):
        try:
            fields = Path(f"/proc/{process}/stat").read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue  # gone meanwhile
        total += int(fields[11]) + int(fields[12])  # utime, stime (after the command)
    return total / CLOCK_TICKS


def answers(service: ServiceProcess, path: str) -> int | None:
    """The endpoint's status, or None while the service is not listening yet."""
    try:
        return service.get(path)[0]
    except urllib.error.URLError:
        return None


def test_no_broker_at_start_waits_with_backoff_then_serves(kafka_local, tmp_path):
    """Started before its broker exists: not ready, alive, a few log lines, almost no CPU;
    when the broker comes up the service finds it and decides the feed."""
    topics = Topics("late.in", "late.out", "late.dlq")
    service = ServiceProcess(
        kafka_local.bootstrap, topics, tmp_path / "state", tmp_path / "svc.log", group_id="late"
    )
    with service:
        wait_until(lambda: answers(service, "/readyz") == 503, 60, what="/readyz answering")
        time.sleep(5)  # past start-up: the worker pool and the index are open
        before = cpu_seconds(service.process.pid)
        time.sleep(20)
        spent = cpu_seconds(service.process.pid) - before
        status, reason = service.get("/readyz")
        assert (status, reason.strip()) == (503, "broker not reachable")
        assert service.get("/healthz")[0] == 200
        # A busy loop would burn a core; waiting with backoff costs next to nothing.
        assert spent < 2.0, f"{spent:.2f} CPU s in 20 s of waiting"
        waits = re.findall(r"broker not reachable; waiting .*retry_in_s=([\d.]+)", service.log())
        delays = [float(d) for d in waits]
        assert 2 <= len(delays) <= 8, service.log()[-2000:]
        assert delays == sorted(delays) and delays[-1] > delays[0], delays

        kafka_local.start()
        admin = AdminClient({"bootstrap.servers": kafka_local.bootstrap})
        for f in admin.create_topics([NewTopic(topics.input, 2, 1)]).values():
            f.result(30)
        feed = articles("late", 200)
        produce(kafka_local.bootstrap, topics.input, feed)
        records = read_all(
            kafka_local.bootstrap, topics.output, expected=len(feed), timeout=120, service=service
        )
        assert sorted(r.key.decode() for r in records) == sorted(a["id"] for a in feed)
        wait_until(lambda: service.get("/readyz")[0] == 200, 30, what="ready")
        assert service.stop() == 0


def test_an_output_topic_that_refuses_records_stops_the_service_until_fixed(
    kafka_bootstrap, kafka_admin, new_topic, tmp_path
):
    """Every decision is larger than the output topic accepts: nothing is committed, /readyz
    says which topic and why; once the topic accepts them, every article is decided once."""
    topics = Topics(new_topic("in", 2), new_topic("out"), new_topic("dlq"))
    set_topic_config(kafka_admin, topics.output, "max.message.bytes", "64")
    feed = articles("refused", 120)
    produce(kafka_bootstrap, topics.input, feed)
    service = ServiceProcess(
        kafka_bootstrap, topics, tmp_path / "state", tmp_path / "svc.log", group_id="refused"
    )
    with service:
        wait_until(lambda: service.log().count("outputs not delivered") >= 2, 90, what="retries")
        status, reason = service.get("/readyz")
        assert status == 503
        assert f"topic {topics.output!r}" in reason and "too large" in reason, reason
        assert service.running()
        assert committed_offsets(kafka_bootstrap, "refused", topics.input, 2) == [-1001, -1001]
        assert not read_all(kafka_bootstrap, topics.output, expected=0, timeout=5, settle=1)

        set_topic_config(kafka_admin, topics.output, "max.message.bytes", "1048588")
        records = read_all(
            kafka_bootstrap, topics.output, expected=len(feed), timeout=120, service=service
        )
        wait_until(lambda: service.get("/readyz")[0] == 200, 30, what="ready again")
        assert service.stop() == 0
    keys = sorted(r.key.decode() for r in records)
    assert keys == sorted(a["id"] for a in feed)  # each once: nothing was half delivered
    assert sum(committed_offsets(kafka_bootstrap, "refused", topics.input, 2)) == len(feed)


@pytest.mark.parametrize("delivery", ["exactly_once", "at_least_once"])
def test_deleted_output_and_dlq_topics_are_created_again_and_nothing_is_lost(
    kafka_bootstrap, kafka_admin, new_topic, tmp_path, delivery
):
    """Both topics the service writes to are deleted under it: the batch in hand is retried,
    the topics are created again as at start, and the batch's decisions and dead letter land
    in them (exactly once with exactly_once and a read_committed reader)."""
    topics = Topics(new_topic("in"), f"gone-out-{delivery}", f"gone-dlq-{delivery}")
    service = ServiceProcess(
        kafka_bootstrap,
        topics,
        tmp_path / "state",
        tmp_path / "svc.log",
        group_id=f"gone-{delivery}",
        delivery=delivery,
        # How long librdkafka holds records for a topic missing from the metadata before
        # failing them: 30 s by default, and in a transaction until it times out (60 s). The
        # retry path is the same, reached sooner.
        kafka_client_topic_metadata_propagation_max_ms="3000",
        kafka_client_transaction_timeout_ms="10000",
    )
    with service:
        first = articles("before", 20)
        produce(kafka_bootstrap, topics.input, first)
        read_all(kafka_bootstrap, topics.output, expected=len(first), timeout=90, service=service)
        for future in kafka_admin.delete_topics([topics.output, topics.dlq]).values():
            future.result(30)
        wait_until(
            lambda: not {topics.output, topics.dlq} & set(kafka_admin.list_topics().topics),
            30,
            what="topics deleted",
        )

        second = articles("after", 20)
        produce(kafka_bootstrap, topics.input, [*second, b"{not json"])
        decisions = read_all(
            kafka_bootstrap, topics.output, expected=len(second), timeout=180, service=service
        )
        dead = read_all(kafka_bootstrap, topics.dlq, expected=1, timeout=60, service=service)
        assert service.stop() == 0
    log = service.log()
    assert "outputs not delivered" in log and "topic created" in log
    keys = [r.key.decode() for r in decisions]
    assert set(keys) == {a["id"] for a in second}
    if delivery == "exactly_once":
        assert len(keys) == len(second)
    assert [r.value for r in dead] == [b"{not json"]
    assert dead[0].headers["x-error-reason"] == b"not_json"


def test_sigterm_while_the_broker_is_gone_exits_promptly_and_loses_nothing(kafka_local, tmp_path):
    """The broker goes away mid-feed and the service is told to stop: it exits within
    [service] stop_timeout and a few seconds (0: finished; 3: gave up on the batch in hand),
    and after both come back every article has exactly one committed decision."""
    from feeds import corpus_feed

    bootstrap = kafka_local.start()
    admin = AdminClient({"bootstrap.servers": bootstrap})
    topics = Topics("stop.in", "stop.out", "stop.dlq")
    for f in admin.create_topics([NewTopic(topics.input, 2, 1)]).values():
        f.result(30)
    feed = corpus_feed(4000)
    produce(bootstrap, topics.input, feed)
    service = ServiceProcess(
        bootstrap,
        topics,
        tmp_path / "state",
        tmp_path / "svc.log",
        group_id="stop",
        delivery="exactly_once",
    )
    service.start()
    wait_until(lambda: "partitions assigned" in service.log(), 90, what="assignment")
    time.sleep(2)
    kafka_local.stop()
    time.sleep(3)
    started = time.monotonic()
    code = service.stop(timeout=60)
    took = time.monotonic() - started
    assert code in (0, 3), service.log()[-3000:]
    assert took < 8 + 5, f"{took:.1f}s to stop"

    kafka_local.run("start", KAFKA_KEEP_DATA="1")
    service.start()
    records = read_all(
        bootstrap, topics.output, expected=len(feed), timeout=400, settle=5.0, service=service
    )
    assert service.stop() == 0
    ids = [r.json()["id"] for r in records]
    assert sorted(ids) == sorted(a["id"] for a in feed)


def test_an_unreachable_broker_logs_a_few_json_lines_and_nothing_else(tmp_path):
    """librdkafka reports every refused connection (~15 a second); its lines go through the
    service's log: JSON under `format = json`, a few per retry interval."""
    service = ServiceProcess(
        f"127.0.0.1:{free_port()}",
        Topics("gone.in", "gone.out", "gone.dlq"),
        tmp_path / "state",
        tmp_path / "svc.log",
        group_id="gone",
        log_format="json",
    )
    with service:
        time.sleep(20)
        assert service.stop() == 0
    lines = service.log().splitlines()
    events = [json.loads(line) for line in lines]  # raises on the first line that is not JSON
    assert len(lines) <= 25, "\n".join(lines)
    assert any(e["logger"] == "newsdedup.librdkafka" for e in events), "\n".join(lines)


def test_produce_to_an_unreachable_broker_prints_no_raw_librdkafka_lines(tmp_path):
    feed = tmp_path / "feed.jsonl"
    feed.write_text(json.dumps({"id": "a", "title": "t", "content": "c"}) + "\n")
    done = subprocess.run(
        [NEWSDEDUP, "produce", str(feed), "--topic", "t"],
        env={**os.environ, "NEWSDEDUP_KAFKA_BOOTSTRAP_SERVERS": f"127.0.0.1:{free_port()}"},
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 2, done.stderr
    lines = done.stderr.splitlines()
    assert not [line for line in lines if line.startswith("%")], done.stderr
    assert len(lines) <= 6, done.stderr
    assert lines[-1].startswith("newsdedup: error: cannot reach Kafka")
